package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// selectionLimit is how many messages one Replay or Reopen changes at most; the response's
// "more" tells the operator to call again. It matches the largest ID list a request may name.
const selectionLimit = controlv1.MaxSelectedIDs

// Replay implements ControlService.Replay through queue.Replay (the per-message gate, the
// whitelist, the pump's wake-up) on the control role's lock connection.
func (s *Service) Replay(ctx context.Context, req *controlv1.ReplayRequest) (*controlv1.ReplayResponse, error) {
	qr := queue.ReplayRequest{MsgIDs: req.GetMsgIds(), Limit: selectionLimit, DryRun: req.GetDryRun()}
	if c := req.GetErrorClass(); c != controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
		qr.Class = queue.ErrorClass(strings.TrimPrefix(c.String(), classPrefix))
	}
	if r := req.GetRange(); r != nil {
		qr.FromID, qr.ToID = r.GetFirst(), r.GetLast()
	}
	var res queue.ReplayResult
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = queue.Replay(ctx, tx, qr, s.cfg.Clock.Now())
		return err
	})
	if err != nil {
		return nil, s.writeStatus(ctx, "replay", err)
	}
	resp := &controlv1.ReplayResponse{
		DryRun:           req.GetDryRun(),
		Replayed:         int64(len(res.Replayed)),
		IgnoredMalformed: int64(len(res.Malformed)),
		MalformedIds:     res.Malformed,
		More:             res.More,
	}
	replayed := make(map[int64]bool, len(res.Replayed))
	for _, m := range res.Replayed {
		replayed[m.MsgID] = true
		resp.ReplayedIds = append(resp.ReplayedIds, m.MsgID)
		if m.Marked {
			resp.AlreadyMarkedIds = append(resp.AlreadyMarkedIds, m.MsgID)
		}
	}
	// A message is reported once: one the replay changed is never also "not replayable",
	// whichever order the store read the two lists in.
	for _, id := range res.NotReplayable {
		if !replayed[id] {
			resp.NotReplayableIds = append(resp.NotReplayableIds, id)
		}
	}
	return resp, nil
}

// Reopen implements ControlService.Reopen through queue.ReopenBackfill (the per-message gate)
// on the control role's lock connection.
func (s *Service) Reopen(ctx context.Context, req *controlv1.ReopenRequest) (*controlv1.ReopenResponse, error) {
	qr := queue.ReopenRequest{MsgIDs: req.GetMsgIds(), Limit: selectionLimit, DryRun: req.GetDryRun()}
	if r := req.GetReason(); r != controlv1.AbandonReason_ABANDON_REASON_UNSPECIFIED {
		qr.Reason = strings.TrimPrefix(r.String(), reasonPrefix)
	}
	var reopened []queue.Reopened
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		reopened, err = queue.ReopenBackfill(ctx, tx, qr, s.cfg.Clock.Now())
		return err
	})
	if err != nil {
		return nil, s.writeStatus(ctx, "reopen", err)
	}
	resp := &controlv1.ReopenResponse{DryRun: req.GetDryRun(), Reopened: int64(len(reopened)), More: len(reopened) == selectionLimit}
	for _, r := range reopened {
		resp.ReopenedIds = append(resp.ReopenedIds, r.MsgID)
	}
	return resp, nil
}

// seedModes maps the API's modes to the cursor's.
var seedModes = map[controlv1.SeedMode]cursor.Mode{
	controlv1.SeedMode_SEED_MODE_MIN:  cursor.SeedMin,
	controlv1.SeedMode_SEED_MODE_ZERO: cursor.SeedZero,
	controlv1.SeedMode_SEED_MODE_MAX:  cursor.SeedMax,
	controlv1.SeedMode_SEED_MODE_ID:   cursor.SeedID,
}

// SeedCutover implements ControlService.SeedCutover through cursor.Apply. The inbox's bounds
// and the IDs visible below the new watermark are read first, outside the transaction: the
// lock connection must not wait on MySQL (cursor.ReadView).
func (s *Service) SeedCutover(ctx context.Context, req *controlv1.SeedCutoverRequest) (*controlv1.SeedCutoverResponse, error) {
	mode, ok := seedModes[req.GetMode()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "mode %s is not supported", req.GetMode())
	}
	seed := cursor.Seed{Mode: mode, ID: req.GetWatermark()}
	view, err := cursor.ReadView(ctx, s.cfg.Inbox, seed)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Unavailable, "seed cutover: %v", err)
	}
	inboxMin, inboxMax := view.Min, view.Max
	now := s.cfg.Clock.Now()
	var w int64
	err = s.write(ctx, func(tx pgx.Tx) error {
		var err error
		w, err = cursor.Apply(ctx, tx, seed, view, now)
		return err
	})
	if err != nil {
		return nil, s.writeStatus(ctx, "seed cutover", err)
	}
	return &controlv1.SeedCutoverResponse{
		Mode:       req.GetMode(),
		Watermark:  w,
		SeededAt:   timestamp(now),
		InboxMinId: inboxMin,
		InboxMaxId: inboxMax,
	}, nil
}

// write runs fn as one fenced transaction on the control role's lock connection, each
// statement bounded by writeTimeout and each row-lock wait by less, so a row held by the
// backfill's marker write delays the call but never holds the lock connection near its lease.
// writeTimeout bounds each statement of a mutating call (statement_timeout; lock waits get
// less). It stays well under the lock connection's lease (10 s) so a slow write cannot cost
// the control role.
const writeTimeout = 5 * time.Second

func (s *Service) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.cfg.Writer.Tx(ctx, func(tx pgx.Tx) error {
		timeout := writeTimeout.Milliseconds()
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d; SET LOCAL lock_timeout = %d",
			timeout, timeout*4/5)); err != nil {
			return fmt.Errorf("set write timeouts: %w", err)
		}
		return fn(tx)
	})
}

// writeStatus maps the error of a mutating call: a standby answers UNAVAILABLE naming the
// active instance; a refused seeding, an empty inbox or a refused contract resolution is
// FAILED_PRECONDITION (the system's state, not the request, is wrong); a lost lock is UNAVAILABLE (retry on the new holder);
// a lock wait that timed out is ABORTED (a concurrent gate holder: try again).
func (s *Service) writeStatus(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(err, ErrStandby):
		return s.standby(ctx, op)
	case errors.Is(err, cursor.ErrSeedRefused), errors.Is(err, cursor.ErrInboxEmpty), errors.Is(err, cursor.ErrResolveRefused):
		return status.Errorf(codes.FailedPrecondition, "%s: %v", op, err)
	case errors.Is(err, leader.ErrLost):
		return status.Errorf(codes.Unavailable, "%s: this instance lost the control role during the call; nothing was committed: %v", op, err)
	case db.IsLockTimeout(err):
		return status.Errorf(codes.Aborted, "%s: a selected message is locked by the backfill or another operator call; try again: %v", op, err)
	}
	return toStatus(ctx, op, err)
}

// standby builds the refusal of a standby: UNAVAILABLE (clients retry it, and the operator
// should send the call elsewhere) naming the active instance, also as ErrorInfo metadata for
// scripts.
func (s *Service) standby(ctx context.Context, op string) error {
	active, since := "", ""
	if holders, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) ([]leader.Holder, error) { return leader.Holders(ctx, tx) }); err == nil {
		for _, h := range holders {
			if h.Role == "control" && h.Active {
				active, since = h.Instance, h.Since.UTC().Format("2006-01-02T15:04:05Z")
			}
		}
	}
	msg := fmt.Sprintf("%s: %s is a standby control instance and refuses mutating calls; ", op, s.cfg.Instance)
	if active != "" {
		msg += fmt.Sprintf("the active instance is %s (since %s): send the call there", active, since)
	} else {
		msg += "no instance holds the control role right now: retry in a few seconds"
	}
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   "STANDBY",
		Domain:   "msgx.control.v1",
		Metadata: map[string]string{"active_instance": active, "served_by": s.cfg.Instance},
	}); err == nil {
		st = d
	}
	return st.Err()
}
