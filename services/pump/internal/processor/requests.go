package processor

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
)

// Requests is the RESP guard of the schedule and reference processors (G-RESP-GUARD): a RESP is
// applied only when it answers an open request this system sent (pkg/request.MatchOpen), and the
// request becomes DONE in the transaction that applies it. Anything else is SKIPPED with the
// reason, logged for audit, and changes nothing.
type Requests struct {
	// Timeout is req.timeout: a SENT request older than that is expired, answered or not.
	Timeout time.Duration
	Logger  *slog.Logger
}

// match finds the requests a RESP answers, one per answer (an RSTA RESP may answer one request
// per resource type). skip is set when one of them has no open request: then none is closed.
func (g Requests) match(ctx context.Context, tx pgx.Tx, in pump.Input, answers []request.Answer) (matched []*request.Request, skip string, err error) {
	for _, a := range answers {
		m, err := request.MatchOpen(ctx, tx, a, in.Now, g.Timeout)
		if err != nil {
			return nil, "", err
		}
		if m.Request == nil {
			g.logger().WarnContext(ctx, "RESP answers no open request of ours: skipped, nothing changes", "msg_id", in.MsgID,
				"type", in.Message.Meta.TYPE, "request_type", a.Type, "scope", a.Scope, "from", a.From, "to", a.To,
				"dttm", a.DTTM, "reason", m.Skip)
			return nil, m.Skip, nil
		}
		matched = append(matched, m.Request)
	}
	return matched, "", nil
}

// done closes the matched requests with the answering message, in the applying transaction.
func (g Requests) done(ctx context.Context, tx pgx.Tx, in pump.Input, matched []*request.Request) error {
	for _, r := range matched {
		if err := request.Done(ctx, tx, r.ID, in.MsgID, in.Now); err != nil {
			return err
		}
		g.logger().InfoContext(ctx, "request answered", "req_id", r.ID, "scope", r.Scope, "msg_id", in.MsgID)
	}
	return nil
}

func (g Requests) logger() *slog.Logger {
	if g.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Logger
}

// AdmitRESP implements RequestGuard for reference data: the category's RQRD, or for RSTA one
// RQRD per resource type the RESP carries. The requests are closed at once in tx, which also
// applies the RESP (one transaction), so both commit or neither does.
func (g Requests) AdmitRESP(ctx context.Context, tx pgx.Tx, in pump.Input, scope RESPScope) (string, error) {
	var answers []request.Answer
	if scope.Type == "RSTA" {
		rtyps := slices.Clone(scope.RTYPs)
		slices.Sort(rtyps)
		for _, rtyp := range slices.Compact(rtyps) {
			answers = append(answers, request.Answer{Type: request.TypeRQRD, Scope: "RSTA:" + rtyp, DTTM: in.Message.Meta.DTTM})
		}
		if len(answers) == 0 {
			return request.SkipNoOpenRequest + ": an RSTA RESP without records names no resource type", nil
		}
	} else {
		answers = []request.Answer{{Type: request.TypeRQRD, Scope: scope.Type, DTTM: in.Message.Meta.DTTM}}
	}
	matched, skip, err := g.match(ctx, tx, in, answers)
	if err != nil || skip != "" {
		return skip, err
	}
	return "", g.done(ctx, tx, in, matched)
}
