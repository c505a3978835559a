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
// The candidates are read in finished_at order through proc_state_finished: finished_at is set
// when the row becomes terminal, at or before every later move of updated_at, so updated_at <
// cutoff implies finished_at < cutoff, and the walk stops at the first row finished after the
// cutoff. Walked in msg_id order instead, a round that finds fewer expired rows than a batch
// (every round of a sweep that keeps up) read the whole table to the end: about 280 ms at a
// week's million rows, against a few ms this way. A clock between the services that puts a
// marker's updated_at before the pump's finished_at delays a deletion by that skew, never
// brings one forward, since the DELETE still checks updated_at.
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
			WHERE finished_at IS NOT NULL AND finished_at < $1
			  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NOT NULL AND updated_at < $1
			ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)
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
