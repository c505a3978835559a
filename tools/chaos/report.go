package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is the outcome of one run.
type Report struct {
	Seed            int64
	Planned, Window time.Duration // the window asked for and the one run (grown to fit the long outages)
	Long            []longSlot
	LogDir          string

	Messages, RolledBack, Late int
	LateMax                    time.Duration
	// The out-of-order messages: late arrivals made (held until ingest released their ID)
	// and replays made (DEAD(EXHAUSTED) behind a held flight row, replayed through control),
	// each of those planned; ReplayLater counts the later messages of the replayed flights
	// that had succeeded before the replays.
	ArrivalsPlanned, Arrivals int
	ArrivalMax                time.Duration
	ReplaysPlanned, Replays   int
	ReplayLater               int
	Records                   int // records the consumer received, redeliveries included
	Outcomes                  map[string]int
	Faults                    []FaultLine
	// BrokerKills counts the broker's SIGKILLs (the short kills and the long outage's).
	BrokerKills int
	Failovers   []FailoverReport // one per failover of MSGX_CHAOS_FAILOVERS
	SelfExits   int
	// SettingsRefusedExits are the SelfExits of a service that a dependency refused at start-up
	// (service.ExitSettingsRefused): the Redis outage switches the services' user off, which
	// R-START-2 stops a restarted service on.
	SettingsRefusedExits int
	SelfExitLines        []string
	Drained              bool
	// LongestStall is the longest wait of the oldest row beyond W for discovery (sampled every
	// 10 s); LongestFill the longest measured commit delay (seconds; nil before any fill).
	LongestStall time.Duration
	LongestFill  *float64

	Setup, WindowTook, Drain, Clean, Total time.Duration
	Checks                                 []Check
}

// FaultLine is one kind of fault in the summary.
type FaultLine struct {
	Kind   Kind
	N      int
	Failed int
	Detail string
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return true
		}
	}
	return false
}

// summary lists the faults by kind, short ones first, then the long outages.
func (in *injector) summary() []FaultLine {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []FaultLine
	kinds := append([]Kind(nil), ShortKinds...)
	for _, d := range AllDeps {
		kinds = append(kinds, longKind(d))
	}
	for _, k := range kinds {
		t := in.counts[k]
		if t == nil {
			if slices.Contains(ShortKinds, k) {
				out = append(out, FaultLine{Kind: k})
			}
			continue
		}
		var d []string
		switch k {
		case KillService:
			for _, s := range slices.Sorted(maps.Keys(t.targets)) {
				d = append(d, fmt.Sprintf("%s %d", s, t.targets[s]))
			}
			d = append(d, fmt.Sprintf("%s down in all", t.down.Round(100*time.Millisecond)))
		case PGTerminate:
			d = append(d, fmt.Sprintf("%d backends", t.units))
		case MySQLKill:
			d = append(d, fmt.Sprintf("%d connections", t.units))
		case RedisPause, InboxLock:
			d = append(d, fmt.Sprintf("%s in all", t.down.Round(100*time.Millisecond)))
		case BrokerKill:
			d = append(d, fmt.Sprintf("%s down in all, until it answered again", t.down.Round(100*time.Millisecond)))
		default:
			d = append(d, t.down.Round(100*time.Millisecond).String())
			switch {
			case t.work < 0:
			case strings.HasSuffix(string(k), string(DepKafka)):
				d = append(d, fmt.Sprintf("up to %d events pending", t.work))
			default:
				d = append(d, fmt.Sprintf("up to %d messages waiting", t.work))
			}
		}
		if t.lastErr != nil {
			d = append(d, "last failure: "+short(t.lastErr.Error()))
		}
		out = append(out, FaultLine{Kind: k, N: t.n, Failed: t.failed, Detail: strings.Join(d, ", ")})
	}
	return out
}

// Print writes the summary.
func (r *Report) Print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("chaos summary (seed %d; reproduce the plan with MSGX_CHAOS_SEED=%d)", r.Seed, r.Seed)
	window := r.Window.String()
	if r.Window != r.Planned {
		window += fmt.Sprintf(" (asked %s, grown to fit the long outages)", r.Planned)
	}
	p("  window              %s", window)
	p("  traffic             %d messages, %d rolled-back inserts, %d late commits (held up to %s)",
		r.Messages, r.RolledBack, r.Late, r.LateMax.Round(time.Millisecond))
	p("  out of ID order     %d late arrivals of %d planned (held until ingest released their IDs, up to %s), %d replays of %d planned through control (after %d later messages of their flights succeeded)",
		r.Arrivals, r.ArrivalsPlanned, r.ArrivalMax.Round(time.Millisecond), r.Replays, r.ReplaysPlanned, r.ReplayLater)
	fill := "none measured"
	if r.LongestFill != nil {
		fill = (time.Duration(*r.LongestFill * float64(time.Second))).Round(time.Millisecond).String()
	}
	p("  discovery           longest stall %s (the oldest row waiting beyond W, sampled every 10s); longest measured commit delay %s",
		r.LongestStall.Round(100*time.Millisecond), fill)
	p("  outcomes")
	for _, k := range slices.Sorted(maps.Keys(r.Outcomes)) {
		p("    %-26s %d", k, r.Outcomes[k])
	}
	p("  Kafka records       %d received (redeliveries included)", r.Records)
	p("  faults injected")
	for _, f := range r.Faults {
		failed := ""
		if f.Failed > 0 {
			failed = fmt.Sprintf(", %d failed", f.Failed)
		}
		p("    %-26s %d%s  %s", f.Kind, f.N, failed, f.Detail)
	}
	p("  broker kills        %d (SIGKILL, restarted on its data at the same address)", r.BrokerKills)
	r.printFailovers(p)
	if r.SelfExits == 0 {
		p("  restarts by the supervisor: none (no process exited on its own)")
	} else {
		p("  restarts by the supervisor: %d processes exited on their own and were restarted: %s", r.SelfExits, strings.Join(r.SelfExitLines, "; "))
	}
	drained := "drained"
	if !r.Drained {
		drained = "NOT drained (drain timeout)"
	}
	p("  durations           setup %s, window %s, drain %s (%s), clean run %s, total %s",
		r.Setup.Round(100*time.Millisecond), r.WindowTook.Round(100*time.Millisecond), r.Drain.Round(100*time.Millisecond),
		drained, r.Clean.Round(100*time.Millisecond), r.Total.Round(100*time.Millisecond))
	p("  checks")
	failed := 0
	for _, c := range r.Checks {
		v := "PASS"
		if !c.Pass {
			v = "FAIL"
			failed++
		}
		p("    %s  %s: %s", v, c.Name, c.Detail)
	}
	if failed == 0 {
		p("  result              PASS (%d checks)", len(r.Checks))
	} else {
		p("  result              FAIL (%d of %d checks failed; logs in %s)", failed, len(r.Checks), r.LogDir)
	}
}
