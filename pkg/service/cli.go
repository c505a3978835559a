package service

import (
	"fmt"
	"io"
	"strings"

	"github.com/msgexchange/msgexchange/pkg/buildinfo"
)

// Exit codes of the command line, shared by every binary.
const (
	ExitOK    = 0
	ExitUsage = 2
)

// Command is what a binary's --help says: its name, what it does, its subcommands (none for a
// service that only serves).
type Command struct {
	Name     string
	Summary  string
	Commands [][2]string // {"migrate [status]", "apply the schema and exit"}
}

// summaries are the services' one-line descriptions, as in the README's table.
var summaries = map[string]string{
	"ingest":     "discovers the new rows of the shared inbox (CMINMSGS) and enqueues\nthem in ID order behind the watermark.",
	"pump":       "processes the enqueued inbox messages one at a time in ID order:\nflight state, outbox, Redis projection.",
	"dispatcher": "delivers the outbox to Kafka (per-FLID order) and the upstream\nrequests to COUTMSGS.",
	"backfill":   "writes the processed marker on every terminal inbox row, and runs the\nRedis projection's checks and rebuilds.",
	"control":    "serves the operator's gRPC API (msgx.control.v1.ControlService).",
}

// ServiceCommand is the --help of the service binary msgx-<role>, which takes no arguments.
func ServiceCommand(role string) Command {
	return Command{Name: "msgx-" + role, Summary: summaries[role]}
}

// Usage is the --help text.
func (c Command) Usage() string {
	var b strings.Builder
	if len(c.Commands) == 0 {
		fmt.Fprintf(&b, "usage: %s [--help | --version]\n", c.Name)
	} else {
		fmt.Fprintf(&b, "usage: %s [--help | --version | <command> [arguments]]\n", c.Name)
	}
	if c.Summary != "" {
		fmt.Fprintf(&b, "\n%s %s\n", c.Name, c.Summary)
	}
	if len(c.Commands) > 0 {
		b.WriteString("\nCommands (without one it serves):\n")
		width := 0
		for _, sc := range c.Commands {
			width = max(width, len(sc[0]))
		}
		for _, sc := range c.Commands {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, sc[0], sc[1])
		}
	}
	b.WriteString("\nFlags:\n  -h, --help  print this text and exit\n  --version   print the version, commit and Go version and exit\n")
	b.WriteString("\nEvery setting is an MSGX_* environment variable (secrets also as MSGX_*_FILE, a file\n" +
		"holding the value), or a key of the YAML file MSGX_CONFIG_FILE names; docs/environment.md\n" +
		"lists them all with their defaults.\n")
	return b.String()
}

// Args answers the arguments every binary shares before it reads any configuration or touches
// a database: --version, --help (-h, -help, help) and a flag it does not know (a usage error).
// It reports whether the process should exit now, with which code; otherwise args name a
// subcommand (or are empty) and the caller goes on.
func (c Command) Args(args []string, stdout, stderr io.Writer) (code int, exit bool) {
	if buildinfo.PrintVersion(c.Name, args, stdout) {
		return ExitOK, true
	}
	if len(args) == 0 {
		return ExitOK, false
	}
	switch a := args[0]; {
	case IsHelp(a):
		fmt.Fprint(stdout, c.Usage())
		return ExitOK, true
	case a == "--version" || a == "-version":
		fmt.Fprintf(stderr, "%s: %s takes no arguments\n%s", c.Name, a, c.Usage())
		return ExitUsage, true
	case strings.HasPrefix(a, "-"):
		fmt.Fprintf(stderr, "%s: unknown flag %q\n%s", c.Name, a, c.Usage())
		return ExitUsage, true
	case len(c.Commands) == 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n%s", c.Name, a, c.Usage())
		return ExitUsage, true
	}
	return ExitOK, false
}

// IsHelp reports whether arg asks for the help text: -h, --help, -help or help. A subcommand
// answers it with its usage on stdout and exit 0, as the binary does (issue #56).
func IsHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// Refuse reports an unknown subcommand: its name and the usage, on stderr; the caller exits
// with ExitUsage.
func (c Command) Refuse(name string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: unknown command %q\n%s", c.Name, name, c.Usage())
	return ExitUsage
}
