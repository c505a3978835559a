package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Ack is an operator's acknowledgement of a DEAD row: who reviewed it, when and why. It takes
// the row out of the DEAD gauge (and so the MsgxMessagesDead alert); the row stays DEAD and
// listed until retention deletes it, and a replay of a replayable row clears it.
type Ack struct {
	At     time.Time
	By     string
	Reason string
}

// AckRequest chooses the DEAD rows to acknowledge: the rows named, or every DEAD row of one
// error class (exactly one of the two).
type AckRequest struct {
	MsgIDs []int64
	Class  ErrorClass
	By     string
	Reason string
	// Limit bounds the rows one call acknowledges by class; 0 means 10000. AckResult.More says
	// when the class holds more: the caller repeats the request.
	Limit int
	// DryRun reports the rows the call would acknowledge, and how the named ones stand,
	// without changing any.
	DryRun bool
}

// AckResult is what an acknowledgement did (or, for a dry run, would do).
type AckResult struct {
	// Acknowledged are the rows this call acknowledged.
	Acknowledged []int64
	// Already are named rows acknowledged before: they keep their first acknowledgement.
	Already []int64
	// NotDead are named rows that exist and are not DEAD.
	NotDead []int64
	// NotFound are named rows that do not exist (never enqueued, or deleted by retention).
	NotFound []int64
	More     bool
}

// ErrAckSelector is returned for a request without exactly one selector or without a reason.
var ErrAckSelector = errors.New("acknowledge dead: name msg_ids or one error class, and a reason")

const defaultAckLimit = 10000

// AcknowledgeDead records the acknowledgement of the selected DEAD rows that have none. One
// statement: its WHERE is checked again on a row a replay changed meanwhile (the replay's lock,
// R-GATE-1), so a row that stopped being DEAD is never acknowledged.
func AcknowledgeDead(ctx context.Context, q db.Executor, req AckRequest, now time.Time) (AckResult, error) {
	var res AckResult
	if (len(req.MsgIDs) > 0) == (req.Class != "") || req.Reason == "" {
		return res, ErrAckSelector
	}
	limit := req.Limit
	if limit <= 0 {
		limit = defaultAckLimit
	}
	var ids []int64
	if len(req.MsgIDs) > 0 {
		ids = req.MsgIDs
	}
	// A dry run selects what the UPDATE would: the same candidates, under the same limit.
	const candidates = `SELECT msg_id FROM proc_state
			WHERE state = 'DEAD' AND acknowledged_at IS NULL
			  AND ($1::bigint[] IS NULL OR msg_id = ANY($1)) AND ($2 = '' OR error_class = $2)
			ORDER BY msg_id LIMIT $3`
	var (
		rows pgx.Rows
		err  error
	)
	if req.DryRun {
		rows, err = q.Query(ctx, candidates, ids, string(req.Class), limit)
	} else {
		rows, err = q.Query(ctx, `UPDATE proc_state SET acknowledged_at = $4, acknowledged_by = $5, acknowledged_reason = $6
		WHERE msg_id IN (`+candidates+`)
		  AND state = 'DEAD' AND acknowledged_at IS NULL
		RETURNING msg_id`, ids, string(req.Class), limit, now.UTC(), req.By, req.Reason)
	}
	if err != nil {
		return res, fmt.Errorf("acknowledge dead: %w", err)
	}
	if res.Acknowledged, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		return res, fmt.Errorf("acknowledge dead: %w", err)
	}
	slices.Sort(res.Acknowledged)
	// A full batch may have left rows of the class: the caller asks again until it is not full.
	res.More = ids == nil && len(res.Acknowledged) == limit
	if ids == nil {
		return res, nil
	}
	rows, err = q.Query(ctx, `SELECT id, p.msg_id IS NOT NULL, coalesce(p.state = 'DEAD' AND p.acknowledged_at IS NOT NULL, false)
		FROM unnest($1::bigint[]) AS id LEFT JOIN proc_state p ON p.msg_id = id ORDER BY id`, ids)
	if err != nil {
		return res, fmt.Errorf("acknowledge dead: selected rows: %w", err)
	}
	var id int64
	var found, acked bool
	_, err = pgx.ForEachRow(rows, []any{&id, &found, &acked}, func() error {
		switch {
		case slices.Contains(res.Acknowledged, id):
		case !found:
			res.NotFound = append(res.NotFound, id)
		case acked:
			res.Already = append(res.Already, id)
		default:
			res.NotDead = append(res.NotDead, id)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("acknowledge dead: selected rows: %w", err)
	}
	res.Already, res.NotDead, res.NotFound = slices.Compact(res.Already), slices.Compact(res.NotDead), slices.Compact(res.NotFound)
	return res, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
