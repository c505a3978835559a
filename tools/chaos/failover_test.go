package chaos

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/traffic"
)

func TestParseFailovers(t *testing.T) {
	for in, want := range map[string]string{"": "", "none": "", "all": "redis,pg", "redis": "redis", " redis , redis ": "redis", "pg,redis": "pg,redis"} {
		got, err := ParseFailovers(in)
		if err != nil {
			t.Errorf("ParseFailovers(%q): %v", in, err)
			continue
		}
		var names []string
		for _, f := range got {
			names = append(names, string(f))
		}
		if strings.Join(names, ",") != want {
			t.Errorf("ParseFailovers(%q) = %v, want %s", in, got, want)
		}
	}
	if _, err := ParseFailovers("redis,mongo"); err == nil || !strings.Contains(err.Error(), `"mongo"`) {
		t.Errorf("an unknown failover: %v, want an error naming it", err)
	}
	c, err := FromEnv(func(k string) string {
		if k == EnvFailovers {
			return "redis"
		}
		return ""
	})
	if err != nil || !c.Has(FailoverRedis) {
		t.Errorf("FromEnv with %s=redis: %+v, %v", EnvFailovers, c.Failovers, err)
	}
	if c, err := FromEnv(func(string) string { return "" }); err != nil || len(c.Failovers) != 0 {
		t.Errorf("FromEnv without %s: %v, %v; want no failover (make test's default)", EnvFailovers, c.Failovers, err)
	}
}

// The failovers stay out of the window's edges and of the long outages that block the pump,
// and apart from each other; the broker's outage is no obstacle.
func TestPlanFailovers(t *testing.T) {
	if got := planFailovers(time.Minute, nil, nil); got != nil {
		t.Errorf("without failovers: %v", got)
	}
	if got := planFailovers(72*time.Second, []longSlot{{dep: DepKafka, at: 8 * time.Second, dur: LongOutage(DepKafka)}},
		[]Failover{FailoverRedis}); len(got) != 1 || got[0] != 36*time.Second {
		t.Errorf("the short run's plan: %v, want one in the middle of the window", got)
	}
	window := 5 * time.Minute
	var long []longSlot
	at := 16 * time.Second
	for _, d := range AllDeps {
		long = append(long, longSlot{dep: d, at: at, dur: LongOutage(d)})
		at += span(d) + 16*time.Second
	}
	got := planFailovers(window, long, []Failover{FailoverRedis})
	if len(got) < 3 {
		t.Fatalf("a 5-minute run with every long outage plans %v: fewer than 3", got)
	}
	for i, f := range got {
		if f < failoverEdge || f > window-failoverEdge {
			t.Errorf("failover at %s: within %s of the window's edge", f, failoverEdge)
		}
		if i > 0 && f-got[i-1] < failoverApart {
			t.Errorf("failovers at %s and %s: closer than %s", got[i-1], f, failoverApart)
		}
		for _, l := range long {
			if l.dep != DepKafka && f+failoverReach > l.at-minGap && f < l.at+l.dur+minGap {
				t.Errorf("failover at %s: during the long outage of %s (%s from %s)", f, l.dep, l.dur, l.at)
			}
		}
	}
}

func TestCheckFailovers(t *testing.T) {
	if got := checkFailovers(nil); got != nil {
		t.Errorf("without failovers the run adds a check: %+v", got)
	}
	ok := FailoverReport{Kind: FailoverRedis, Planned: 2, Made: 2, Waiting: 7, Met: 1}
	if c := checkFailovers([]FailoverReport{ok}); len(c) != 1 || !c[0].Pass {
		t.Errorf("two of two made under traffic: %+v", c)
	}
	short := ok
	short.Made, short.Failures = 1, []string{"no master promoted"}
	idle := ok
	idle.Met = 0
	none := FailoverReport{Kind: FailoverRedis}
	for name, r := range map[string]FailoverReport{"one not made": short, "idle": idle, "no room": none} {
		if c := checkFailovers([]FailoverReport{r}); len(c) != 1 || c[0].Pass {
			t.Errorf("%s: %+v, want a failed check", name, c)
		}
	}
}

// A replay holds the queue's head for its whole retry budget: none is placed in the 50 s before
// a failover, which would then meet no projection write.
func TestReplaysKeepClearOfTheFailovers(t *testing.T) {
	msgs := traffic.Day(traffic.Options{Flights: 60, Seed: 7})
	p := planLoad(rand.New(rand.NewPCG(5, 6)), msgs, 4, 7, 1500*time.Millisecond, 2*time.Minute)
	planOrder(rand.New(rand.NewPCG(8, 9)), &p, 0, 2, failoverSlots([]time.Duration{60 * time.Second}))
	if len(p.replays) == 0 {
		t.Fatal("no replay planned: the test proves nothing")
	}
	for i := range p.replays {
		if at := p.span * time.Duration(i) / time.Duration(len(msgs)); at >= 10*time.Second && at <= 60*time.Second+failoverAwait+5*time.Second {
			t.Errorf("replay %d at %s: its held head would meet the failover at 60s", i, at)
		}
	}
}

// The replay waits predecessorWait for its flight's previous message, which the long Redis
// outage holds up: none is placed in it.
func TestReplaysKeepClearOfTheRedisOutage(t *testing.T) {
	msgs := traffic.Day(traffic.Options{Flights: 60, Seed: 7})
	p := planLoad(rand.New(rand.NewPCG(5, 6)), msgs, 4, 7, 1500*time.Millisecond, 2*time.Minute)
	planOrder(rand.New(rand.NewPCG(8, 9)), &p, 0, 2, []longSlot{{dep: DepRedis, at: 40 * time.Second, dur: LongOutage(DepRedis)}})
	if len(p.replays) == 0 {
		t.Fatal("no replay planned: the test proves nothing")
	}
	for i := range p.replays {
		if at := p.span * time.Duration(i) / time.Duration(len(msgs)); at >= 20*time.Second && at <= 40*time.Second+LongOutage(DepRedis)+10*time.Second {
			t.Errorf("replay %d at %s: in the long Redis outage", i, at)
		}
	}
}
