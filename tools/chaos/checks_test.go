package chaos

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// The checks must be able to fail: each is fed a clean state and then the same state with
// one defect of the kind it exists to catch.

func recs(ids ...int64) []received {
	out := make([]received, len(ids))
	for i, id := range ids {
		out[i] = received{eventID: id, version: id}
	}
	return out
}

func TestOrderProblem(t *testing.T) {
	want := []int64{1, 2, 3}
	for _, ok := range [][]int64{{1, 2, 3}, {1, 2, 1, 2, 3}, {1, 1, 2, 3, 3}} {
		if p := orderProblem(want, recs(ok...)); p != "" {
			t.Errorf("arrival %v: %s, want in order (redeliveries of seen ids are at least once)", ok, p)
		}
	}
	bad := map[string][]int64{"reordered": {1, 3, 2}, "gap": {1, 3}, "unknown": {1, 2, 3, 9}, "nothing": nil}
	for name, got := range bad {
		if p := orderProblem(want, recs(got...)); p == "" {
			t.Errorf("%s arrival %v passed", name, got)
		}
	}
}

func TestOutageReason(t *testing.T) {
	outage := []string{
		"read inbox: read inbox row 512: context deadline exceeded",
		"redis projection: WRONGPASS invalid username-password pair or user is disabled.",
		"redis projection: dial tcp 127.0.0.1:6379: i/o timeout",
		"begin: FATAL: terminating connection due to administrator command (SQLSTATE 57P01)",
	}
	for _, r := range outage {
		if !outageReason(r) {
			t.Errorf("%q is an outage", r)
		}
	}
	for _, r := range []string{"duplicate-of:12", "codec: unknown STYP", "panic: index out of range [3]"} {
		if outageReason(r) {
			t.Errorf("%q is not an outage", r)
		}
	}
}

func TestLongOutageExceedsTheBudget(t *testing.T) {
	if RetryBudget() != 31*time.Second {
		t.Fatalf("retry budget %s, want 31s with the default backoff 1,2,4,8,16s", RetryBudget())
	}
	want := map[Dep]time.Duration{DepInbox: 66 * time.Second, DepRedis: 56 * time.Second, DepPG: 41 * time.Second, DepKafka: 41 * time.Second}
	for d, w := range want {
		if got := LongOutage(d); got != w {
			t.Errorf("long outage of %s = %s, want %s", d, got, w)
		}
	}
}

func TestPlanLong(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	slots, window := planLong(r, time.Minute, AllDeps)
	var total time.Duration
	for _, s := range slots {
		total += s.dur
	}
	// The broker's start after its long outage is planned too.
	total += brokerStart
	if window != total+5*minGap {
		t.Errorf("a minute cannot hold every long outage: window %s, want it grown to %s", window, total+5*minGap)
	}
	slots, window = planLong(r, 10*time.Minute, AllDeps)
	if window != 10*time.Minute || len(slots) != len(AllDeps) {
		t.Fatalf("window %s with %d slots", window, len(slots))
	}
	end := time.Duration(0)
	for _, s := range slots {
		if s.at < end+minGap {
			t.Errorf("%s starts at %s, %s after the previous outage ended", s.dep, s.at, s.at-end)
		}
		end = s.at + s.dur
		if s.dep == DepKafka {
			end += brokerStart
		}
	}
	if window-end < minGap {
		t.Errorf("the last outage ends %s before the window", window-end)
	}
	if slots, _ := planLong(r, time.Minute, nil); len(slots) != 0 {
		t.Errorf("no long outages asked, %d planned", len(slots))
	}
}

func TestLoadSpanCoversTheLongOutages(t *testing.T) {
	if got := loadSpan(4*time.Minute, nil); got != 3*time.Minute {
		t.Errorf("without long outages the load spans %s, want three quarters of the window", got)
	}
	long := []longSlot{{dep: DepRedis, at: 3 * time.Minute, dur: 51 * time.Second}}
	if got := loadSpan(4*time.Minute, long); got < 3*time.Minute+51*time.Second || got > 4*time.Minute {
		t.Errorf("the load spans %s: the outage ending at 3m51s would meet no traffic", got)
	}
}

func TestPlanLoad(t *testing.T) {
	msgs := traffic.Day(traffic.Options{Flights: 20, Seed: 3})
	p := planLoad(rand.New(rand.NewPCG(5, 6)), msgs, 4, 7, 1500*time.Millisecond, time.Minute)
	if len(p.holes) != 4 || len(p.late) != 7 {
		t.Fatalf("%d holes and %d late commits, want 4 and 7", len(p.holes), len(p.late))
	}
	limit := len(msgs) * 9 / 10
	for i := range p.holes {
		if i < 1 || i >= limit {
			t.Errorf("hole before message %d: a hole needs a row before and a committed row after it", i)
		}
	}
	for i, d := range p.late {
		if i >= limit || d < 300*time.Millisecond || d > 1500*time.Millisecond {
			t.Errorf("late commit of message %d held %s", i, d)
		}
	}
}

func TestParseDepsAndEnv(t *testing.T) {
	for in, want := range map[string][]Dep{"all": AllDeps, "none": nil, "pg, kafka,pg": {DepPG, DepKafka}} {
		got, err := ParseDeps(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseDeps(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseDeps("inbox,mongo"); err == nil {
		t.Error("an unknown dependency was accepted")
	}
	c, err := FromEnv(func(string) string { return "" })
	if err != nil || c.Window != DefaultWindow || !slices.Equal(c.Long, DefaultLong) {
		t.Errorf("defaults: window %s, long %v, err %v", c.Window, c.Long, err)
	}
	env := map[string]string{EnvDuration: "5m", EnvLong: "all", EnvSeed: "42", EnvFlights: "30"}
	c, err = FromEnv(func(k string) string { return env[k] })
	if err != nil || c.Window != 5*time.Minute || !slices.Equal(c.Long, AllDeps) || c.Seed != 42 || c.Flights != 30 {
		t.Errorf("from the environment: %+v, %v", c, err)
	}
	for k, v := range map[string]string{EnvDuration: "5s", EnvSeed: "x", EnvFlights: "0", EnvLong: "disk"} {
		if _, err := FromEnv(func(key string) string { return map[string]string{k: v}[key] }); err == nil {
			t.Errorf("%s=%s accepted", k, v)
		}
	}
	c = Defaults(time.Minute)
	c.Bin, c.LogDir = "bin", "logs"
	c.LateMax = c.MaxCommitDelay
	if err := c.validate(); err == nil {
		t.Error("a late commit as long as max-commit-delay was accepted: it would be a late arrival")
	}
}

// healthy is a small consistent run: two messages of flight F1, the second a duplicate of the
// first, delivered in order, with one rolled-back insert at ID 2.
func healthy() evidence {
	snap := func() *snapshot {
		return &snapshot{
			outcomes: map[int64]outcome{
				1: {State: "SUCCEEDED", Identity: "AODB|FLOP|ESTT|1", Marked: true},
				3: {State: "SKIPPED", Reason: "duplicate-of:1", Marked: true},
			},
			tables: map[string][]string{"flight_schd": {`{"flid": "F1", "estt": "x"}`}},
			events: []event{
				{ID: 10, FLID: "F1", Target: "KAFKA:msg", Type: "UPSERT", Version: 1, MsgID: 1, State: "SENT"},
				{ID: 11, FLID: "F1", Target: "KAFKA:schd", Type: "UPSERT", Version: 1, MsgID: 1, State: "SENT"},
			},
			redis: map[string]string{"flight:F1": `{"FLID":"F1"}`},
			holes: [][2]int64{{2, 2}},
		}
	}
	return evidence{
		chaos: snap(), clean: snap(),
		inbox: inboxState{ids: []int64{1, 3}},
		load:  &loadResult{ids: []int64{1, 3}, rolledBack: []int64{2}},
		msg:   map[string][]received{"F1": recs(10)},
		schd:  map[string][]received{"F1": recs(11)},
	}
}

func TestChecksPassAHealthyRun(t *testing.T) {
	for _, c := range runChecks(healthy())[:7] {
		if !c.Pass {
			t.Errorf("%s failed a healthy run: %s", c.Name, c.Detail)
		}
	}
}

func TestChecksFailTheirDefect(t *testing.T) {
	defects := []struct {
		check string
		spoil func(*evidence)
	}{
		{CheckEnqueued, func(e *evidence) { delete(e.chaos.outcomes, 3) }},
		{CheckEnqueued, func(e *evidence) { e.chaos.holes = nil }},
		{CheckEnqueued, func(e *evidence) { e.chaos.late = []int64{3} }},
		{CheckTerminal, func(e *evidence) { e.chaos.outcomes[3] = outcome{State: "FAILED", Reason: "read inbox: timeout"} }},
		{CheckTerminal, func(e *evidence) { e.inbox.unmarked = []int64{1} }},
		{CheckExhausted, func(e *evidence) {
			e.chaos.outcomes[1] = outcome{State: "DEAD", Class: "EXHAUSTED", Reason: "redis projection: context deadline exceeded", Marked: true}
		}},
		{CheckDouble, func(e *evidence) {
			e.chaos.events = append(e.chaos.events, event{ID: 12, FLID: "F1", Target: "KAFKA:msg", Version: 2, MsgID: 1, State: "SENT"})
		}},
		{CheckDouble, func(e *evidence) {
			e.chaos.outcomes[3] = outcome{State: "SUCCEEDED", Identity: "AODB|FLOP|ESTT|1x", Marked: true}
		}},
		{CheckKafkaOrder, func(e *evidence) { e.msg["F1"] = nil }},
		{CheckKafkaOrder, func(e *evidence) { e.chaos.events[0].State = "DEAD" }},
		{CheckKafkaOrder, func(e *evidence) { e.schd["F1"] = append(recs(11), received{eventID: 7, version: 0}) }},
		{CheckKafkaOrder, func(e *evidence) {
			e.broken, e.brokenFirst = 1, []string{"KAFKA:msg record \"F1\" breaks the event contract"}
		}},
		{CheckClean, func(e *evidence) { e.chaos.tables["flight_schd"] = []string{`{"flid": "F1", "estt": "y"}`} }},
		{CheckClean, func(e *evidence) { e.chaos.redis["flight:F1"] = `{"FLID":"F1","ESTT":"y"}` }},
		{CheckClean, func(e *evidence) { e.chaos.events[0].Payload = `{"CHANGED": ["ESTT"]}` }},
		{CheckClean, func(e *evidence) { e.chaos.outcomes[3] = outcome{State: "DEAD", Class: "EXHAUSTED", Marked: true} }},
		{CheckCodeShare, func(e *evidence) {
			e.chaos.tables["flight_schd"] = append(e.chaos.tables["flight_schd"], `{"flid": "M9", "state": "DELETED"}`,
				`{"flid": "C9", "state": "ACTIVE", "maid": "M9"}`)
		}},
	}
	for _, d := range defects {
		ev := healthy()
		d.spoil(&ev)
		for _, c := range runChecks(ev) {
			if c.Name == d.check && c.Pass {
				t.Errorf("%s passed a run with its defect: %s", c.Name, c.Detail)
			}
		}
	}
}

func TestDiffRowsNamesTheColumn(t *testing.T) {
	a := []string{`{"flid": "F1", "estt": "x", "stnd": "1"}`, `{"flid": "F2"}`}
	b := []string{`{"flid": "F1", "estt": "y", "stnd": "1"}`, `{"flid": "F3"}`}
	got := diffRows([]string{"flid"}, a, b)
	want := []string{"flid=F1: estt chaos x, clean y", "flid=F2 only in the chaos run", "flid=F3 only in the clean run"}
	if !slices.Equal(got, want) {
		t.Errorf("diff = %q, want %q", got, want)
	}
	if d := diffRows([]string{"flid"}, a, a); len(d) != 0 {
		t.Errorf("equal rows differ: %q", d)
	}
}

func TestCheckFaults(t *testing.T) {
	ev := healthy()
	ev.faults = map[Kind]*tally{}
	for _, k := range ShortKinds {
		ev.faults[k] = &tally{n: 1, work: -1}
	}
	ev.long = []longSlot{{dep: DepKafka, dur: LongOutage(DepKafka)}}
	ev.faults[longKind(DepKafka)] = &tally{n: 1, down: LongOutage(DepKafka), work: 3}
	if c := checkFaults(ev); !c.Pass {
		t.Fatalf("every fault injected: %s", c.Detail)
	}
	ev.faults[longKind(DepKafka)].down = 10 * time.Second
	if c := checkFaults(ev); c.Pass || !strings.Contains(c.Detail, "lasted") {
		t.Errorf("a long outage cut short passed: %s", c.Detail)
	}
	ev.faults[longKind(DepKafka)].down = LongOutage(DepKafka)
	ev.faults[longKind(DepKafka)].work = 0
	if c := checkFaults(ev); c.Pass || !strings.Contains(c.Detail, "met no work") {
		t.Errorf("a long outage of an idle stack passed: %s", c.Detail)
	}
	ev.faults[longKind(DepKafka)].work = 7
	delete(ev.faults, RedisPause)
	ev.faults[longKind(DepKafka)].down = LongOutage(DepKafka)
	if c := checkFaults(ev); c.Pass {
		t.Error("a run without a Redis pause passed")
	}
}

// TestLongOutageSparesThePump guards R-INV-6.
func TestLongOutageSparesThePump(t *testing.T) {
	in := &injector{counts: map[Kind]*tally{}, long: map[Dep]bool{}}
	for _, k := range ShortKinds {
		if in.blocked(k) {
			t.Errorf("%s blocked with no outage on", k)
		}
	}
	in.setLong(DepRedis, true)
	for k, want := range map[Kind]bool{RedisPause: true, PGTerminate: true, KillService: false, InboxLock: false} {
		if got := in.blocked(k); got != want {
			t.Errorf("during the Redis outage %s blocked = %v, want %v", k, got, want)
		}
	}
	in.holding(true)
	if !in.blocked(InboxLock) {
		t.Error("LOCK TABLES while a late-arrival insert is open: it would wait for it and stall the inbox")
	}
	in.holding(false)
	in.setLong(DepRedis, false)
	in.setLong(DepKafka, true)
	if !in.blocked(BrokerKill) || in.blocked(PGTerminate) {
		t.Error("during the broker outage only the broker's own faults are held back")
	}
}

// disordered is healthy with message 1 applied out of ID order: a late arrival that its
// flight's newer messages superseded, so in the chaos run it ended SKIPPED and F1's version
// and writer differ from the clean run's.
func disordered() evidence {
	ev := healthy()
	ev.load.arrivals = []lateArrival{{id: 1, flid: "F1", released: true}}
	ev.chaos.late = []int64{1}
	ev.chaos.holes = append(ev.chaos.holes, [2]int64{1, 1})
	ev.clean.holes = ev.chaos.holes
	ev.chaos.outcomes[1] = outcome{State: "SKIPPED", Reason: "superseded: ESTT newer at msg 5", Identity: "AODB|FLOP|ESTT|1", Marked: true}
	ev.chaos.tables["flight_schd"] = []string{`{"flid": "F1", "estt": "x", "state_version": 3, "last_msg_id": 1, "provenance": {"base": 1, "last": 1}}`}
	ev.clean.tables["flight_schd"] = []string{`{"flid": "F1", "estt": "x", "state_version": 4, "last_msg_id": 5, "provenance": {"base": 1, "last": 5}}`}
	ev.chaos.redis["flight:F1"] = `{"FLID":"F1","STATE_VERSION":3}`
	ev.clean.redis["flight:F1"] = `{"FLID":"F1","STATE_VERSION":4}`
	ev.chaos.redis["flight-version/F1"], ev.clean.redis["flight-version/F1"] = "3", "4"
	ev.chaos.events[0].Version, ev.chaos.events[1].Version = 3, 3
	ev.chaos.events[1].Payload = `{"FLID": "F1", "STATE_VERSION": 3}`
	ev.clean.events[1].Payload = `{"FLID": "F1", "STATE_VERSION": 4}`
	return ev
}

func TestChecksAcceptTheOutOfOrderDifferences(t *testing.T) {
	for _, c := range runChecks(disordered())[:6] {
		if !c.Pass {
			t.Errorf("%s failed a run whose only differences are those out of ID order: %s", c.Name, c.Detail)
		}
	}
	defects := []struct {
		check string
		spoil func(*evidence)
	}{
		// Content still counts: a column, the provenance's writers, a document, the latest state.
		{CheckClean, func(e *evidence) {
			e.chaos.tables["flight_schd"] = []string{`{"flid": "F1", "estt": "y", "state_version": 3, "last_msg_id": 1, "provenance": {"base": 1, "last": 1}}`}
		}},
		{CheckClean, func(e *evidence) {
			e.chaos.tables["flight_schd"] = []string{`{"flid": "F1", "estt": "x", "state_version": 3, "last_msg_id": 1, "provenance": {"base": 5, "last": 1}}`}
		}},
		{CheckClean, func(e *evidence) { e.chaos.redis["flight:F1"] = `{"FLID":"F1","ESTT":"y","STATE_VERSION":3}` }},
		{CheckClean, func(e *evidence) { e.chaos.events[1].Payload = `{"FLID": "F1", "ESTT": "y", "STATE_VERSION": 3}` }},
		// Only the superseded skip of an out-of-order message is accepted.
		{CheckClean, func(e *evidence) {
			e.chaos.outcomes[1] = outcome{State: "SKIPPED", Reason: "unknown-flight", Identity: "AODB|FLOP|ESTT|1", Marked: true}
		}},
		{CheckClean, func(e *evidence) {
			e.load.arrivals = nil
			e.chaos.late = nil
			e.chaos.holes = e.chaos.holes[:1]
		}},
		// A late arrival the harness did not plan, or a planned one never found.
		{CheckEnqueued, func(e *evidence) { e.chaos.late = []int64{1, 3} }},
		{CheckEnqueued, func(e *evidence) { e.chaos.late = nil }},
		{CheckEnqueued, func(e *evidence) { e.load.arrivals[0].released = false }},
		// Out of ID order a message still writes one change event per flight.
		{CheckDouble, func(e *evidence) {
			e.chaos.events = append(e.chaos.events, event{ID: 12, FLID: "F1", Target: "KAFKA:msg", Version: 4, MsgID: 3, State: "SENT"},
				event{ID: 13, FLID: "F1", Target: "KAFKA:msg", Version: 5, MsgID: 3, State: "SENT"})
		}},
	}
	for i, d := range defects {
		ev := disordered()
		d.spoil(&ev)
		for _, c := range runChecks(ev) {
			if c.Name == d.check && c.Pass {
				t.Errorf("defect %d: %s passed: %s", i, c.Name, c.Detail)
			}
		}
	}
}

func TestPlanOrder(t *testing.T) {
	msgs := traffic.Day(traffic.Options{Flights: 60, Seed: 7})
	p := planLoad(rand.New(rand.NewPCG(5, 6)), msgs, 4, 7, 1500*time.Millisecond, 2*time.Minute)
	pg := []longSlot{{dep: DepPG, at: 10 * time.Second, dur: 41 * time.Second}}
	planOrder(rand.New(rand.NewPCG(8, 9)), &p, 4, 2, pg)
	if len(p.arrivals) != 4 || len(p.replays) != 1 {
		// 2 minutes of load hold one replay clear of the PostgreSQL outage (ending at 51s,
		// 5s after it) and 60s from the next.
		t.Fatalf("%d late arrivals and %d replays planned, want 4 and 1", len(p.arrivals), len(p.replays))
	}
	at := func(i int) time.Duration { return p.span * time.Duration(i) / time.Duration(len(msgs)) }
	flights := map[string]bool{}
	for i, a := range p.arrivals {
		m := msgs[i]
		if m.Kind != traffic.KindFLOP || m.FLID != a.flid || p.late[i] > 0 || flights[a.flid] {
			t.Errorf("late arrival %d: %s of %s (late commit %v), flight taken %v", i, m.Kind, m.FLID, p.late[i] > 0, flights[a.flid])
		}
		if msgs[a.next].FLID != a.flid || a.next <= i {
			t.Errorf("late arrival %d: next message %d is not a later one of %s", i, a.next, a.flid)
		}
		if at(i) >= 10*time.Second-15*time.Second && at(i) <= 56*time.Second {
			t.Errorf("late arrival %d at %s meets the PostgreSQL outage", i, at(i))
		}
		flights[a.flid] = true
	}
	for i, r := range p.replays {
		m := msgs[i]
		if m.Kind != traffic.KindFLOP || m.FLID != r.flid || flights[r.flid] || msgs[r.pred].FLID != r.flid || r.pred >= i || len(r.later) == 0 {
			t.Errorf("replay %d: %s of %s, previous %d, %d later", i, m.Kind, m.FLID, r.pred, len(r.later))
		}
		if at(i) <= 56*time.Second {
			t.Errorf("replay %d at %s meets the PostgreSQL outage", i, at(i))
		}
		flights[r.flid] = true
	}
	// The clean reference never sees the plan: it copies the inbox; without counts nothing is
	// planned.
	q := planLoad(rand.New(rand.NewPCG(5, 6)), msgs, 4, 7, 1500*time.Millisecond, 2*time.Minute)
	planOrder(rand.New(rand.NewPCG(8, 9)), &q, 0, 0, nil)
	if len(q.arrivals)+len(q.replays) != 0 {
		t.Error("planned without counts")
	}
}

func TestWithLockTimeout(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@h:5432/db?sslmode=disable": "postgres://u@h:5432/db?options=-c%20lock_timeout%3D2000&sslmode=disable",
		"host=h user=u dbname=db":                "host=h user=u dbname=db options='-c lock_timeout=2000'",
	} {
		got, err := withLockTimeout(in, 2*time.Second)
		if err != nil || got != want {
			t.Errorf("withLockTimeout(%q) = %q, %v; want %q", in, got, err, want)
			continue
		}
		// What the pump's driver sends the server at start-up.
		c, err := pgx.ParseConfig(got)
		if err != nil || c.RuntimeParams["options"] != "-c lock_timeout=2000" {
			t.Errorf("%q parses to options %q (%v)", got, c.RuntimeParams["options"], err)
		}
	}
	if _, err := withLockTimeout("postgres://h/db?options=-c%20x%3D1", time.Second); err == nil {
		t.Error("a DSN with options of its own was overwritten")
	}
}

// A process the supervisor restarted fails the run, unless a dependency refused its settings at
// start-up (R-START-2: the Redis user switched off during its long outage).
func TestCheckStayedUp(t *testing.T) {
	for _, tt := range []struct {
		name           string
		exits, refused int
		pass           bool
	}{
		{"no exit", 0, 0, true},
		{"refused settings only", 29, 29, true},
		{"a crash among refusals", 30, 29, false},
		{"a crash", 1, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := checkStayedUp(evidence{selfExits: tt.exits, settingsRefused: tt.refused, selfExitLines: []string{"backfill"}})
			if c.Pass != tt.pass {
				t.Errorf("pass = %v, want %v (%s)", c.Pass, tt.pass, c.Detail)
			}
		})
	}
}
