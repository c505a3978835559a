package main

import "github.com/msgexchange/msgexchange/pkg/service"

// command is msgx-dispatcher's --help: it serves, or runs one subcommand.
var command = service.Command{
	Name: "msgx-dispatcher",
	Summary: "delivers the outbox to Kafka (per-FLID order) and the upstream\n" +
		"requests to COUTMSGS; a command runs instead and exits.",
	Commands: [][2]string{
		{"version-floor", "after PostgreSQL was restored from a backup, with every service stopped:"},
		{"", "read both topics and raise the stored versions above what Kafka holds"},
		{"", "(docs/runbooks.md, \"Restoring PostgreSQL from a backup\")"},
	},
}
