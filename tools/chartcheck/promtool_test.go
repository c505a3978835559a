package chartcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// TestAlertRulesWithPromtool checks the PromQL of the rendered PrometheusRule with
// `promtool check rules` and runs the unit tests of testdata/alerts_test.yaml with
// `promtool test rules`. promtool comes from the Debian package prometheus (.ci/run installs
// it); `make test` sets MSGX_PROMTOOL=skip, with a loud message, only where it cannot be
// installed.
func TestAlertRulesWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("MSGX_PROMTOOL") == "skip" {
			t.Skip("promtool is not installed and cannot be (MSGX_PROMTOOL=skip): the alert rules are NOT checked")
		}
		t.Fatal("promtool not found: `apt-get install -y prometheus` (or run `make test`, which installs it)")
	}
	root := repo.Root(t)
	helm := helmBinary(t, root)
	out := run(t, helm, append([]string{"template", "msgx", filepath.Join(root, chartDir), "-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml"), "--namespace", "default",
		"--show-only", "templates/prometheusrule.yaml"}, withCRDs...)...)
	var rule prometheusRule
	if err := yaml.UnmarshalStrict(out, &rule); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, v any) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := write("full.yaml", rule.Spec)
	if out, err := exec.Command(promtool, "check", "rules", full).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// The unit tests compare labels; annotations are chartcheck's (runbook anchors, texts).
	spec := rule.Spec
	for g := range spec.Groups {
		for r := range spec.Groups[g].Rules {
			spec.Groups[g].Rules[r].Annotations = nil
		}
	}
	write("rules.yaml", spec)
	tests, err := os.ReadFile(filepath.Join(root, "tools", "chartcheck", "testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
