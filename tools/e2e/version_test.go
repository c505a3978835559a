package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

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
