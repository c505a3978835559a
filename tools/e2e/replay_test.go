package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// TestReplayMakesThePumpProcessAgain replays a DEAD(EXHAUSTED) message through control's API
// while the real msgx-pump runs: the pump takes it as its head again and processes it to a new
// terminal state, with the flight change and its events (R-REPLAY-2). It spans two services,
// so it lives here rather than in either module (docs/architecture.md, "Modules").
func TestReplayMakesThePumpProcessAgain(t *testing.T) {
	e := newEnv(t)
	raw, err := os.ReadFile("testdata/adft.xml")
	if err != nil {
		t.Fatal(err)
	}
	received := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	id := e.my.InsertInbox(t, string(raw), &received)
	// The message was discovered and then exhausted its attempts (an outage, say); ingest does
	// not run, so nothing else is enqueued.
	now := time.Now()
	if err := cursor.Save(t.Context(), e.pg.Pool, id, nil, now); err != nil {
		t.Fatal(err)
	}
	e.pg.Exec(t, `INSERT INTO proc_state (msg_id, state, error_class, last_error, attempts, received_at, enqueued_at,
		finished_at, backfill_next_at, updated_at)
		VALUES ($1, 'DEAD', 'EXHAUSTED', 'redis: connection refused', 5, $2, $3, $3, $3, $3)`, id, received, now.Add(-30*time.Minute))

	e.start(t, "pump", "control")
	client, ctx := e.control(t)
	// The pump leaves the DEAD message alone: wait until it holds its role, then check.
	testwait.For(t, 60*time.Second, "the pump to hold its role", func() bool {
		st, err := e.status(t.Context())
		if err != nil {
			return false
		}
		for _, r := range st.GetRoles() {
			if r.GetRole() == "pump" && r.GetActive() {
				return true
			}
		}
		return false
	})
	if f := e.facts(t, id); f.state != "DEAD" {
		t.Fatalf("before the replay the pump changed the DEAD message to %s", f.state)
	}

	resp, err := client.Replay(ctx, &controlv1.ReplayRequest{MsgIds: []int64{id}, Comment: "after the Redis outage"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetReplayed() != 1 {
		t.Fatalf("replay = %v, want the message replayed", resp)
	}
	var f facts
	testwait.For(t, 60*time.Second, "the pump to process the replayed message", func() bool {
		f = e.facts(t, id)
		return f.terminal
	})
	if f.state != "SUCCEEDED" {
		t.Fatalf("after the replay the message is %s, want SUCCEEDED", f.state)
	}
	got, err := client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: id})
	if err != nil {
		t.Fatal(err)
	}
	m := got.GetMessage()
	if m.GetErrorClass() != controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED || m.GetAttempts() != 0 || m.GetMsgType() != "SCHD" ||
		len(got.GetEvents()) == 0 || got.GetRawStatus() != controlv1.RawStatus_RAW_STATUS_OK {
		t.Errorf("processed again = %v with %d events, want SUCCEEDED without error class, type SCHD, events and the raw text",
			m, len(got.GetEvents()))
	}
}
