package aodb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// The reads behind the upstream contract checks (docs/ingest.md, "Contract violations"). They
// read the processed marker, which discovery's scan never does (R-INGEST-2): they only judge
// whether the rows discovery read may be enqueued, never which rows it reads.

// FirstMarkedSince returns the smallest ID in (after, through] whose processed marker was
// written at or after since, and that marker's time; found is false when there is none. It is
// a primary-key range scan over the IDs of one discovery batch, LIMIT 1. since is truncated
// to the second, since CMINMSGS_DATE_PROCESSED may keep no fractions: a marker written in the
// same second counts.
func (i *Inbox) FirstMarkedSince(ctx context.Context, after, through int64, since time.Time) (id int64, at time.Time, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	err = i.db.QueryRowContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_DATE_PROCESSED FROM cminmsgs
		WHERE CMINMSGS_ID > ? AND CMINMSGS_ID <= ? AND CMINMSGS_DATE_PROCESSED >= ?
		ORDER BY CMINMSGS_ID LIMIT 1`, after, through, since.Truncate(time.Second)).Scan(&id, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, time.Time{}, false, nil
	case err != nil:
		return 0, time.Time{}, false, fmt.Errorf("look up processed markers in %d-%d: %w", after+1, through, err)
	}
	return id, at, true, nil
}

// MarkState is one inbox row's ID and whether it carries a processed marker (anyone's).
type MarkState struct {
	ID     int64
	Marked bool
}

// MarkStates returns up to limit rows with an ID in (after, through] in ID order, each with
// whether it carries a processed marker; through 0 means no upper bound.
func (i *Inbox) MarkStates(ctx context.Context, after, through int64, limit int) ([]MarkState, error) {
	if through == 0 {
		through = math.MaxInt64
	}
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	rows, err := i.db.QueryContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_DATE_PROCESSED IS NOT NULL FROM cminmsgs
		WHERE CMINMSGS_ID > ? AND CMINMSGS_ID <= ? ORDER BY CMINMSGS_ID LIMIT ?`, after, through, limit)
	if err != nil {
		return nil, fmt.Errorf("read inbox markers after %d: %w", after, err)
	}
	defer rows.Close()
	var out []MarkState
	for rows.Next() {
		var m MarkState
		if err := rows.Scan(&m.ID, &m.Marked); err != nil {
			return nil, fmt.Errorf("read inbox markers after %d: %w", after, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read inbox markers after %d: %w", after, err)
	}
	return out, nil
}
