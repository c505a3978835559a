package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// DeleteFinished deletes up to limit processing records that are done with
// (R-RETAIN-1): terminal, marker confirmed (backfill_at set; an abandoned row is not done and
// is kept), and not touched since before cutoff (now − proc-retention; updated_at is the base
// because both the terminal state and the marker confirmation move it and nothing after them
// does). A message's flight history (flight_change) goes with it, in the same statement, so it
// is kept exactly as long (R-ORDER-8). It returns how many processing records it deleted.
//
// The candidates are a MATERIALIZED CTE, not an IN (subquery): PostgreSQL may rescan an IN
// subquery, and a rescan after some rows are gone returns others, so LIMIT would not bound the
// batch.
//
// A replay may turn a DEAD row back to PENDING at any time without the pipeline lock, so the
// state is re-checked by the DELETE itself: the candidates are locked with SKIP LOCKED (a row a
// replay holds is skipped, not waited for) and the outer WHERE repeats the predicate, which
// READ COMMITTED evaluates again on the row version it deletes. A replay that committed first
// makes the predicate false; one that comes later finds the row gone.
func DeleteFinished(ctx context.Context, q db.Executor, cutoff time.Time, limit int) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `WITH c AS MATERIALIZED (
			SELECT msg_id FROM proc_state
			WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NOT NULL AND updated_at < $1
			ORDER BY msg_id LIMIT $2 FOR UPDATE SKIP LOCKED)
		, d AS (DELETE FROM proc_state p USING c WHERE p.msg_id = c.msg_id
		  AND p.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND p.backfill_at IS NOT NULL AND p.updated_at < $1
		  RETURNING p.msg_id)
		, h AS (DELETE FROM flight_change f USING d WHERE f.msg_id = d.msg_id)
		SELECT count(*) FROM d`, cutoff, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("delete finished processing records: %w", err)
	}
	return n, nil
}
