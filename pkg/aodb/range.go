package aodb

import (
	"context"
	"fmt"
	"strings"
)

// MaxRanges bounds how many ID ranges one InRanges call may look up, so that the statement
// stays small whatever the number of watched holes.
const MaxRanges = 100

// InRanges returns up to limit rows whose ID lies in one of the inclusive ranges and is
// greater than after, in ID order (late-arrival reconciliation pages through the released
// holes with after). Each range is a primary-key range scan; like After, it never looks at the
// processed marker.
func (i *Inbox) InRanges(ctx context.Context, ranges [][2]int64, after int64, limit int) ([]Row, error) {
	if len(ranges) == 0 {
		return nil, nil
	}
	if len(ranges) > MaxRanges {
		return nil, fmt.Errorf("look up inbox ranges: %d ranges, at most %d per call", len(ranges), MaxRanges)
	}
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	var where strings.Builder
	args := make([]any, 0, 2*len(ranges)+2)
	for n, r := range ranges {
		if n > 0 {
			where.WriteString(" OR ")
		}
		where.WriteString("CMINMSGS_ID BETWEEN ? AND ?")
		args = append(args, r[0], r[1])
	}
	args = append(args, after, limit)
	rows, err := i.db.QueryContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_DATE_RECEIVED FROM cminmsgs
		WHERE (`+where.String()+`) AND CMINMSGS_ID > ? ORDER BY CMINMSGS_ID LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("look up %d inbox ranges: %w", len(ranges), err)
	}
	return scanRows(rows)
}

// IDsBetween returns the IDs of the rows in [first, last] that are visible now, in order.
func (i *Inbox) IDsBetween(ctx context.Context, first, last int64) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	rows, err := i.db.QueryContext(ctx, `SELECT CMINMSGS_ID FROM cminmsgs WHERE CMINMSGS_ID BETWEEN ? AND ? ORDER BY CMINMSGS_ID`, first, last)
	if err != nil {
		return nil, fmt.Errorf("read inbox ids %d-%d: %w", first, last, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read inbox ids %d-%d: %w", first, last, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read inbox ids %d-%d: %w", first, last, err)
	}
	return ids, nil
}

// IDsAfter returns up to limit IDs of visible rows in (after, upTo], in order: the scan of the
// hole window beyond a discovery round's batch (docs/ingest.md, "Holes"). It reads the primary
// key only and never looks at the processed marker (R-INGEST-2).
func (i *Inbox) IDsAfter(ctx context.Context, after, upTo int64, limit int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	rows, err := i.db.QueryContext(ctx, `SELECT CMINMSGS_ID FROM cminmsgs WHERE CMINMSGS_ID > ? AND CMINMSGS_ID <= ?
		ORDER BY CMINMSGS_ID LIMIT ?`, after, upTo, limit)
	if err != nil {
		return nil, fmt.Errorf("scan inbox ids after %d: %w", after, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scan inbox ids after %d: %w", after, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("scan inbox ids after %d: %w", after, err)
	}
	return ids, nil
}
