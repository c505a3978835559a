package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
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
