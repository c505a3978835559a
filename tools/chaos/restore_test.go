package chaos_test

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/tools/chaos"
)

// TestRestoreDrill is the restore drill of docs/runbooks.md ("Restoring PostgreSQL from a
// backup"): a pg_dump under traffic, the traffic drained, the backup restored, the runbook
// followed (version-floor, resume), and the end state checked against a clean in-order run.
// `make test` runs it over the traffic of 20 s; `make drill-restore` over a longer day
// (MSGX_CHAOS_DURATION spreads the inserts, MSGX_CHAOS_FLIGHTS sizes it).
// Guards R-INV-26.
func TestRestoreDrill(t *testing.T) {
	cfg, err := chaos.FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(chaos.EnvDuration) == "" {
		cfg.Window = 20 * time.Second
	}
	if os.Getenv(chaos.EnvFlights) == "" {
		cfg.Flights = 30
	}
	if cfg.LogDir, err = os.MkdirTemp("", "msgx-drill-"); err != nil {
		t.Fatal(err)
	}
	if cfg.Bin == "" {
		cfg.Bin = build(t, cfg.LogDir)
	}
	run, ref := withKafka(t, target(t), cfg.LogDir), target(t)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Window+2*cfg.DrainTimeout+cfg.CleanTimeout+10*time.Minute)
	defer cancel()
	logs := &testLog{t: t}
	defer logs.stop()
	var out io.Writer = logs
	if testing.Verbose() {
		out = os.Stdout
	}
	rep, err := chaos.RunRestore(ctx, cfg, run, ref, out)
	if err != nil {
		t.Fatalf("restore drill: %v (logs in %s)", err, cfg.LogDir)
	}
	for _, c := range rep.Checks {
		if !c.Pass {
			t.Errorf("%s: %s", c.Name, c.Detail)
		}
	}
	if t.Failed() {
		t.Logf("services' logs kept in %s", cfg.LogDir)
		return
	}
	_ = os.RemoveAll(cfg.LogDir)
}
