package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// DeleteSent deletes up to limit SENT events whose sent_at is before cutoff (now −
// pipeline.event-retention; sent_at is the only retention base, R-RETAIN-2) and returns how
// many it deleted. DEAD rows are never deleted here (R-RETAIN-2): a KAFKA:msg DEAD row is the
// dead-letter record, kept until an operator handles it; a KAFKA:schd DEAD row stays until the
// next accepted state of its FLID resets it to PENDING, after which it is sent and ages out
// like any other. The candidates are locked with SKIP LOCKED and the state re-checked by the
// DELETE itself, so a schd row the pump is replacing right now is never deleted.
func DeleteSent(ctx context.Context, q db.Executor, cutoff time.Time, limit int) (int64, error) {
	tag, err := q.Exec(ctx, `WITH c AS MATERIALIZED (
			SELECT event_id FROM msg_event WHERE state = 'SENT' AND sent_at < $1
			ORDER BY sent_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		DELETE FROM msg_event e USING c WHERE e.event_id = c.event_id AND e.state = 'SENT' AND e.sent_at < $1`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("delete sent events: %w", err)
	}
	return tag.RowsAffected(), nil
}
