package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// RequeueEvents implements ControlService.RequeueEvents: the DEAD events of the selection are
// read with a row lock and put back to PENDING one by one through outbox.Requeue, then the
// dispatcher is woken, all in one transaction on the control role's lock connection. The lock
// keeps the pump's schedule upsert from replacing a selected row in between, so the response
// lists exactly what was requeued.
func (s *Service) RequeueEvents(ctx context.Context, req *controlv1.RequeueEventsRequest) (*controlv1.RequeueEventsResponse, error) {
	f := outbox.DeadFilter{
		EventIDs:     req.GetEventIds(),
		Target:       req.GetTarget(),
		PartitionKey: req.GetFlid(),
		MsgID:        req.GetMsgId(),
		ForUpdate:    !req.GetDryRun(),
	}
	limit := cmp.Or(int(req.GetLimit()), controlv1.MaxRequeueEvents)
	now := s.cfg.Clock.Now()
	var (
		dead []outbox.Dead
		more bool
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		// One row more than the limit tells whether the selection holds more.
		if dead, err = outbox.DeadEvents(ctx, tx, f, limit+1); err != nil {
			return err
		}
		if len(dead) > limit {
			dead, more = dead[:limit], true
		}
		if req.GetDryRun() || len(dead) == 0 {
			return nil
		}
		for _, e := range dead {
			if err := outbox.Requeue(ctx, tx, e.ID, now); err != nil {
				// The row is locked since it was read DEAD: not finding it DEAD now is a
				// broken invariant, not a race to report as success.
				if errors.Is(err, db.ErrNotFound) {
					return fmt.Errorf("requeue event %d: it changed under the row lock: %w", e.ID, err)
				}
				return err
			}
		}
		return outbox.Wake(ctx, tx)
	})
	if err != nil {
		if db.IsLockTimeout(err) {
			return nil, status.Errorf(codes.Aborted,
				"requeue events: a selected event is locked by the pump (a schedule update) or another operator call; try again: %v", err)
		}
		if errors.Is(err, db.ErrNotFound) {
			return nil, status.Errorf(codes.Internal, "requeue events: %v", err)
		}
		return nil, s.writeStatus(ctx, "requeue events", err)
	}

	resp := &controlv1.RequeueEventsResponse{DryRun: req.GetDryRun(), Requeued: int64(len(dead)), More: more}
	selected := make(map[int64]bool, len(dead))
	for _, e := range dead {
		selected[e.ID] = true
		resp.Events = append(resp.Events, deadEvent(e))
	}
	// Named IDs past the limit are neither requeued nor refused: the caller repeats the call.
	if !more {
		for _, id := range req.GetEventIds() {
			if !selected[id] {
				selected[id] = true // a repeated ID is reported once
				resp.NotDeadIds = append(resp.NotDeadIds, id)
			}
		}
	}
	return resp, nil
}

func deadEvent(e outbox.Dead) *controlv1.DeadEvent {
	out := &controlv1.DeadEvent{
		EventId:      e.ID,
		Target:       e.Target,
		Flid:         e.PartitionKey,
		EventType:    e.Type,
		StateVersion: e.Version,
		Attempts:     int32(e.Attempts),
		LastError:    str(e.LastError),
		DeadAt:       timestamp(e.DeadAt),
	}
	if e.MsgID != nil {
		out.MsgId = *e.MsgID
	}
	return out
}
