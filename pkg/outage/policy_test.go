package outage_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/outage"
)

// fakeLoop answers probes with down's error and keeps every report.
type fakeLoop struct {
	down    error
	probes  int
	reports []*outage.State
}

func (f *fakeLoop) Probe(context.Context, string) error { f.probes++; return f.down }

func (f *fakeLoop) Report(_ context.Context, st *outage.State) error {
	f.reports = append(f.reports, st)
	return nil
}

// The whole sequence of one outage: classify, probe, blocked, recovered; one ERROR line at the
// start and one INFO line at the end, the gauge while it lasts, a report at every change.
func TestPolicy(t *testing.T) {
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	p := outage.NewPolicy(outage.Config{
		Gauge: "test_blocked_seconds", Help: "test", Dependencies: []string{outage.Inbox, outage.Redis},
		Blocked: "it does not answer", Resumed: "it answers again",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Now:    func() time.Time { return now },
	}, reg)
	l := &fakeLoop{}
	ctx := context.Background()

	if !p.Resume(ctx, l) || l.probes != 0 {
		t.Fatalf("no outage: Resume must go on without a probe (%d probes)", l.probes)
	}
	if p.Outage(ctx, l, outage.Redis, outage.Attempt) {
		t.Error("an attempt is an outage")
	}
	if p.Outage(ctx, l, outage.Redis, outage.Unsure) || l.probes != 1 {
		t.Errorf("unsure with a probe that answers is an outage (%d probes)", l.probes)
	}
	l.down = errors.New("i/o timeout")
	if !p.Outage(ctx, l, outage.Redis, outage.Unsure) {
		t.Error("unsure with a probe that fails too is no outage")
	}
	if !p.Outage(ctx, l, outage.Redis, outage.Down) || l.probes != 2 {
		t.Errorf("down is no outage, or was probed (%d probes)", l.probes)
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if p.Outage(stopped, l, outage.Redis, outage.Unsure) {
		t.Error("a stopping loop's unsure failure is an outage")
	}

	p.Block(ctx, l, outage.Redis, 42, "write: i/o timeout", "extra", "x")
	now = now.Add(time.Minute)
	p.Block(ctx, l, outage.Redis, 42, "write: again")
	if st := p.Current(); st == nil || st.Since != now.Add(-time.Minute) || st.LastError != "write: again" || st.MsgID != 42 {
		t.Fatalf("current = %+v: the outage keeps its start, takes the last error", st)
	}
	if got := gauge(t, reg, "test_blocked_seconds", outage.Redis); got != 60 {
		t.Errorf("redis gauge %v, want 60", got)
	}
	if p.BlockedFor(outage.Inbox) != 0 {
		t.Error("the inbox reads as blocked")
	}
	if p.Resume(ctx, l) || p.Current().Probes != 1 {
		t.Fatalf("a failed probe: resumed, or not counted (%+v)", p.Current())
	}
	if p.Resume(stopped, l) || p.Current().Probes != 1 {
		t.Fatalf("a probe cut by stopping: resumed, or counted (%+v)", p.Current())
	}
	l.down = nil
	now = now.Add(time.Minute)
	if !p.Resume(ctx, l) || p.Current() != nil || p.BlockedFor(outage.Redis) != 0 {
		t.Fatal("the dependency answers, the outage does not end")
	}
	if n := len(l.reports); n != 4 || l.reports[n-1] != nil || l.reports[2].Probes != 1 {
		t.Errorf("reports = %+v: two blocks, one failed probe, then nil", l.reports)
	}
	out := logs.String()
	if strings.Count(out, "it does not answer") != 1 || strings.Count(out, "it answers again") != 1 ||
		!strings.Contains(out, "dependency=redis msg_id=42 err=\"write: i/o timeout\" extra=x") ||
		!strings.Contains(out, "blocked_for=2m0s probes=1") {
		t.Errorf("logs:\n%s", out)
	}
}

// gauge reads the registered gauge name of dependency.
func gauge(t *testing.T, reg *prometheus.Registry, name, dependency string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if f.GetName() == name && l.GetName() == "dependency" && l.GetValue() == dependency {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{dependency=%q}", name, dependency)
	return 0
}
