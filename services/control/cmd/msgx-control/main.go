// Command msgx-control serves the operator's gRPC API (msgx.control.v1.ControlService), and
// with the subcommand "migrate" applies the PostgreSQL schema and exits; "probe" checks that a
// deployment answers (the chart's helm test hook).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/logging"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/services/control/internal/app"
	"github.com/msgexchange/msgexchange/services/control/internal/migratecmd"
	"github.com/msgexchange/msgexchange/services/control/internal/probecmd"
)

func main() {
	if code, exit := command.Args(os.Args[1:], os.Stdout, os.Stderr); exit {
		os.Exit(code)
	}
	if len(os.Args) > 1 {
		os.Exit(subcommand(os.Args[1], os.Args[2:]))
	}
	os.Exit(service.Main(leader.Control, run))
}

func run(ctx context.Context, b *service.Base) error {
	a, err := app.New(b)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

func subcommand(name string, args []string) int {
	switch name {
	case "migrate":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		cfg, _ := config.FromEnv(config.ServiceControl) // migratecmd reports a refused configuration itself
		logger := logging.New(os.Stdout, "msgx-control", cfg.Log.Level, cfg.SecretValues()...)
		return migratecmd.Run(ctx, args, func() (config.Config, error) { return config.FromEnv(config.ServiceControl) }, logger, os.Stdout, os.Stderr)
	case "probe":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return probecmd.Run(ctx, args, os.Stdout, os.Stderr)
	default:
		return command.Refuse(name, os.Stderr)
	}
}
