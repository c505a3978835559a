package benchreport_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/testkit/benchreport"
)

// Figures appended by benches come back in one report, each target as its ratio against the
// anchor of the same run, with the verdict, each comparison as its ratio alone; a line without
// its figures says so.
func TestReportSetsTargetsAgainstTheirAnchors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "figures.jsonl")
	t.Setenv(benchreport.Env, path)
	benchreport.Add(t,
		benchreport.Figure{Bench: "backlog", Name: "drain-msgs-per-s", Value: 100, Unit: "msgs/s"},
		benchreport.Figure{Bench: "backlog", Name: "anchor-commits-per-s", Value: 1000, Unit: "commits/s"})
	benchreport.Add(t,
		benchreport.Figure{Bench: "backlog", Name: "settled-msgs-per-s", Value: 95, Unit: "msgs/s"},
		benchreport.Figure{Bench: "dnld", Name: "changed-package-s", Value: 0.5, Unit: "s"},
		benchreport.Figure{Bench: "dnld", Name: "changed-package-s", Value: 0.9, Unit: "s"}, // the later one counts
		benchreport.Figure{Bench: "redis-loss", Name: "complete-s", Value: 12.5, Unit: "s"},
		benchreport.Figure{Bench: "dnld", Name: "changed-package-cpu-s", Value: 0.45, Unit: "s"},
		benchreport.Figure{Bench: "fifo", Name: "bare-msgs-per-s", Value: 500, Unit: "msgs/s"},
		benchreport.Figure{Bench: "fifo", Name: "msgs-per-s", Value: 400, Unit: "msgs/s"},
		benchreport.Figure{Bench: "steady-sweep", Name: "p99-over-no-sweep", Value: 2.5},
		benchreport.Figure{Bench: "fifo", Name: "anchor-commits-per-s", Value: 1250, Unit: "commits/s"},
		benchreport.Figure{Bench: "dispatcher-msg", Name: "events-per-s", Value: 15000, Unit: "events/s"},
		benchreport.Figure{Bench: "dispatcher-msg", Name: "kfake-events-per-s", Value: 20000, Unit: "events/s"},
		benchreport.Figure{Bench: "dispatcher-schd", Name: "events-per-s", Value: 9000, Unit: "events/s"})
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	figs, err := benchreport.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	benchreport.Write(&out, figs)
	report := out.String()
	for _, want := range []struct{ target, line string }{
		// The old drain target is a comparison now, without a verdict.
		{"backlog drain (terminal) / single-connection commit rate", "0.100  100 msgs/s / 1000 commits/s"},
		{"1. domain cost: pump alone, FLOPs / a processor writing nothing", "0.800  (target ≥ 0.50, meets)"},
		{"5. steady 50 msg/s on production-sized tables: p99 during a retention sweep / without", "2.500  (target ≤ 2, MISSES)"},
		{"backlog settled (marked and sent) / drain", "0.950  (target ≥ 0.90, meets)"},
		{"2,000-flight SCHD DNLD terminal, seconds", "0.900  (target ≤ 0.7 s, MISSES)"},
		{"Redis flushed under 50 msg/s: projection complete again, 10,000 flights, seconds", "12.500  (target ≤ 60 s, meets)"},
		{"steady 50 msg/s, poll 1s: p50", "not measured in this run"},
		{"backlog on production-sized tables / on an empty schema", "not measured in this run"},
		// A comparison is a ratio without a verdict.
		{"pump alone, a processor writing nothing / single-connection commit rate", "0.400  500 msgs/s / 1250 commits/s"},
		{"pump alone, FLOPs / single-connection commit rate", "0.320  400 msgs/s / 1250 commits/s"},
		{"2,000-flight SCHD DNLD, CPU of the pump and its backend, seconds", "0.450  0.45 s"},
		// A real-broker figure beside kfake's of the same run, or beside the recorded one when
		// the bench cannot measure kfake any more, saying which.
		{"dispatcher, KAFKA:msg backlog drained, events/s", "0.750  1.5e+04 events/s real / 2e+04 events/s kfake, same run"},
		{"dispatcher, KAFKA:schd rows flushed back to back, events/s", "9000 events/s; kfake not measured in this run"},
		{"five services, backlog settled (marked and sent), msgs/s", "0.314  95 msgs/s real / 302.1 msgs/s kfake, recorded at 2291ad0"},
		{"steady 50 msg/s, poll 100ms: p99, ms", "not measured in this run"},
	} {
		found := false
		for _, l := range strings.Split(report, "\n") {
			if strings.Contains(l, want.target) && strings.Contains(l, want.line) {
				found = true
			}
		}
		if !found {
			t.Errorf("report has no line %q … %q:\n%s", want.target, want.line, report)
		}
	}
	// A missed target is followed by what meeting it would take; a met one is not.
	lines := strings.Split(report, "\n")
	for i, l := range lines[:len(lines)-1] {
		next := strings.HasPrefix(lines[i+1], "      would take: ")
		switch {
		case strings.Contains(l, "MISSES") && !next:
			t.Errorf("a missed target without what it would take: %q then %q", l, lines[i+1])
		case strings.Contains(l, "meets") && next:
			t.Errorf("a met target with what it would take: %q then %q", l, lines[i+1])
		}
	}
	for _, l := range strings.Split(report, "\n") {
		if (strings.HasPrefix(strings.TrimSpace(l), "pump alone") || strings.HasPrefix(strings.TrimSpace(l), "backlog drain")) && strings.Contains(l, "target") {
			t.Errorf("a comparison carries a verdict: %q", l)
		}
	}
}

// Without MSGX_BENCH_REPORT nothing is written.
func TestAddWithoutReportFileWritesNothing(t *testing.T) {
	t.Setenv(benchreport.Env, "")
	dir := t.TempDir()
	t.Chdir(dir)
	benchreport.Add(t, benchreport.Figure{Bench: "x", Name: "y", Value: 1})
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("files written: %v %v", entries, err)
	}
}
