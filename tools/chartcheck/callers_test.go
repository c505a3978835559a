package chartcheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// TestNamedControlTokens renders tokens.callers (issue #56, finding 8): the named tokens land in
// the tokens Secret and are mounted for control as MSGX_CONTROL_TOKENS_FILE; without them
// nothing names a file that is not there. Comments are required by default.
func TestNamedControlTokens(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	const fullname = "msgx-msgexchange"
	callers := "alice:operator=alice-operator-token-0123456789abcdef\nbob:reader=bob-reader-token-0123456789abcdef0123\n"
	values := filepath.Join(t.TempDir(), "callers.yaml")
	if err := os.WriteFile(values, []byte("tokens:\n  callers: |\n    alice:operator=alice-operator-token-0123456789abcdef\n    bob:reader=bob-reader-token-0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(root, chartDir, "ci/tokens-values.yaml")
	m := decodeAll(t, run(t, helm, "template", "msgx", filepath.Join(root, chartDir), "-f", tokens, "-f", values))

	if s := m.secrets[fullname+"-tokens"]; s == nil || string(s.Data["control-tokens"]) != callers {
		t.Errorf("the tokens Secret does not hold control-tokens = the callers: %v", s)
	}
	c := m.deployments[fullname+"-control"].Spec.Template.Spec
	env := map[string]string{}
	for _, e := range c.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["MSGX_CONTROL_TOKENS_FILE"] != "/etc/msgx/control-token/callers" {
		t.Errorf("MSGX_CONTROL_TOKENS_FILE = %q", env["MSGX_CONTROL_TOKENS_FILE"])
	}
	mounted := false
	for _, v := range c.Volumes {
		if v.Name == "control-token" && v.Secret != nil {
			for _, it := range v.Secret.Items {
				mounted = mounted || it.Key == "control-tokens" && it.Path == "callers"
			}
		}
	}
	if !mounted {
		t.Errorf("the control-token volume does not mount control-tokens as callers: %+v", c.Volumes)
	}
	if cm := m.configMaps[fullname+"-config"]; cm == nil || cm.Data["MSGX_CONTROL_REQUIRE_COMMENT"] != "true" {
		t.Errorf("MSGX_CONTROL_REQUIRE_COMMENT is not true by default: %v", cm)
	}

	m = decodeAll(t, run(t, helm, "template", "msgx", filepath.Join(root, chartDir), "-f", tokens))
	for _, e := range m.deployments[fullname+"-control"].Spec.Template.Spec.Containers[0].Env {
		if e.Name == "MSGX_CONTROL_TOKENS_FILE" {
			t.Errorf("without tokens.callers control still reads %s", e.Value)
		}
	}
	if _, ok := m.secrets[fullname+"-tokens"].Data["control-tokens"]; ok {
		t.Error("without tokens.callers the Secret still has control-tokens")
	}
}
