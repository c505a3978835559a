package main

import "github.com/msgexchange/msgexchange/pkg/service"

// command is msgx-control's --help: it serves the control API, or runs one subcommand.
var command = service.Command{
	Name:    "msgx-control",
	Summary: "serves the operator's gRPC API\n(msgx.control.v1.ControlService); a command runs instead and exits.",
	Commands: [][2]string{
		{"migrate", "apply every pending PostgreSQL migration (MSGX_PG_DSN) and exit"},
		{"migrate status", "print the applied and the latest schema version and exit"},
		{"probe", "check that a deployment answers and exit (helm test):"},
		{"", "-grpc host:port [-tls] [-timeout d] -readyz url... (repeatable)"},
	},
}
