// Package app wires the control service from the shared runtime: the gRPC server with the
// ControlService on it, and the control role's election. main and the tests build it the same
// way, so the tests exercise the production wiring.
package app

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/msgexchange/msgexchange/pkg/config"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/pkg/sis"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/services/control/internal/api"
	"github.com/msgexchange/msgexchange/services/control/internal/server"
)

// App is one control instance.
type App struct {
	b       *service.Base
	server  *server.Server
	elector *leader.Elector
	term    *api.Term
	svc     *api.Service
	inbox   *aodb.Inbox
	ln      net.Listener
}

// New builds the instance.
func New(b *service.Base) (*App, error) {
	c := b.Config
	callers, err := config.ParseCallerTokens(c.Control.Tokens)
	if err != nil {
		return nil, fmt.Errorf("control authentication: %s: %w", server.EnvTokens, err)
	}
	authn, err := server.LoadAuth(server.AuthConfig{
		OperatorToken:    c.Control.Token,
		ReaderToken:      c.Control.ReaderToken,
		Callers:          callers,
		OperatorSubjects: c.Control.OperatorSubjects,
		ReaderSubjects:   c.Control.ReaderSubjects,
		Insecure:         c.Control.Insecure,
		Source:           credentialSource(c),
	})
	if err != nil {
		return nil, fmt.Errorf("control authentication: %w", err)
	}
	tlsCfg, err := server.LoadTLS(b.Config.Control.TLSCert, b.Config.Control.TLSKey, b.Config.Control.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("control TLS: %w", err)
	}
	// A subject is only ever verified over mTLS: without a client CA the rules would grant
	// nothing, and the operator would believe them in force.
	if len(c.Control.OperatorSubjects)+len(c.Control.ReaderSubjects) > 0 && c.Control.ClientCA == "" {
		return nil, fmt.Errorf("control authentication: %s or %s is set without mTLS: set MSGX_CONTROL_CLIENT_CA (with MSGX_CONTROL_TLS_CERT and MSGX_CONTROL_TLS_KEY), or remove them",
			server.EnvOperatorSubjects, server.EnvReaderSubjects)
	}
	// The inbox is read for raw messages, the watermark lag and cutover seeding; control never
	// writes it. The pool connects lazily, so an unreachable inbox does not stop the API.
	in, err := aodb.Open(b.Config.MySQL.DSN, b.Config.Inbox.Timeout)
	if err != nil {
		return nil, err
	}
	if err := b.CheckInbox(in); err != nil {
		_ = in.Close()
		return nil, err
	}
	// Redis is read for GetFlight only, without a readiness check: a Redis outage must not take
	// the operator's API away. The client connects lazily.
	rdb, err := b.RedisOptional()
	if err != nil {
		_ = in.Close()
		return nil, err
	}
	elector := b.Elector()
	term := &api.Term{}
	// The chart's readiness probe is /readyz/active, so the Service sends operators to the
	// holder of the control role only: a standby refuses mutating calls (issue #56, finding 5).
	b.Admin.ServeActive(term.Active)
	svc, err := api.New(api.Config{
		DB:       b.Pool,
		Clock:    b.Clock,
		Instance: b.Config.Instance,
		Elector:  term,
		Writer:   term,
		Inbox:    in,
		Caller:   server.CallerName,
		Outbound: request.Outbound{
			Encoder:   sis.Encoder{Sender: b.Config.Outbound.Sender, Zone: b.Config.Airport.Zone},
			RoutingID: b.Config.Outbound.RoutingID,
		},
		Projection: projection.New(rdb, b.Config.Redis.Prefix, b.Config.Redis.Timeout),
		TraceURL:   b.Config.Tracing.UIURL,
		Requests: api.RequestLimits{PerMinute: c.Req.CallerPerMinute, Burst: c.Req.CallerBurst,
			Limits: request.Limits{MaxOpen: c.Req.MaxOpen, DayWindow: c.Req.DayWindow}},
		ReadTimeout: c.Control.ReadTimeout,
		PoolWait:    c.Control.PoolWait,
		// Two pool connections stay free of reads: the readiness check and the fenced
		// writes' fallbacks never queue behind a pile of slow reads.
		MaxReads:     max(1, c.PG.MaxConns-2),
		MaxBodyChars: c.Control.MaxBodyChars,
		PageBytes:    c.Control.PageBytes,
	})
	if err != nil {
		_ = in.Close()
		return nil, err
	}
	srv, err := server.New(server.Config{
		Addr:           b.Config.GRPC.Addr,
		Auth:           authn,
		TLS:            tlsCfg,
		Services:       []string{controlv1.ControlService_ServiceDesc.ServiceName},
		Logger:         b.Logger,
		Registerer:     b.Registry,
		TracerProvider: b.Telemetry.Provider,
		Propagator:     b.Telemetry.Propagator,
		// Half the shutdown budget: the rest is for the elector to resign and the pool to close.
		StopTimeout: b.Config.ShutdownTimeout / 2,
		CallTimeout: c.Control.CallTimeout,
		Clock:       b.Clock,
		Bounds:      c.Control.Bounds,
		// Every change in the audit says why (issue #56, finding 8).
		RequireComment: c.Control.RequireComment,
	})
	if err != nil {
		_ = in.Close()
		return nil, err
	}
	controlv1.RegisterControlServiceServer(srv.Registrar(), svc)
	return &App{b: b, server: srv, elector: elector, term: term, svc: svc, inbox: in}, nil
}

// credentialSource names where the control credentials came from, for the start-up log.
func credentialSource(c config.Config) string {
	var parts []string
	for _, key := range []string{"control.token", "control.reader-token", "control.tokens"} {
		env := config.EnvName(key)
		switch path, fromFile := c.SecretFiles[key]; {
		case fromFile:
			parts = append(parts, env+"_FILE="+path)
		case key == "control.token" && c.Control.Token != "", key == "control.reader-token" && c.Control.ReaderToken != "",
			key == "control.tokens" && c.Control.Tokens != "":
			parts = append(parts, env)
		}
	}
	if len(c.Control.OperatorSubjects)+len(c.Control.ReaderSubjects) > 0 {
		parts = append(parts, "control-operator-subjects/control-reader-subjects")
	}
	return strings.Join(parts, ", ")
}

// Listen opens the gRPC listener ahead of Run and returns its address (tests listen on
// 127.0.0.1:0 and need the port). Run listens itself when Listen was not called.
func (a *App) Listen() (net.Addr, error) {
	if a.ln == nil {
		ln, err := a.server.Listen()
		if err != nil {
			return nil, err
		}
		a.ln = ln
	}
	return a.ln.Addr(), nil
}

// Run serves the API and holds the control role until ctx ends, then stops both within the
// configured shutdown timeout.
func (a *App) Run(ctx context.Context) error {
	defer func() { _ = a.inbox.Close() }()
	if _, err := a.Listen(); err != nil {
		return err
	}
	return a.b.Run(ctx,
		func(ctx context.Context) error { return a.server.Serve(ctx, a.ln) },
		a.holdRole,
	)
}

// holdRole keeps this instance a candidate for the control role. Reads are served by every
// instance; the term lends its session to the mutating calls (replay, reopen, cutover
// seeding, requests), which run fenced on the lock connection, and takes it back when the term
// ends. With schd.daily-request-at set, the term also runs the daily schedule request, so
// exactly the active instance registers it.
func (a *App) holdRole(ctx context.Context) error {
	return a.elector.Run(ctx, func(ctx context.Context, s *leader.Session) error {
		a.term.Hold(s)
		defer a.term.Release()
		if s := a.b.Config.Schd; s.DailyRequest {
			return a.svc.RunDaily(ctx, api.DailyConfig{At: s.DailyRequestAt, Zone: a.b.Config.Airport.Zone},
				a.b.Logger.With("component", "daily-request"))
		}
		<-ctx.Done()
		return nil
	})
}
