package api

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// DriftUnknown is GetFlight's drift when Redis could not be read.
const DriftUnknown = "unknown"

// GetFlight implements ControlService.GetFlight: the flight as published from PostgreSQL, its
// newest messages and events from one snapshot, then what Redis holds, compared by the
// consistency sentinel's rule. Redis failing does not fail the call: the authoritative state is
// what an operator needs first, and redis.error says what went wrong.
func (s *Service) GetFlight(ctx context.Context, req *controlv1.GetFlightRequest) (*controlv1.GetFlightResponse, error) {
	flid := req.GetFlid()
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = controlv1.DefaultFlightLimit
	}
	var (
		f      *flight.Flight
		msgs   []queue.Message
		events []outbox.Row
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		if f, err = flightstore.ReadPublished(ctx, tx, flid); err != nil {
			return err
		}
		if msgs, err = queue.List(ctx, tx, queue.Filter{FLIDs: []string{flid}, Newest: true}, limit); err != nil {
			return err
		}
		events, err = outbox.ByKey(ctx, tx, flid, limit, valueCap(s.cfg.PageBytes))
		return err
	})
	if err != nil {
		return nil, toStatus(ctx, "get flight", err)
	}
	resp := &controlv1.GetFlightResponse{Flid: flid, Redis: &controlv1.FlightProjection{}}
	// The newest events first, each payload cut to a page's share and the list to a page: a
	// KAFKA:schd payload is the whole document (docs/control.md, "Answers bounded in bytes").
	resp.Events, _ = fitPage(eventList(events, valueCap(s.cfg.PageBytes)), s.cfg.PageBytes)
	for _, m := range msgs {
		resp.Messages = append(resp.Messages, message(m))
	}
	if f != nil {
		resp.Postgres = flightState(*f)
	}
	observed, rerr := s.observe(ctx, flid)
	switch {
	case rerr != nil:
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		resp.Redis.Error, resp.Drift = rerr.Error(), DriftUnknown
	default:
		if observed.Version >= 0 {
			v := observed.Version
			resp.Redis.Version = &v
		}
		resp.Redis.DocumentJson = string(observed.Doc)
		resp.Drift = string(drift(f, observed))
	}
	resp.Drifted = resp.Drift != ""
	if f == nil && len(msgs) == 0 && len(events) == 0 && (rerr != nil || resp.Drift == "") {
		return nil, status.Errorf(codes.NotFound, "flight %s: no current state, no message, no event and no projection", flid)
	}
	return resp, nil
}

func (s *Service) observe(ctx context.Context, flid string) (projection.Observed, error) {
	if s.cfg.Projection == nil {
		return projection.Observed{}, errNoProjection
	}
	got, err := s.cfg.Projection.Observe(ctx, []string{flid})
	if err != nil {
		return projection.Observed{}, err
	}
	return got[0], nil
}

var errNoProjection = status.Error(codes.Unavailable, "this control instance reads no Redis")

// drift is the sentinel's comparison, and for a FLID PostgreSQL's current state does not hold,
// Extra when Redis still has keys of it.
func drift(f *flight.Flight, o projection.Observed) projection.Drift {
	if f == nil {
		if o.Doc != nil || o.Version >= 0 {
			return projection.Extra
		}
		return ""
	}
	return projection.Compare(*f, o)
}

func flightState(f flight.Flight) *controlv1.FlightState {
	st := &controlv1.FlightState{
		State:        f.State,
		Version:      f.Version,
		FlightNumber: f.Scalars["FLNO"],
		LastMsgId:    f.LastMsgID,
		CreatedAt:    timestamp(f.CreatedAt),
		UpdatedAt:    timestamp(f.UpdatedAt),
	}
	if f.OperationDay != nil {
		st.OperationDay = f.OperationDay.Format(time.DateOnly)
	}
	if f.State != flight.Deleted {
		st.DocumentJson = string(flight.Document(f))
	}
	return st
}
