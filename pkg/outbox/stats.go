package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// TargetStats is the dispatcher's backlog for one target.
type TargetStats struct {
	// Pending events are still to be delivered; Dead ones exhausted their attempts and are kept
	// as the dead-letter record.
	Pending int64
	Dead    int64
	// OldestPendingAt is when the oldest pending event was written (nil when none is pending)
	// and OldestPendingAge its age at now.
	//
	// A KAFKA:msg row is written once, so its created_at is exact. A KAFKA:schd row is reused
	// per FLID: created_at is the FLID's first event and would make a fresh state look days
	// old, so its updated_at is used instead, which a failed attempt also moves: for that
	// target the age is a lower bound.
	OldestPendingAt  *time.Time
	OldestPendingAge time.Duration
}

// Stats reads the outbox's backlog per target at now (the caller's clock). Every known target
// has an entry, zero included; a target the table holds that this code does not know (a newer
// schema) is reported too rather than hidden.
func Stats(ctx context.Context, q db.Executor, now time.Time) (map[string]TargetStats, error) {
	out := map[string]TargetStats{TargetMsg: {}, TargetSchd: {}}
	// state <> 'SENT' matches the partial index msg_event_flid, so the sent history (the bulk
	// of the table until retention) is never read.
	rows, err := q.Query(ctx, `SELECT target,
		count(*) FILTER (WHERE state = 'PENDING'),
		count(*) FILTER (WHERE state = 'DEAD'),
		min(CASE WHEN target = 'KAFKA:schd' THEN updated_at ELSE created_at END) FILTER (WHERE state = 'PENDING')
		FROM msg_event WHERE state <> 'SENT' GROUP BY target`)
	if err != nil {
		return nil, fmt.Errorf("outbox statistics: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var target string
		var s TargetStats
		if err := rows.Scan(&target, &s.Pending, &s.Dead, &s.OldestPendingAt); err != nil {
			return nil, fmt.Errorf("scan outbox statistics: %w", err)
		}
		if s.OldestPendingAt != nil {
			s.OldestPendingAge = max(now.Sub(*s.OldestPendingAt), 0)
		}
		out[target] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox statistics: %w", err)
	}
	return out, nil
}
