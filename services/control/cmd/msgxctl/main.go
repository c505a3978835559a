// Command msgxctl is the operator's command line for the control API: one subcommand per RPC
// of msgx.control.v1.ControlService, built from the API's descriptor (see package ctl).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/msgexchange/msgexchange/pkg/buildinfo"
	"github.com/msgexchange/msgexchange/services/control/internal/ctl"
)

func main() {
	if buildinfo.PrintVersion("msgxctl", os.Args[1:], os.Stdout) {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := ctl.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
