package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// TestProbe runs `msgx-control probe`, the chart's helm test, against a running control and
// pump: it passes while they answer, and fails naming the check once the pump is stopped.
func TestProbe(t *testing.T) {
	e := newEnv(t)
	controlAdmin, pumpAdmin := freePort(t), freePort(t)
	if err := e.stack.Start("control", nil, "MSGX_ADMIN_ADDR="+controlAdmin); err != nil {
		t.Fatal(err)
	}
	if err := e.stack.Start("pump", nil, "MSGX_ADMIN_ADDR="+pumpAdmin); err != nil {
		t.Fatal(err)
	}
	probe := func() (string, error) {
		out, err := exec.Command(filepath.Join(binaries(t), "msgx-control"), "probe", "-grpc="+e.grpcAddr,
			"-readyz=http://"+controlAdmin+"/readyz", "-readyz=http://"+pumpAdmin+"/readyz", "-timeout=2s").CombinedOutput()
		return string(out), err
	}
	var out string
	testwait.ForState(t, 60*time.Second, "msgx-control probe to pass", func() (bool, string) {
		var err error
		out, err = probe()
		return err == nil, out
	})
	if !strings.Contains(out, "gRPC health "+e.grpcAddr+": SERVING") || strings.Count(out, "/readyz: 200") != 2 {
		t.Errorf("probe output:\n%s", out)
	}
	e.stack.Stop("pump", 20*time.Second)
	out, err := probe()
	if err == nil || !strings.Contains(out, "FAIL") || !strings.Contains(out, pumpAdmin) {
		t.Errorf("with the pump stopped the probe must fail naming it: %v\n%s", err, out)
	}
}
