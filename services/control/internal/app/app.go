// Package app wires the control service from the shared runtime: the gRPC server with the
// ControlService on it, and the control role's election. main and the tests build it the same
// way, so the tests exercise the production wiring.
package app

import (
	"context"
	"fmt"
	"net"

	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/service"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/services/control/internal/control"
	"github.com/msgexchange/msgexchange/services/control/internal/server"
)

// App is one control instance.
type App struct {
	b       *service.Base
	server  *server.Server
	elector *leader.Elector
	ln      net.Listener
}

// New builds the instance.
func New(b *service.Base) (*App, error) {
	authn, err := server.LoadAuth(b.Config.ControlToken, b.Config.ControlTokenFile, b.Config.ControlInsecure)
	if err != nil {
		return nil, fmt.Errorf("control authentication: %w", err)
	}
	elector := b.Elector()
	svc, err := control.New(control.Config{
		DB:       b.Pool,
		Clock:    b.Clock,
		Instance: b.Config.Instance,
		Elector:  elector,
	})
	if err != nil {
		return nil, err
	}
	srv, err := server.New(server.Config{
		Addr:           b.Config.GRPCAddr,
		Auth:           authn,
		Services:       []string{controlv1.ControlService_ServiceDesc.ServiceName},
		Logger:         b.Logger,
		Registerer:     b.Registry,
		TracerProvider: b.Telemetry.Provider,
		Propagator:     b.Telemetry.Propagator,
		// Half the shutdown budget: the rest is for the elector to resign and the pool to close.
		StopTimeout: b.Config.ShutdownTimeout / 2,
	})
	if err != nil {
		return nil, err
	}
	controlv1.RegisterControlServiceServer(srv.Registrar(), svc)
	return &App{b: b, server: srv, elector: elector}, nil
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
	if _, err := a.Listen(); err != nil {
		return err
	}
	return a.b.Run(ctx,
		func(ctx context.Context) error { return a.server.Serve(ctx, a.ln) },
		a.holdRole,
	)
}

// holdRole keeps this instance a candidate for the control role. Reads are served by every
// instance, so the term has no work loop yet: it only holds the lock, which tells operators
// which instance is active and is what the mutating calls of issue #9 (replay, reopen, cutover
// seeding) will run under, fenced on the session's connection.
func (a *App) holdRole(ctx context.Context) error {
	return a.elector.Run(ctx, func(ctx context.Context, _ *leader.Session) error {
		<-ctx.Done()
		return nil
	})
}
