package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// ReopenRequest chooses abandoned markers to retry: the listed msg_ids, or every row abandoned
// for Reason, or both (a row must then match both). At least one of them must be given, so a
// request can never reopen everything by accident.
type ReopenRequest struct {
	MsgIDs []int64
	Reason string // MISSING_ROW or TRANSIENT_DEADLINE; empty = any reason
	// Limit bounds the rows reopened (or listed, in a dry run); 0 means 1000.
	Limit int
	// DryRun lists what would be reopened and changes nothing.
	DryRun bool
}

// Reopened is one row a reopen cleared (or would clear), as it was before.
type Reopened struct {
	MsgID       int64
	State       State
	Reason      string
	AbandonedAt time.Time
	Attempts    int
	LastError   string
}

// ErrReopenNoFilter is returned when a reopen request names neither IDs nor a reason.
var ErrReopenNoFilter = errors.New("reopen needs msg_ids or a reason")

const defaultReopenLimit = 1000

// ReopenBackfill clears the abandonment of the chosen rows and schedules one immediate marker
// try (R-BACKFILL-6). It returns the rows it reopened, in msg_id order;
// IDs that are not abandoned (unknown, already marked, still owing a normal try, or no longer
// terminal because a replay got there first) are simply not in the result.
//
// The rows are locked with FOR UPDATE before they change: the per-message gate of R-GATE-1,
// the same row lock the backfill holds around a marker write and replay takes, so a reopen
// never interleaves with either. backfill_attempts and backfill_last_error are kept as evidence;
// the try is immediate because backfill_next_at becomes now. If that try fails transiently
// after R, the row is abandoned again at once (R-BACKFILL-6): one try, not a new R.
func ReopenBackfill(ctx context.Context, q db.Executor, req ReopenRequest, now time.Time) ([]Reopened, error) {
	if len(req.MsgIDs) == 0 && req.Reason == "" {
		return nil, ErrReopenNoFilter
	}
	if req.Reason != "" && req.Reason != AbandonMissingRow && req.Reason != AbandonTransientDeadline {
		return nil, fmt.Errorf("reopen: unknown abandon reason %q", req.Reason)
	}
	limit := req.Limit
	if limit <= 0 {
		limit = defaultReopenLimit
	}
	var ids []int64
	if len(req.MsgIDs) > 0 {
		ids = req.MsgIDs
	}
	// The candidate predicate is evaluated again on the locked row version (READ COMMITTED
	// re-checks FOR UPDATE rows), so a row a replay moved back to PENDING meanwhile drops out.
	const chosen = `SELECT msg_id, state, coalesce(backfill_abandon_reason, ''), backfill_abandoned_at,
			backfill_attempts, coalesce(backfill_last_error, '')
		FROM proc_state
		WHERE backfill_abandoned_at IS NOT NULL AND backfill_at IS NULL
		  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
		  AND ($1::bigint[] IS NULL OR msg_id = ANY($1))
		  AND ($2 = '' OR backfill_abandon_reason = $2)
		ORDER BY msg_id LIMIT $3`
	var sql string
	args := []any{ids, req.Reason, limit}
	if req.DryRun {
		sql = chosen
	} else {
		sql = `WITH c AS (` + chosen + ` FOR UPDATE)
			UPDATE proc_state p SET backfill_abandoned_at = NULL, backfill_abandon_reason = NULL,
				backfill_next_at = $4, updated_at = $4
			FROM c WHERE p.msg_id = c.msg_id
			RETURNING c.*`
		args = append(args, now)
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("reopen backfill: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Reopened, error) {
		var o Reopened
		err := r.Scan(&o.MsgID, &o.State, &o.Reason, &o.AbandonedAt, &o.Attempts, &o.LastError)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("reopen backfill: %w", err)
	}
	// RETURNING does not keep the CTE's order.
	slices.SortFunc(out, func(a, b Reopened) int { return cmp.Compare(a.MsgID, b.MsgID) })
	return out, nil
}
