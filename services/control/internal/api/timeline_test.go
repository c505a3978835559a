package api

import (
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

func TestTimeline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) *time.Time { v := t0.Add(time.Duration(ms) * time.Millisecond); return &v }
	class := func(c queue.ErrorClass) *queue.ErrorClass { return &c }
	text := func(s string) *string { return &s }
	sent := func(id int64, ms int) outbox.Row {
		return outbox.Row{ID: id, Target: "KAFKA:msg", PartitionKey: "F1", Type: "UPSERT", Version: 3, State: "SENT", SentAt: at(ms)}
	}
	const no = -1 << 30 // not reached, unset
	type want struct {
		step    string
		at      int // ms after t0, or no
		since   int // ms, or no
		detail  string
		eventID int64
	}
	tests := []struct {
		name   string
		m      queue.Message
		events []outbox.Row
		want   []want
	}{
		{
			name: "succeeded, marked after the events",
			m: queue.Message{State: queue.Succeeded, ReceivedAt: at(-500), EnqueuedAt: *at(0), ProcessingStartedAt: at(100),
				FinishedAt: at(150), BackfillAt: at(900)},
			events: []outbox.Row{sent(7, 400), sent(8, 300)},
			want: []want{
				{StepInInbox, -500, no, "inbox's clock", 0},
				{StepEnqueued, 0, 500, "ingest", 0},
				{StepProcessingStarted, 100, 100, "first attempt", 0},
				{StepTerminal, 150, 50, "SUCCEEDED", 0},
				{StepEventSent, 300, 150, "KAFKA:msg key F1 v3 UPSERT", 8},
				{StepEventSent, 400, 100, "KAFKA:msg", 7},
				{StepMarked, 900, 500, "marker written", 0},
			},
		},
		{
			name: "failing: nothing after the head, the next attempt named",
			m: queue.Message{State: queue.Failed, ErrorClass: class(queue.Infra), Attempts: 2, EnqueuedAt: *at(0),
				ProcessingStartedAt: at(10), NextAttemptAt: at(5000)},
			want: []want{
				{StepInInbox, no, no, "no CMINMSGS_DATE_RECEIVED", 0},
				{StepEnqueued, 0, no, "", 0},
				{StepProcessingStarted, 10, 10, "2 failed so far", 0},
				{StepTerminal, no, no, "not yet: FAILED(INFRA), next attempt at 2026-03-01T12:00:05Z", 0},
				{StepMarked, no, no, "not yet", 0},
			},
		},
		{
			name: "dead with an abandoned marker and a dead event, the inbox clock ahead of ours",
			m: queue.Message{State: queue.Dead, ErrorClass: class(queue.Exhausted), LastError: text("redis: refused"),
				ReceivedAt: at(200), EnqueuedAt: *at(0), ProcessingStartedAt: at(10), FinishedAt: at(20),
				BackfillAbandonedAt: at(30), BackfillReason: text("MISSING_ROW")},
			events: []outbox.Row{{ID: 9, Target: "KAFKA:msg", PartitionKey: "F1", Type: "UPSERT", Version: 1, State: "DEAD",
				Attempts: 5, LastError: text("TOPIC_AUTHORIZATION_FAILED")}},
			want: []want{
				{StepInInbox, 200, no, "", 0},
				{StepEnqueued, 0, -200, "", 0},
				{StepProcessingStarted, 10, 10, "", 0},
				{StepTerminal, 20, 10, "DEAD(EXHAUSTED): redis: refused", 0},
				{StepMarked, no, no, "abandoned at 2026-03-01T12:00:00Z (MISSING_ROW)", 0},
				{StepEventSent, no, no, "not yet: KAFKA:msg key F1 v1 UPSERT DEAD after 5 attempts: TOPIC_AUTHORIZATION_FAILED", 9},
			},
		},
		{
			name: "dead and acknowledged by an operator",
			m: queue.Message{State: queue.Dead, ErrorClass: class(queue.Malformed), LastError: text("not XML"),
				EnqueuedAt: *at(0), ProcessingStartedAt: at(10), FinishedAt: at(20), BackfillAt: at(40),
				Ack: &queue.Ack{At: *at(600), By: "token:operator:1a2b", Reason: "garbage from a test sender"}},
			want: []want{
				{StepInInbox, no, no, "", 0},
				{StepEnqueued, 0, no, "", 0},
				{StepProcessingStarted, 10, 10, "", 0},
				{StepTerminal, 20, 10, "DEAD(MALFORMED): not XML", 0},
				{StepMarked, 40, 20, "marker written", 0},
				{StepAcknowledged, 600, 560, "by token:operator:1a2b: garbage from a test sender", 0},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := timeline(tc.m, tc.events, nil)
			if len(got) != len(tc.want) {
				t.Fatalf("%d steps, want %d: %v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.GetStep() != w.step || g.GetEventId() != w.eventID || !strings.Contains(g.GetDetail(), w.detail) {
					t.Errorf("step %d = %s %q event %d, want %s containing %q event %d", i, g.GetStep(), g.GetDetail(),
						g.GetEventId(), w.step, w.detail, w.eventID)
				}
				switch {
				case w.at == no && g.At != nil:
					t.Errorf("step %d (%s) at %v, want not reached", i, w.step, g.GetAt().AsTime())
				case w.at != no && (g.At == nil || !g.GetAt().AsTime().Equal(*at(w.at))):
					t.Errorf("step %d (%s) at %v, want %v", i, w.step, g.GetAt(), *at(w.at))
				}
				switch {
				case w.since == no && g.SincePrevious != nil:
					t.Errorf("step %d (%s) since_previous %v, want unset", i, w.step, g.GetSincePrevious().AsDuration())
				case w.since != no && (g.SincePrevious == nil || g.GetSincePrevious().AsDuration() != time.Duration(w.since)*time.Millisecond):
					t.Errorf("step %d (%s) since_previous %v, want %dms", i, w.step, g.GetSincePrevious(), w.since)
				}
			}
		})
	}
}

func TestAttempts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	later := t0.Add(2 * time.Second)
	class := queue.Unsupported
	reason := "unsupported: RSTA"
	t.Run("a first attempt that ended the message, from the record", func(t *testing.T) {
		got := attempts(queue.Message{State: queue.Skipped, ErrorClass: &class, LastError: &reason, ProcessingStartedAt: &t0,
			FinishedAt: &later}, nil)
		if len(got) != 1 || got[0].GetNumber() != 1 || got[0].GetOutcome() != controlv1.MessageState_MESSAGE_STATE_SKIPPED ||
			got[0].GetErrorClass() != controlv1.ErrorClass_ERROR_CLASS_UNSUPPORTED || got[0].GetError() != reason ||
			got[0].GetDuration().AsDuration() != 2*time.Second {
			t.Errorf("attempts = %v", got)
		}
	})
	t.Run("a success keeps no stale error", func(t *testing.T) {
		got := attempts(queue.Message{State: queue.Succeeded, ErrorClass: &class, LastError: &reason, ProcessingStartedAt: &t0,
			FinishedAt: &later}, nil)
		if len(got) != 1 || got[0].GetError() != "" || got[0].GetErrorClass() != controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
			t.Errorf("attempts = %v", got)
		}
	})
	t.Run("unfinished without history: none yet", func(t *testing.T) {
		if got := attempts(queue.Message{State: queue.Pending, ProcessingStartedAt: &t0}, nil); len(got) != 0 {
			t.Errorf("attempts = %v", got)
		}
	})
	t.Run("the kept history as it is", func(t *testing.T) {
		infra := queue.Infra
		got := attempts(queue.Message{State: queue.Failed}, []queue.Attempt{
			{No: 4, Started: t0, Ended: later, Outcome: queue.Failed, ErrorClass: &infra, Error: &reason}})
		if len(got) != 1 || got[0].GetNumber() != 4 || got[0].GetOutcome() != controlv1.MessageState_MESSAGE_STATE_FAILED {
			t.Errorf("attempts = %v", got)
		}
	})
}

func TestTraceLink(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		parent, ui, id, link string
	}{
		{tp, "http://jaeger:16686/trace/{trace_id}", "4bf92f3577b34da6a3ce929d0e0e4736",
			"http://jaeger:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736"},
		{tp, "", "4bf92f3577b34da6a3ce929d0e0e4736", ""},
		{"", "http://jaeger:16686/trace/{trace_id}", "", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "http://x/{trace_id}", "", ""},
		{"garbage", "http://x/{trace_id}", "", ""},
	} {
		id, link := traceLink(tc.parent, tc.ui)
		if id != tc.id || link != tc.link {
			t.Errorf("traceLink(%q, %q) = %q, %q; want %q, %q", tc.parent, tc.ui, id, link, tc.id, tc.link)
		}
	}
}
