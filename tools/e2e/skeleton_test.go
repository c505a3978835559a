package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// message is one inbox row of a scenario and the terminal state a correct pipeline gives it.
type message struct {
	xml  string
	want string
	id   int64
}

func scenario(flid string) []*message {
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	f := traffic.Flight{FLID: flid, ALCD: "CA", FLNO: "CA1501", MVIN: "D", SODT: day.Add(8*time.Hour + 30*time.Minute),
		FLTY: "W", FLIN: "D", ACFT: "33L", RENO: "B1234", TRML: "T3", STND: "512", Route: []string{"PEK", "SHA"}}
	dttm := day.Add(6 * time.Hour)
	estt := traffic.FLOP(2, dttm.Add(time.Minute), flid, f.FFID(), "ESTT", "<ESTT>"+traffic.FormatTime(f.SODT.Add(20*time.Minute))+"</ESTT>")
	return []*message{
		{xml: traffic.ADFT(1, dttm, f), want: "SUCCEEDED"},
		{xml: estt, want: "SUCCEEDED"},
		{xml: estt, want: "SKIPPED"}, // the same identity again: a duplicate
		{xml: "<MSG><META><SNDR>AODB</SNDR>", want: "DEAD"},
		{xml: traffic.FLOP(3, dttm.Add(2*time.Minute), "NO-SUCH-FLIGHT", "", "ESTT", "<ESTT>"+traffic.FormatTime(f.SODT)+"</ESTT>"), want: "SKIPPED"},
	}
}

func (e *env) insert(t testing.TB, msgs []*message) {
	t.Helper()
	for _, m := range msgs {
		now := time.Now()
		m.id = e.my.InsertInbox(t, m.xml, &now)
	}
}

// TestWalkingSkeleton sends rows through the five services and checks the five facts of each.
// Guards R-INV-23.
func TestWalkingSkeleton(t *testing.T) {
	e := newEnv(t)
	e.startAll(t)
	msgs := scenario("E2E-1")
	e.insert(t, msgs)
	// The operator's view: control reports every role held by a live instance.
	e.waitAllRolesActive(t)

	for _, m := range msgs {
		testwait.ForState(t, 60*time.Second, "the five facts of message "+m.xml[:min(len(m.xml), 30)], func() (bool, string) {
			f := e.facts(t, m.id)
			return f.inInbox && f.enqueued && f.terminal && f.marked && f.delivered, f.String()
		})
		if f := e.facts(t, m.id); f.state != m.want {
			t.Errorf("message %d: state %s, want %s", m.id, f.state, m.want)
		}
	}
	ctx := context.Background()
	var estt, styp string
	if err := e.pg.Pool.QueryRow(ctx, `SELECT estt, (SELECT msg_styp FROM proc_state WHERE msg_id = $1) FROM flight_schd WHERE flid = 'E2E-1'`,
		msgs[1].id).Scan(&estt, &styp); err != nil {
		t.Fatalf("flight_schd: %v", err)
	}
	if estt != "30NOV260850" || styp != "ESTT" {
		t.Errorf("flight_schd.estt = %q (styp %q), want 30NOV260850 from the ESTT message", estt, styp)
	}
	// The Redis projection carries the same state.
	doc, err := e.redis.Client.Get(ctx, projection.FlightKey(e.redis.Prefix, "E2E-1")).Result()
	if err != nil {
		t.Fatalf("redis projection: %v", err)
	}
	var state map[string]any
	if err := json.Unmarshal([]byte(doc), &state); err != nil || state["ESTT"] != "30NOV260850" {
		t.Errorf("projection = %s, want ESTT 30NOV260850", doc)
	}
	// Kafka: the ESTT change notification is keyed by FLID and carries the message's trace.
	var eventID int64
	var parent string
	if err := e.pg.Pool.QueryRow(ctx, `SELECT event_id, p.trace_parent FROM msg_event JOIN proc_state p USING (msg_id)
		WHERE msg_id = $1 AND target = 'KAFKA:msg'`, msgs[1].id).Scan(&eventID, &parent); err != nil {
		t.Fatalf("msg event: %v", err)
	}
	rec := e.records.record(eventID)
	if string(rec.Key) != "E2E-1" {
		t.Errorf("record key = %q, want the FLID", rec.Key)
	}
	traceID := strings.Split(parent, "-")[1]
	var found bool
	for _, h := range rec.Headers {
		if h.Key == "traceparent" && strings.Split(string(h.Value), "-")[1] == traceID {
			found = true
		}
	}
	if !found {
		t.Errorf("record headers %v lack a traceparent of trace %s", rec.Headers, traceID)
	}
}

// TestEveryServiceIsNeeded removes one service at a time: the fact that service decides must
// stay missing while the others still happen, so the walking skeleton cannot pass without it.
func TestEveryServiceIsNeeded(t *testing.T) {
	settle := 4 * time.Second
	cases := []struct {
		missing string
		// before must hold for the scenario's first two rows with the service missing;
		// absent must not hold even after settle.
		before func(f facts) bool
		absent func(f facts) bool
	}{
		{"ingest", func(f facts) bool { return f.inInbox }, func(f facts) bool { return f.enqueued }},
		{"pump", func(f facts) bool { return f.enqueued }, func(f facts) bool { return f.terminal }},
		{"dispatcher", func(f facts) bool { return f.terminal && f.marked && f.events > 0 }, func(f facts) bool { return f.delivered }},
		{"backfill", func(f facts) bool { return f.terminal && f.delivered && f.events > 0 }, func(f facts) bool { return f.marked }},
	}
	t.Run("without control", func(t *testing.T) {
		// Control decides no fact of a message, but the operator's status comes only from it.
		e := newEnv(t)
		e.start(t, "ingest", "pump", "dispatcher", "backfill")
		msgs := scenario("E2E-control")[:2]
		e.insert(t, msgs)
		for _, m := range msgs {
			testwait.ForState(t, 60*time.Second, "the four facts", func() (bool, string) {
				f := e.facts(t, m.id)
				return f.terminal && f.marked && f.delivered, f.String()
			})
		}
		if got, err := e.activeRoles(context.Background()); err == nil {
			t.Errorf("without control, the status still answered: active roles %q", got)
		}
	})
	for _, c := range cases {
		t.Run("without "+c.missing, func(t *testing.T) {
			e := newEnv(t)
			var roles []string
			for _, r := range []string{"ingest", "pump", "dispatcher", "backfill", "control"} {
				if r != c.missing {
					roles = append(roles, r)
				}
			}
			e.start(t, roles...)
			msgs := scenario("E2E-" + c.missing)[:2]
			e.insert(t, msgs)
			for _, m := range msgs {
				testwait.ForState(t, 60*time.Second, "the facts that do not need "+c.missing, func() (bool, string) {
					f := e.facts(t, m.id)
					return c.before(f), f.String()
				})
			}
			time.Sleep(settle)
			for _, m := range msgs {
				if f := e.facts(t, m.id); c.absent(f) {
					t.Errorf("without %s, message %d still got the fact it decides: %s", c.missing, m.id, f)
				}
			}
		})
	}
}
