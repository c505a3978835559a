package chartcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// monitoringRender renders the chart with the CI tokens and args, and counts the alerts and the
// ServiceMonitors.
func monitoringRender(t *testing.T, root string, args ...string) (alerts, monitors int) {
	t.Helper()
	chart := filepath.Join(root, chartDir)
	all := append([]string{"template", "msgx", chart, "-f", filepath.Join(chart, "ci/tokens-values.yaml")}, args...)
	return countMonitoring(decodeAll(t, run(t, helmBinary(t, root), all...)))
}

func countMonitoring(m *manifests) (alerts, monitors int) {
	for _, r := range m.rules {
		for _, g := range r.Spec.Groups {
			for _, rule := range g.Rules {
				if rule.Alert != "" {
					alerts++
				}
			}
		}
	}
	return alerts, len(m.monitors)
}

// TestReadmeCommandRendersTheAlerts (issue #56 finding 1): the chart README's helm template
// command, run as written (only the operator's values file stands in), renders every alert and
// the ServiceMonitor; docs/operations.md gives the same command, so the two docs cannot disagree
// again.
func TestReadmeCommandRendersTheAlerts(t *testing.T) {
	root := repo.Root(t)
	readme, err := os.ReadFile(filepath.Join(root, readmeFile))
	if err != nil {
		t.Fatal(err)
	}
	var command string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "helm template ") {
			if command != "" {
				t.Fatalf("%s gives two helm template commands: %q and %q", readmeFile, command, line)
			}
			command = line
		}
	}
	if command == "" {
		t.Fatalf("%s gives no helm template command", readmeFile)
	}
	ops, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ops), "\n"+command+"\n") {
		t.Errorf("docs/operations.md does not give the README's command %q", command)
	}
	args := strings.Fields(command)[1:]
	for i, a := range args {
		if a == "gateway-values.yaml" {
			args[i] = filepath.Join(chartDir, "ci/tokens-values.yaml")
		}
	}
	cmd := exec.Command(helmBinary(t, root), args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	if alerts, monitors := countMonitoring(decodeAll(t, out)); alerts == 0 || alerts != len(wantAlerts) || monitors != 1 {
		t.Errorf("%s renders %d alerts and %d ServiceMonitors; want %d and 1", command, alerts, monitors, len(wantAlerts))
	}
}

// TestMonitoringSwitch: monitoring.enabled is auto (the CRD probe), true (always) or false
// (never, even where the CRDs are served); the per-kind switches still turn one off.
func TestMonitoringSwitch(t *testing.T) {
	root := repo.Root(t)
	for _, c := range []struct {
		name             string
		args             []string
		alerts, monitors int
	}{
		{"auto without the CRDs", nil, 0, 0},
		{"auto with the CRDs", withCRDs, len(wantAlerts), 1},
		{"true without the CRDs", []string{"--set", "monitoring.enabled=true"}, len(wantAlerts), 1},
		{"false with the CRDs", append([]string{"--set", "monitoring.enabled=false"}, withCRDs...), 0, 0},
		{"true, the rule off", []string{"--set", "monitoring.enabled=true", "--set", "monitoring.prometheusRule.enabled=false"}, 0, 1},
	} {
		alerts, monitors := monitoringRender(t, root, c.args...)
		if alerts != c.alerts || monitors != c.monitors {
			t.Errorf("%s: %d alerts, %d ServiceMonitors; want %d and %d", c.name, alerts, monitors, c.alerts, c.monitors)
		}
	}
	out, err := exec.Command(helmBinary(t, root), "template", "msgx", filepath.Join(root, chartDir),
		"-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml"), "--set", "monitoring.enabled=yes").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "/monitoring/enabled") {
		t.Errorf("monitoring.enabled=yes: err %v, output %s; want the schema to refuse it", err, out)
	}
}
