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

// Replayable lists the error classes an operator may replay (R-REPLAY-1):
// failures a codec fix, a new processor or repaired infrastructure can cure, and exhaustion
// after review. MALFORMED (the message itself is illegal) and PROTOCOL are never replayed.
// UNSUPPORTED is replayed in state SKIPPED too (R-REPLAY-1): that is how the rows a kind left
// before it became supported are brought in; other SKIPPED rows (duplicates, the flight rules'
// skips) are final.
func Replayable() []ErrorClass { return []ErrorClass{CodecError, Unsupported, Infra, Exhausted} }

// ReplayRequest chooses the messages to replay. The selectors combine (a row must match every
// one given) and at least one is required, so a request can never replay everything by
// accident.
type ReplayRequest struct {
	// MsgIDs names messages; each one that is not replayed is reported back.
	MsgIDs []int64
	// Class selects the FAILED and DEAD messages of one error class.
	Class ErrorClass
	// FromID and ToID select FAILED and DEAD messages in an inclusive msg_id range; ToID 0
	// means no range.
	FromID, ToID int64
	// Limit bounds the rows replayed (or listed); 0 means 1000. Result.More says when the
	// selection holds more: the caller repeats the request.
	Limit int
	// DryRun reports what would be replayed and changes nothing.
	DryRun bool
}

// Replayed is one message a replay put back to PENDING (or would, in a dry run), as it was
// before.
type Replayed struct {
	MsgID    int64
	State    State // FAILED or DEAD, or SKIPPED for UNSUPPORTED
	Class    ErrorClass
	Attempts int
	// Marked says the processed marker had already been written to the inbox row. It stays
	// there (markers are monotonic, R-BACKFILL-1): the inbox reads "processed" while the
	// message is processed again, and the next terminal state's backfill finds the marker
	// already written and records it as confirmed (R-REPLAY-4).
	Marked bool
	// BackfillAbandoned says the backfill had given up on the marker. The abandonment is kept
	// as evidence and the new terminal state is not swept until an operator reopens it.
	BackfillAbandoned bool
	// Applied says the message's step ① had committed (proc_state.applied_at): its flight
	// change and events are in place, so the re-run does not apply it again over newer state;
	// it re-projects the current state of its flights to Redis and finishes SUCCEEDED.
	Applied bool
}

// ReplayResult is what a replay did (or would do).
type ReplayResult struct {
	Replayed []Replayed
	// Malformed lists selected MALFORMED messages: never replayed, reported back.
	Malformed []int64
	// NotReplayable lists the other selected messages that were not replayed: named IDs that
	// are unknown, not FAILED or DEAD, or of a class outside the whitelist (PROTOCOL or none);
	// for class and range selections, FAILED and DEAD rows outside the whitelist.
	NotReplayable []int64
	// More says the selection held more replayable rows than Limit.
	More bool
}

// ErrReplayNoFilter is returned when a replay request names no selector.
var ErrReplayNoFilter = errors.New("replay needs msg_ids, an error class or an id range")

const defaultReplayLimit = 1000

// Replay puts the selected FAILED and DEAD messages of a replayable class, and the SKIPPED
// UNSUPPORTED ones, back to PENDING
// (R-REPLAY-2): attempts 0, next_attempt_at NULL, error class and last error kept for
// audit, identity kept (so the message is not a duplicate of itself), processing_started_at
// kept (the first attempt's start). The terminal fields go back to what an unfinished row
// has (finished_at, backfill_next_at and backfill_at NULL, as the proc_state CHECKs demand);
// backfill_attempts, backfill_last_error and the abandonment stay as evidence. applied_at stays
// too: a message whose step ① had committed is not applied again (Replayed.Applied).
//
// It goes through the per-message gate of R-GATE-1: the rows are locked with FOR UPDATE
// before they change and the predicate is re-checked on the locked version, so a replay never
// interleaves with a marker write (the backfill holds the same lock from "still terminal?"
// to backfill_at), a reopen, or the pump's exhaustion. The pump is woken when the transaction
// commits. Replay processes the current state; it does not restore the historical order.
func Replay(ctx context.Context, b db.Beginner, req ReplayRequest, now time.Time) (ReplayResult, error) {
	var res ReplayResult
	if len(req.MsgIDs) == 0 && req.Class == "" && req.ToID == 0 {
		return res, ErrReplayNoFilter
	}
	if req.ToID != 0 && req.FromID > req.ToID {
		return res, fmt.Errorf("replay: empty id range %d..%d", req.FromID, req.ToID)
	}
	limit := cmp.Or(req.Limit, defaultReplayLimit)
	if limit < 0 {
		return res, fmt.Errorf("replay: negative limit %d", req.Limit)
	}
	var ids []int64
	if len(req.MsgIDs) > 0 {
		ids = req.MsgIDs
	}
	whitelist := Replayable()
	classes := make([]string, len(whitelist))
	for i, c := range whitelist {
		classes[i] = string(c)
	}
	// $1 ids, $2 class, $3 from, $4 to, $5 whitelist.
	const selected = `($1::bigint[] IS NULL OR msg_id = ANY($1))
		  AND ($2 = '' OR error_class = $2)
		  AND ($4::bigint = 0 OR msg_id BETWEEN $3 AND $4)`
	const candidates = `SELECT msg_id, state, error_class, attempts, backfill_at IS NOT NULL, backfill_abandoned_at IS NOT NULL,
			applied_at IS NOT NULL
		FROM proc_state
		WHERE ` + selected + `
		  AND ` + replayableRow + `
		ORDER BY msg_id LIMIT $6`
	args := []any{ids, string(req.Class), req.FromID, req.ToID, classes, limit + 1}

	err := db.WithTx(ctx, b, func(tx pgx.Tx) error {
		sql := candidates
		if !req.DryRun {
			// A message that ended on its first attempt has no history yet (its proc_state row
			// described that attempt); h keeps it before the reset overwrites the row, reading
			// the row as it was (one snapshot).
			sql = `WITH c AS (` + candidates + ` FOR UPDATE),
				chosen AS (SELECT msg_id FROM c ORDER BY msg_id LIMIT $6 - 1),
				h AS (INSERT INTO proc_attempt (msg_id, attempt_no, started_at, ended_at, outcome, error_class, error)
					SELECT p.msg_id, 1, coalesce(p.processing_started_at, p.finished_at), p.finished_at, p.state,
						p.error_class, p.last_error
					FROM proc_state p JOIN chosen USING (msg_id)
					WHERE p.finished_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM proc_attempt a WHERE a.msg_id = p.msg_id)),
				u AS (UPDATE proc_state p SET state = 'PENDING', attempts = 0, next_attempt_at = NULL,
					finished_at = NULL, backfill_next_at = NULL, backfill_at = NULL, updated_at = $7,
					acknowledged_at = NULL, acknowledged_by = NULL, acknowledged_reason = NULL
					FROM chosen
					WHERE p.msg_id = chosen.msg_id
					RETURNING p.msg_id)
				SELECT * FROM c ORDER BY msg_id`
			args = append(args, now)
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		res.Replayed, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Replayed, error) {
			var m Replayed
			err := r.Scan(&m.MsgID, &m.State, &m.Class, &m.Attempts, &m.Marked, &m.BackfillAbandoned, &m.Applied)
			return m, err
		})
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if len(res.Replayed) > limit {
			res.Replayed, res.More = res.Replayed[:limit], true
		}
		if err := replayIgnored(ctx, tx, &res, ids, selected, args[:5]); err != nil {
			return err
		}
		if !req.DryRun && len(res.Replayed) > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, Channel); err != nil {
				return fmt.Errorf("replay: notify pump: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return ReplayResult{}, err
	}
	return res, nil
}

// replayableRow is the whitelist as a predicate ($5 = Replayable()).
const replayableRow = `((state IN ('FAILED', 'DEAD') AND error_class = ANY($5)) OR (state = 'SKIPPED' AND error_class = 'UNSUPPORTED'))`

// replayIgnored fills in what the selection matched but replay left alone. It only reads: the
// rows it reports are not changed by the replay, so they need no lock.
func replayIgnored(ctx context.Context, tx pgx.Tx, res *ReplayResult, ids []int64, selected string, args []any) error {
	rows, err := tx.Query(ctx, `SELECT msg_id, coalesce(error_class, '') = 'MALFORMED' FROM proc_state
		WHERE `+selected+`
		  AND NOT `+replayableRow+`
		  AND ($1::bigint[] IS NOT NULL OR state IN ('FAILED', 'DEAD'))
		ORDER BY msg_id LIMIT 10000`, args...)
	if err != nil {
		return fmt.Errorf("replay: ignored rows: %w", err)
	}
	seen := map[int64]bool{}
	for _, m := range res.Replayed {
		seen[m.MsgID] = true
	}
	var id int64
	var malformed bool
	_, err = pgx.ForEachRow(rows, []any{&id, &malformed}, func() error {
		if seen[id] {
			return nil // replayed by this call: read back as PENDING
		}
		seen[id] = true
		if malformed {
			res.Malformed = append(res.Malformed, id)
		} else {
			res.NotReplayable = append(res.NotReplayable, id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("replay: ignored rows: %w", err)
	}
	if res.More {
		return nil // IDs past the limit are neither replayed nor ignored: the caller repeats
	}
	// Named IDs with no processing record at all.
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			res.NotReplayable = append(res.NotReplayable, id)
		}
	}
	slices.Sort(res.NotReplayable)
	return nil
}
