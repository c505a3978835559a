package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/pkg/sis"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// RequestSchedule implements ControlService.RequestSchedule: an RQFD for from_day..to_day,
// registered with request.Register on the control role's lock connection.
func (s *Service) RequestSchedule(ctx context.Context, req *controlv1.RequestScheduleRequest) (*controlv1.RequestScheduleResponse, error) {
	from, err1 := time.Parse(time.DateOnly, req.GetFromDay())
	to, err2 := time.Parse(time.DateOnly, req.GetToDay())
	if err := errors.Join(err1, err2); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "request schedule: %v", err)
	}
	r, expired, err := s.register(ctx, "request schedule", request.ScheduleSpec(from, to), req.GetDryRun())
	if err != nil {
		return nil, err
	}
	return &controlv1.RequestScheduleResponse{DryRun: req.GetDryRun(), Request: r, ExpiredIds: expired}, nil
}

// RequestReference implements ControlService.RequestReference: an RQRD for a category, or
// for RSTA with its resource type.
func (s *Service) RequestReference(ctx context.Context, req *controlv1.RequestReferenceRequest) (*controlv1.RequestReferenceResponse, error) {
	r, expired, err := s.register(ctx, "request reference", request.ReferenceSpec(req.GetCategory(), req.GetRtyp()), req.GetDryRun())
	if err != nil {
		return nil, err
	}
	return &controlv1.RequestReferenceResponse{DryRun: req.GetDryRun(), Request: r, ExpiredIds: expired}, nil
}

// register registers spec (or, in a dry run, reports what it would expire) in one fenced
// transaction. A dry run takes no SEQN: the sequence would not give it back.
func (s *Service) register(ctx context.Context, op string, spec request.Spec, dryRun bool) (*controlv1.UpstreamRequest, []int64, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	}
	now := s.cfg.Clock.Now()
	limits := s.cfg.Requests
	if err := limits.CheckWindow(spec, now.In(s.zone())); err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	}
	// A dry run writes nothing, so only a registration spends the caller's allowance.
	if !dryRun {
		caller := s.caller(ctx)
		if ok, wait := s.callers.take(caller, now); !ok {
			wait = max(time.Second, wait.Round(time.Second))
			st := status.Newf(codes.ResourceExhausted,
				"%s: caller %s is over its rate of %d registrations a minute (req.caller-per-minute, burst %d, req.caller-burst): try again in %s",
				op, caller, limits.PerMinute, limits.Burst, wait)
			// RetryInfo tells a client when, in the form gRPC clients read.
			if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
				st = d
			}
			return nil, nil, st.Err()
		}
	}
	var res request.Registered
	err := s.write(ctx, func(tx pgx.Tx) error {
		others, err := request.OpenOthers(ctx, tx, spec.Type, spec.Scope())
		if err != nil {
			return err
		}
		if err := limits.CheckOpen(others); err != nil {
			return err
		}
		if dryRun {
			ids, err := request.OpenIDs(ctx, tx, spec.Type, spec.Scope())
			res = request.Registered{Expired: ids, Request: preview(spec, s.cfg.Outbound, now)}
			return err
		}
		res, err = request.Register(ctx, tx, spec, s.cfg.Outbound, now)
		return err
	})
	switch {
	case errors.Is(err, request.ErrInvalid):
		return nil, nil, status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	case errors.Is(err, request.ErrTooManyOpen):
		return nil, nil, status.Errorf(codes.FailedPrecondition, "%s: %v", op, err)
	case errors.Is(err, request.ErrOpenConflict):
		return nil, nil, status.Errorf(codes.Aborted, "%s: %v; try again", op, err)
	case err != nil:
		return nil, nil, s.writeStatus(ctx, op, err)
	}
	return upstreamRequest(res.Request), res.Expired, nil
}

// zone is the airport's, in which "today" of the day window is a calendar day.
func (s *Service) zone() *time.Location {
	if z := s.cfg.Outbound.Encoder.Zone; z != nil {
		return z
	}
	return time.UTC
}

// preview is the request a dry run would register, without an ID, SEQN or payload.
func preview(spec request.Spec, out request.Outbound, now time.Time) request.Request {
	r := request.Request{Type: spec.Type, Scope: spec.Scope(), RTYP: spec.RTYP, State: request.StatePending,
		Sender: out.Encoder.Sender, RoutingID: out.RoutingID, CreatedAt: now}
	if spec.Type == request.TypeRQFD {
		r.STYP, r.From, r.To = "NONE", &spec.From, &spec.To
	} else {
		r.STYP = spec.Category
	}
	return r
}

// ListRequests implements ControlService.ListRequests with keyset pagination on req_id.
func (s *Service) ListRequests(ctx context.Context, req *controlv1.ListRequestsRequest) (*controlv1.ListRequestsResponse, error) {
	var f request.Filter
	if st := req.GetState(); st != controlv1.RequestState_REQUEST_STATE_UNSPECIFIED {
		f.State = strings.TrimPrefix(st.String(), requestStatePrefix)
	}
	if t := req.GetType(); t != controlv1.RequestType_REQUEST_TYPE_UNSPECIFIED {
		f.Type = strings.TrimPrefix(t.String(), requestTypePrefix)
	}
	after, size, err := page(req.GetPageToken(), req.GetPageSize())
	if err != nil {
		return nil, err
	}
	f.After = after
	rows, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) ([]request.Request, error) { return request.List(ctx, tx, f, size+1) })
	if err != nil {
		return nil, toStatus(ctx, "list requests", err)
	}
	more := len(rows) > size
	if more {
		rows = rows[:size]
	}
	resp := &controlv1.ListRequestsResponse{}
	for _, r := range rows {
		resp.Requests = append(resp.Requests, upstreamRequest(r))
	}
	var cut bool
	if resp.Requests, cut = fitPage(resp.Requests, s.cfg.PageBytes); more || cut {
		resp.NextPageToken = encodePageToken(resp.Requests[len(resp.Requests)-1].GetReqId())
	}
	return resp, nil
}

const (
	requestStatePrefix = "REQUEST_STATE_"
	requestTypePrefix  = "REQUEST_TYPE_"
)

func upstreamRequest(r request.Request) *controlv1.UpstreamRequest {
	out := &controlv1.UpstreamRequest{
		ReqId:     r.ID,
		Type:      controlv1.RequestType(controlv1.RequestType_value[requestTypePrefix+r.Type]),
		Styp:      r.STYP,
		Scope:     r.Scope,
		Rtyp:      r.RTYP,
		State:     controlv1.RequestState(controlv1.RequestState_value[requestStatePrefix+r.State]),
		RoutingId: r.RoutingID,
		CreatedAt: timestamp(r.CreatedAt),
		SentAt:    optTimestamp(r.SentAt),
		DoneAt:    optTimestamp(r.DoneAt),
		ExpiredAt: optTimestamp(r.ExpiredAt),
		Payload:   r.Payload,
	}
	if r.ID != 0 {
		out.Seqn = sis.FormatSEQN(int(r.SEQN))
	}
	if r.From != nil && r.To != nil {
		out.FromDay, out.ToDay = r.From.Format(time.DateOnly), r.To.Format(time.DateOnly)
	}
	if r.CoutmsgsID != nil {
		out.CoutmsgsId = *r.CoutmsgsID
	}
	if r.AnswerMsgID != nil {
		out.AnswerMsgId = *r.AnswerMsgID
	}
	return out
}

// DailyConfig is the daily schedule request (schd.daily-request-at).
type DailyConfig struct {
	// At is the time of day, in Zone (the airport's), after which the next day's RQFD is
	// registered.
	At   time.Duration
	Zone *time.Location
}

// dailyCheck is how often the daily timer looks: well inside the minute a time of day names,
// and cheap (one indexed read).
const dailyCheck = 30 * time.Second

// RunDaily registers, once a day after cfg.At airport time, the RQFD for the next operation
// day, until ctx ends. It runs in the active instance only (the app starts it with each term)
// and writes through the same fenced transaction as the RPCs. It looks at once and then every
// dailyCheck: a term that starts after the time of day (a restart, a failover) still registers the
// day's request, and a day whose request was registered already (by the timer or an operator,
// after the time of day) is left alone.
func (s *Service) RunDaily(ctx context.Context, cfg DailyConfig, logger *slog.Logger) error {
	t := time.NewTicker(dailyCheck)
	defer t.Stop()
	for {
		if err := s.dailyOnce(ctx, cfg, logger); err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "daily schedule request not registered; next look in "+dailyCheck.String(), "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *Service) dailyOnce(ctx context.Context, cfg DailyConfig, logger *slog.Logger) error {
	now := s.cfg.Clock.Now().In(cfg.Zone)
	due := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, cfg.Zone).Add(cfg.At)
	if now.Before(due) {
		return nil
	}
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	spec := request.ScheduleSpec(next, next)
	var res request.Registered
	registered, already := false, false
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		already, err = request.RegisteredSince(ctx, tx, spec.Type, spec.Scope(), due)
		if err != nil || already {
			return err
		}
		res, err = request.Register(ctx, tx, spec, s.cfg.Outbound, s.cfg.Clock.Now())
		registered = err == nil
		return err
	})
	if errors.Is(err, ErrStandby) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("daily schedule request %s: %w", spec.Scope(), err)
	}
	if already {
		logger.DebugContext(ctx, "daily schedule request already registered today", "scope", spec.Scope())
	}
	if registered {
		logger.InfoContext(ctx, "daily schedule request registered", "req_id", res.Request.ID,
			"scope", res.Request.Scope, "expired", res.Expired)
	}
	return nil
}
