package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/tools/stack"
)

// TestVersionFlag: every binary answers --version with its build and exits 0 without reading
// any configuration (the environment here has none of the services' settings).
func TestVersionFlag(t *testing.T) {
	bin := binaries(t)
	line := regexp.MustCompile(`^(msgx-[a-z]+) version \S+, commit \S+, go[0-9.]+\n$`)
	for name := range stack.Binaries {
		cmd := exec.Command(filepath.Join(bin, name), "--version")
		cmd.Env = []string{"MSGX_LOG_LEVEL=nonsense"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s --version: %v\n%s", name, err, out)
			continue
		}
		if m := line.FindSubmatch(out); m == nil || string(m[1]) != name {
			t.Errorf("%s --version printed %q", name, out)
		}
	}
}

// TestLogLevelRefused: a log level that does not parse stops a service at start-up with a
// message naming the variable.
func TestLogLevelRefused(t *testing.T) {
	bin := binaries(t)
	cmd := exec.Command(filepath.Join(bin, "msgx-pump"))
	cmd.Env = []string{"MSGX_LOG_LEVEL=verbose"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("msgx-pump with MSGX_LOG_LEVEL=verbose: %v, want exit code 2\n%s", err, out)
	}
	if !regexp.MustCompile(`configuration refused.*MSGX_LOG_LEVEL=\\"verbose\\"`).Match(out) {
		t.Errorf("the refusal does not name MSGX_LOG_LEVEL:\n%s", out)
	}
}

// TestUnknownSettingsAreStartupErrors: through the real binaries, a misspelled variable stops
// every service with the closest parameter's name, and a setting only control reads stops
// control and not the pump (each service checks what it reads). The PostgreSQL address is one
// nothing listens on, so a binary past its configuration would fail differently.
func TestUnknownSettingsAreStartupErrors(t *testing.T) {
	bin := binaries(t)
	run := func(name string, env ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name))
		cmd.Env = append([]string{"MSGX_PG_DSN=postgres://nobody@127.0.0.1:1/none?connect_timeout=1"}, env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return string(out), 0
	}
	for _, name := range []string{"msgx-ingest", "msgx-pump", "msgx-dispatcher", "msgx-backfill", "msgx-control"} {
		out, code := run(name, "MSGX_PIPELINE_MAX_ATEMPTS=3", "MSGX_TEST_PG_DSN=harness", "MSGX_BENCH_SCALE=full")
		if code != 2 || !strings.Contains(out, "unknown variable MSGX_PIPELINE_MAX_ATEMPTS (did you mean MSGX_PIPELINE_MAX_ATTEMPTS?)") {
			t.Errorf("%s with a misspelled variable: exit %d, want 2 naming the closest variable\n%s", name, code, out)
		}
		if strings.Contains(out, "MSGX_TEST_PG_DSN") || strings.Contains(out, "MSGX_BENCH_SCALE") {
			t.Errorf("%s refused a harness variable:\n%s", name, out)
		}
	}
	// control.max-calls (64) below pg.max-conns: control's own rule.
	out, code := run("msgx-control", "MSGX_PG_MAX_CONNS=100", "MSGX_CONTROL_TOKEN=e2e-control-token-0123456789abcdef")
	if code != 2 || !strings.Contains(out, "control.max-calls (64) must be at least pg.max-conns (100)") {
		t.Errorf("msgx-control with pg.max-conns above its call bound: exit %d, want 2 naming the rule\n%s", code, out)
	}
	out, code = run("msgx-pump", "MSGX_PG_MAX_CONNS=100")
	if code == 2 || strings.Contains(out, "configuration refused") {
		t.Errorf("msgx-pump refused a bound only control reads: exit %d\n%s", code, out)
	}
}

// TestHelpFlag: every binary answers --help with its usage and exits 0, and refuses a flag it
// does not know with exit 2, both before it reads its configuration or touches a database (the
// environment names a PostgreSQL nothing listens on and a log level that does not parse, so a
// binary that started would exit 1 or 2 with a different text).
func TestHelpFlag(t *testing.T) {
	bin := binaries(t)
	noDB := []string{"MSGX_PG_DSN=postgres://nobody@127.0.0.1:1/none?connect_timeout=1", "MSGX_LOG_LEVEL=nonsense"}
	runBin := func(name string, args ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Env = noDB
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return string(out), code
	}
	for name := range stack.Binaries {
		out, code := runBin(name, "--help")
		if code != 0 {
			t.Errorf("%s --help: exit %d, want 0\n%s", name, code, out)
		}
		if !strings.Contains(strings.ToLower(out), "usage") || !strings.Contains(out, name) {
			t.Errorf("%s --help printed no usage:\n%s", name, out)
		}
		// A service: its settings are environment variables, listed in docs/environment.md.
		if !strings.Contains(out, "MSGX_") || !strings.Contains(out, "docs/environment.md") {
			t.Errorf("%s --help does not point at docs/environment.md for the MSGX_* settings:\n%s", name, out)
		}
		if name == "msgx-control" {
			for _, sub := range []string{"migrate", "migrate status", "probe"} {
				if !strings.Contains(out, "  "+sub+" ") {
					t.Errorf("msgx-control --help does not list the command %q:\n%s", sub, out)
				}
			}
		}
		if name == "msgx-dispatcher" && !strings.Contains(out, "  version-floor ") {
			t.Errorf("msgx-dispatcher --help does not list the command version-floor:\n%s", out)
		}
		if out, code := runBin(name, "--no-such-flag"); code != 2 || !strings.Contains(out, "no-such-flag") {
			t.Errorf("%s --no-such-flag: exit %d, want 2 naming the flag\n%s", name, code, out)
		}
	}
	for _, args := range [][]string{{"-h"}, {"help"}} {
		if out, code := runBin("msgx-pump", args...); code != 0 || !strings.HasPrefix(out, "usage: msgx-pump") {
			t.Errorf("msgx-pump %v: exit %d\n%s", args, code, out)
		}
	}
	// A service takes no arguments; control's unknown command is a usage error too.
	if out, code := runBin("msgx-pump", "serve"); code != 2 || !strings.Contains(out, `unexpected argument "serve"`) {
		t.Errorf("msgx-pump serve: exit %d, want 2\n%s", code, out)
	}
	// A subcommand's help is asked for too: its usage, exit 0, before any configuration is read
	// (issue #56).
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"msgx-control", []string{"migrate", "--help"}, "usage: msgx-control migrate"},
		{"msgx-control", []string{"migrate", "-h"}, "usage: msgx-control migrate"},
		{"msgx-control", []string{"probe", "--help"}, "-readyz"},
		{"msgx-control", []string{"probe", "help"}, "-readyz"},
		{"msgx-dispatcher", []string{"version-floor", "--help"}, "version-floor"},
	} {
		if out, code := runBin(tc.name, tc.args...); code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s %v: exit %d, want 0 and %q\n%s", tc.name, tc.args, code, tc.want, out)
		}
	}
	if out, code := runBin("msgx-control", "probe", "--no-such-flag"); code != 2 {
		t.Errorf("msgx-control probe --no-such-flag: exit %d, want 2\n%s", code, out)
	}
	if out, code := runBin("msgx-control", "migrat"); code != 2 || !strings.Contains(out, `unknown command "migrat"`) || !strings.Contains(out, "usage: msgx-control") {
		t.Errorf("msgx-control migrat: exit %d, want 2 with the usage\n%s", code, out)
	}
}
