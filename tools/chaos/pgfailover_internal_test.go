package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// With both failovers the plan takes them in turn, each at least once where the window has
// room; the report counts each kind's own planned ones, so that the check compares like with
// like.
func TestFailoversInTurn(t *testing.T) {
	both := []Failover{FailoverPG, FailoverRedis}
	at := planFailovers(5*time.Minute, nil, both)
	if len(at) < 4 {
		t.Fatalf("a five-minute window without long outages: %d failovers planned (%v), want at least 4", len(at), at)
	}
	if pg, rd := plannedOf(at, both, FailoverPG), plannedOf(at, both, FailoverRedis); pg+rd != len(at) || pg < 2 || rd < 2 || pg-rd > 1 {
		t.Errorf("%d slots: %d pg and %d redis, want them in turn", len(at), pg, rd)
	}
	for i := range at {
		if want := both[i%2]; failoverKind(both, i) != want {
			t.Errorf("failover %d: %s, want %s", i, failoverKind(both, i), want)
		}
	}
	if got := planFailovers(time.Minute, nil, []Failover{FailoverPG}); len(got) != 1 {
		t.Errorf("the one-minute run with the PostgreSQL failover alone: %v, want one", got)
	}
}

// The summary names the PostgreSQL failover's own steps: the promotion, the roles back on the
// new primary, the rebuilt standby.
func TestPrintPGFailover(t *testing.T) {
	var lines []string
	p := func(format string, args ...any) {
		lines = append(lines, strings.TrimSpace(fmt.Sprintf(format, args...)))
	}
	printPGFailover(p, FailoverReport{Kind: FailoverPG, Planned: 1, Made: 1, Promote: []time.Duration{1200 * time.Millisecond},
		Roles: []time.Duration{4 * time.Second}, PumpRole: []time.Duration{2 * time.Second}, Met: 1, Waiting: 12})
	if len(lines) != 1 || !strings.Contains(lines[0], "pg 1 of 1 planned") || !strings.Contains(lines[0], "promoted after 1.2s") ||
		!strings.Contains(lines[0], "the pump's role back on it after 2s, every role after 4s") || !strings.Contains(lines[0], "up to 12") {
		t.Errorf("summary line: %q", lines)
	}
}

// make test's one-minute run, grown to fit its long broker outage, has room for both
// failovers when MSGX_CHAOS_FAILOVERS=all: each kind is made once.
func TestShortRunFitsBothFailovers(t *testing.T) {
	long, window := planLong(rand.New(rand.NewPCG(1, 2)), DefaultWindow, DefaultLong)
	at := planFailovers(window, long, AllFailovers)
	for _, f := range AllFailovers {
		if n := plannedOf(at, AllFailovers, f); n != 1 {
			t.Errorf("window %s: %d %s failovers planned (%v), want 1", window, n, f, at)
		}
	}
}

// A kind the window had no room for fails the check with a reason, instead of passing unmade.
func TestCheckFailoversNoRoom(t *testing.T) {
	c := checkFailovers([]FailoverReport{{Kind: FailoverRedis, Planned: 1, Made: 1, Met: 1}, {Kind: FailoverPG}})
	if len(c) != 1 || c[0].Pass || !strings.Contains(c[0].Detail, "pg: no room") {
		t.Errorf("a failover kind with no slot: %+v", c)
	}
}

// A replay's held row dies with the primary: the replays keep clear of every PostgreSQL
// failover, not only of the first failover as of the Redis ones.
func TestReplaysKeepClearOfEveryPGFailover(t *testing.T) {
	at := []time.Duration{60 * time.Second, 90 * time.Second, 120 * time.Second}
	deps := []Failover{FailoverRedis, FailoverPG}
	slots := replaySlots(at, deps)
	if len(slots) != 2 || slots[0].at != 60*time.Second || slots[1].at != 90*time.Second {
		t.Fatalf("slots %+v: want the first failover and the PostgreSQL one at 90s", slots)
	}
	msgs := traffic.Day(traffic.Options{Flights: 120, Seed: 7})
	made := 0
	for seed := range uint64(20) {
		p := planLoad(rand.New(rand.NewPCG(seed, 6)), msgs, 4, 7, 1500*time.Millisecond, 3*time.Minute)
		planOrder(rand.New(rand.NewPCG(seed, 9)), &p, 0, 3, slots)
		made += len(p.replays)
		for i := range p.replays {
			at := p.span * time.Duration(i) / time.Duration(len(msgs))
			if at >= 90*time.Second-50*time.Second && at <= 90*time.Second+failoverAwait+5*time.Second {
				t.Errorf("seed %d, replay %d at %s: its held row would die with the primary at 90s", seed, i, at)
			}
		}
	}
	if made == 0 {
		t.Fatal("no replay planned: the test proves nothing")
	}
}
