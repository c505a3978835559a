package app_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

// eventRow inserts one msg_event row in a consistent state (SENT rows have sent_at; DEAD rows
// have used their attempts and carry the broker's error) and returns its event_id.
func eventRow(t *testing.T, db *pgtest.DB, target, flid string, version, msgID int64, state string, at time.Time) int64 {
	t.Helper()
	attempts, lastErr := 0, ""
	var sent *time.Time
	switch state {
	case "DEAD":
		attempts, lastErr = 5, "kafka: broker not available"
	case "SENT":
		sent = &at
	}
	var id int64
	err := db.Pool.QueryRow(t.Context(), `INSERT INTO msg_event (target, partition_key, event_type, state_version, payload,
		msg_id, state, attempts, last_error, sent_at, created_at, updated_at)
		VALUES ($1, $2, 'UPSERT', $3, '{}', $4, $5, $6, nullif($7, ''), $8, $9, $9) RETURNING event_id`,
		target, flid, version, msgID, state, attempts, lastErr, sent, at).Scan(&id)
	if err != nil {
		t.Fatalf("insert event: %v", err)
	}
	return id
}

// eventState reads an event's state, attempts and last change.
func eventState(t *testing.T, db *pgtest.DB, id int64) (state string, attempts int, updated time.Time) {
	t.Helper()
	if err := db.Pool.QueryRow(t.Context(), `SELECT state, attempts, updated_at FROM msg_event WHERE event_id = $1`, id).
		Scan(&state, &attempts, &updated); err != nil {
		t.Fatalf("event %d: %v", id, err)
	}
	return state, attempts, updated
}

func eventIDs(events []*controlv1.DeadEvent) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.GetEventId()
	}
	return out
}

func TestRequeueEvents(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	deadAt := now.Add(-10 * time.Minute)
	// A Kafka outage left the heads of F1 and F2 DEAD on KAFKA:msg, with F1's next event
	// waiting behind its head, and F1's schedule row DEAD; F3 was delivered, F4 is pending.
	msgF1 := eventRow(t, db, outbox.TargetMsg, "F1", 1, 101, "DEAD", deadAt)
	msgF1next := eventRow(t, db, outbox.TargetMsg, "F1", 2, 102, "PENDING", deadAt)
	msgF2 := eventRow(t, db, outbox.TargetMsg, "F2", 1, 103, "DEAD", deadAt)
	msgF3 := eventRow(t, db, outbox.TargetMsg, "F3", 1, 104, "SENT", deadAt)
	schdF1 := eventRow(t, db, outbox.TargetSchd, "F1", 2, 102, "DEAD", deadAt)
	schdF4 := eventRow(t, db, outbox.TargetSchd, "F4", 1, 105, "PENDING", deadAt)
	msgF5 := eventRow(t, db, outbox.TargetMsg, "F5", 1, 106, "DEAD", deadAt)
	msgF6 := eventRow(t, db, outbox.TargetMsg, "F6", 1, 106, "DEAD", deadAt)

	logs := &testlog.Buffer{}
	in := startWith(t, db, "control-requeue", now, nil, logs)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)
	pending := func() []int64 {
		t.Helper()
		evs, err := outbox.Pending(t.Context(), db.Pool, outbox.TargetMsg, 100, now)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, e := range evs {
			ids = append(ids, e.ID)
		}
		return ids
	}
	untouched := func(ids ...int64) {
		t.Helper()
		for _, id := range ids {
			if _, _, updated := eventState(t, db, id); !updated.Equal(deadAt) {
				t.Errorf("event %d changed at %v, want untouched", id, updated)
			}
		}
	}

	t.Run("dry run lists and changes nothing", func(t *testing.T) {
		resp, err := in.client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Target: outbox.TargetMsg, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.GetDryRun() || resp.GetRequeued() != 4 || resp.GetMore() ||
			!slices.Equal(eventIDs(resp.GetEvents()), []int64{msgF1, msgF2, msgF5, msgF6}) {
			t.Errorf("dry run = %v, want the 4 DEAD KAFKA:msg events", resp)
		}
		e := resp.GetEvents()[0]
		if e.GetTarget() != outbox.TargetMsg || e.GetFlid() != "F1" || e.GetStateVersion() != 1 || e.GetMsgId() != 101 ||
			e.GetAttempts() != 5 || e.GetLastError() != "kafka: broker not available" || e.GetEventType() != "UPSERT" ||
			!e.GetDeadAt().AsTime().Equal(deadAt) {
			t.Errorf("first dead event = %v", e)
		}
		untouched(msgF1, msgF2, msgF5, msgF6, schdF1)
		if st, _, _ := eventState(t, db, msgF1); st != "DEAD" {
			t.Errorf("after a dry run event %d is %s, want DEAD", msgF1, st)
		}
	})

	t.Run("by target and FLID releases the FLID and wakes the dispatcher", func(t *testing.T) {
		woken := db.Listen(t, outbox.Channel)
		if got := pending(); slices.Contains(got, msgF1next) {
			t.Fatalf("before the requeue F1's second event is sendable (%v); its FLID should be paused", got)
		}
		resp, err := in.client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Target: outbox.TargetMsg, Flid: "F1", Comment: "INC-77 kafka back"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetDryRun() || resp.GetRequeued() != 1 || !slices.Equal(eventIDs(resp.GetEvents()), []int64{msgF1}) {
			t.Errorf("requeue F1 = %v, want [%d]", resp, msgF1)
		}
		if st, attempts, updated := eventState(t, db, msgF1); st != "PENDING" || attempts != 0 || !updated.Equal(now) {
			t.Errorf("event %d is %s with %d attempts (changed %v), want PENDING, 0, at %v", msgF1, st, attempts, updated, now)
		}
		// F1 resumes in order; F2 stays paused; F1's schedule row is another target.
		if got := pending(); !slices.Equal(got, []int64{msgF1, msgF1next}) {
			t.Errorf("sendable KAFKA:msg events after the requeue = %v, want [%d %d]", got, msgF1, msgF1next)
		}
		untouched(msgF2, schdF1, msgF1next)
		if !woken(10 * time.Second) {
			t.Errorf("no dispatcher wake-up; want a notification on %s", outbox.Channel)
		}
	})

	t.Run("by IDs: only DEAD events, the others reported back", func(t *testing.T) {
		resp, err := in.client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Comment: "INC-T",
			EventIds: []int64{schdF1, msgF1next, msgF3, schdF4, 999999, schdF1},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(eventIDs(resp.GetEvents()), []int64{schdF1}) ||
			!slices.Equal(resp.GetNotDeadIds(), []int64{msgF1next, msgF3, schdF4, 999999}) {
			t.Errorf("requeue by IDs = %v, want [%d] requeued and [%d %d %d 999999] not dead", resp, schdF1, msgF1next, msgF3, schdF4)
		}
		if st, attempts, _ := eventState(t, db, schdF1); st != "PENDING" || attempts != 0 {
			t.Errorf("schedule event %d is %s with %d attempts, want PENDING, 0", schdF1, st, attempts)
		}
		if st, _, _ := eventState(t, db, msgF3); st != "SENT" {
			t.Errorf("SENT event %d is now %s", msgF3, st)
		}
		untouched(msgF1next, msgF3, schdF4)
	})

	t.Run("limit and more", func(t *testing.T) {
		// F2, F5, F6 are DEAD; msg_id 106 wrote F5 and F6.
		resp, err := in.client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Comment: "INC-T", Target: outbox.TargetMsg, MsgId: 106, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.GetMore() || !slices.Equal(eventIDs(resp.GetEvents()), []int64{msgF5}) {
			t.Errorf("first call = %v, want [%d] and more", resp, msgF5)
		}
		resp, err = in.client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Comment: "INC-T", Target: outbox.TargetMsg, MsgId: 106, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetMore() || !slices.Equal(eventIDs(resp.GetEvents()), []int64{msgF6}) {
			t.Errorf("second call = %v, want [%d] and no more", resp, msgF6)
		}
		if st, _, _ := eventState(t, db, msgF2); st != "DEAD" {
			t.Errorf("event %d of another message is %s, want DEAD", msgF2, st)
		}
	})

	t.Run("nothing to requeue", func(t *testing.T) {
		resp, err := in.client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Comment: "INC-T", Target: outbox.TargetSchd})
		if err != nil || resp.GetRequeued() != 0 || len(resp.GetEvents()) != 0 {
			t.Errorf("requeue with no DEAD schedule rows = %v, %v; want nothing", resp, err)
		}
	})

	t.Run("invalid requests", func(t *testing.T) {
		for name, req := range map[string]*controlv1.RequeueEventsRequest{
			"no selector":    {Flid: "F2", DryRun: true},
			"unknown target": {Target: "KAFKA:other"},
			"limit too big":  {Target: outbox.TargetMsg, Limit: controlv1.MaxRequeueEvents + 1},
			"negative ID":    {EventIds: []int64{-1}},
		} {
			if _, err := in.client.RequeueEvents(ctx, req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("%s: RequeueEvents = %v, want InvalidArgument", name, err)
			}
		}
		if st, _, _ := eventState(t, db, msgF2); st != "DEAD" {
			t.Errorf("event %d after refused calls is %s, want DEAD", msgF2, st)
		}
	})

	t.Run("audited", func(t *testing.T) {
		var found bool
		for _, a := range audits(logs) {
			if a["method"] != "/msgx.control.v1.ControlService/RequeueEvents" || !strings.Contains(a["request"].(string), "INC-77") {
				continue
			}
			found = true
			var resp struct {
				Events []struct {
					EventID string `json:"event_id"`
					Flid    string `json:"flid"`
				} `json:"events"`
			}
			_ = json.Unmarshal([]byte(a["response"].(string)), &resp)
			if a["code"] != "OK" || len(resp.Events) != 1 || resp.Events[0].Flid != "F1" {
				t.Errorf("audit line = %v, want code OK and the requeued F1 event", a)
			}
			if caller, _ := a["caller"].(map[string]any); caller["token"].(string) != "operator-token" {
				t.Errorf("audit caller = %v, want operator-token", caller)
			}
		}
		if !found {
			t.Fatalf("no audit line for the requeue with comment INC-77 in %v", audits(logs))
		}
		var dry, invalid int
		for _, a := range audits(logs) {
			if a["method"] != "/msgx.control.v1.ControlService/RequeueEvents" {
				continue
			}
			if strings.Contains(a["request"].(string), `"dry_run":true`) || strings.Contains(a["request"].(string), `"dry_run": true`) {
				dry++
			}
			if a["code"] == "InvalidArgument" {
				invalid++
			}
		}
		if dry < 1 || invalid != 4 {
			t.Errorf("audited %d dry runs and %d refused requeues, want at least 1 and 4", dry, invalid)
		}
	})
}
