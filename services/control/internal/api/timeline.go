package api

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// The steps of a message's timeline: the five facts, the last one once per event.
const (
	StepInInbox           = "in-inbox"
	StepEnqueued          = "enqueued"
	StepProcessingStarted = "processing-started"
	StepTerminal          = "terminal"
	StepMarked            = "marked"
	StepEventSent         = "event-sent"
	// StepAcknowledged is an operator's review of a DEAD message (AcknowledgeDead), listed only
	// for an acknowledged message: it is no fact every message reaches.
	StepAcknowledged = "acknowledged"
)

// timeline lays out the facts of one message in order: the first four in the order they must
// happen, then the marker and the deliveries (independent of each other) in the order they did
// happen, those not reached yet last. Each reached step carries the time since the reached step
// before it. Pure: the handler reads, this decides what an operator sees.
func timeline(m queue.Message, events []outbox.Row, changes []flightstore.Change) []*controlv1.TimelineStep {
	type step struct {
		name, detail string
		at           *time.Time
		eventID      int64
	}
	enqueued := m.EnqueuedAt
	head := []step{
		{name: StepInInbox, at: m.ReceivedAt, detail: "CMINMSGS_DATE_RECEIVED (the inbox's clock)"},
		{name: StepEnqueued, at: &enqueued, detail: "discovered by ingest"},
		{name: StepProcessingStarted, at: m.ProcessingStartedAt, detail: startedDetail(m)},
		{name: StepTerminal, at: m.FinishedAt, detail: terminalDetail(m) + supersededDetail(changes)},
	}
	if m.ReceivedAt == nil {
		head[0].detail = "the inbox row carries no CMINMSGS_DATE_RECEIVED"
	}
	tail := []step{{name: StepMarked, at: m.BackfillAt, detail: markedDetail(m)}}
	for _, e := range events {
		tail = append(tail, step{name: StepEventSent, at: e.SentAt, eventID: e.ID, detail: eventDetail(e)})
	}
	if a := m.Ack; a != nil {
		tail = append(tail, step{name: StepAcknowledged, at: &a.At, detail: fmt.Sprintf("by %s: %s", a.By, a.Reason)})
	}
	// Stable: equal times (and the unreached, at the end) keep marker-then-event_id order.
	slices.SortStableFunc(tail, func(a, b step) int {
		switch {
		case a.at == nil && b.at == nil:
			return 0
		case a.at == nil:
			return 1
		case b.at == nil:
			return -1
		}
		return a.at.Compare(*b.at)
	})
	var (
		out  []*controlv1.TimelineStep
		prev *time.Time
	)
	for _, s := range append(head, tail...) {
		ts := &controlv1.TimelineStep{Step: s.name, At: optTimestamp(s.at), Detail: s.detail, EventId: s.eventID}
		if s.at != nil {
			if prev != nil {
				ts.SincePrevious = durationpb.New(s.at.Sub(*prev))
			}
			prev = s.at
		}
		out = append(out, ts)
	}
	return out
}

func startedDetail(m queue.Message) string {
	switch {
	case m.ProcessingStartedAt == nil:
		return "not yet: waiting behind the queue head, or above the watermark"
	case m.State.Terminal():
		return "first attempt"
	case m.Attempts == 0:
		return "first attempt; in progress, or paused by an outage (not counted)"
	}
	return fmt.Sprintf("first attempt; %d failed so far", m.Attempts)
}

func terminalDetail(m queue.Message) string {
	what := string(m.State)
	if m.ErrorClass != nil {
		what += "(" + string(*m.ErrorClass) + ")"
	}
	if !m.State.Terminal() {
		if m.NextAttemptAt != nil {
			return fmt.Sprintf("not yet: %s, next attempt at %s", what, m.NextAttemptAt.UTC().Format(time.RFC3339))
		}
		return "not yet: " + what
	}
	if m.LastError != nil && m.State != queue.Succeeded {
		what += ": " + *m.LastError
	}
	return what
}

// supersededDetail names, for the terminal step, the parts of each flight the message left to
// newer messages (R-ORDER-2): "; superseded F1 ESTT by msg 120".
func supersededDetail(changes []flightstore.Change) string {
	var parts []string
	for _, c := range changes {
		for _, p := range slices.Sorted(maps.Keys(c.Superseded)) {
			parts = append(parts, fmt.Sprintf("%s %s by msg %d", c.FLID, p, c.Superseded[p]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; superseded " + strings.Join(parts, ", ")
}

func markedDetail(m queue.Message) string {
	switch {
	case m.BackfillAt != nil:
		return "processed marker written to the inbox row"
	case m.BackfillAbandonedAt != nil:
		return fmt.Sprintf("abandoned at %s (%s): reopen to try again", m.BackfillAbandonedAt.UTC().Format(time.RFC3339),
			str(m.BackfillReason))
	case m.BackfillNextAt != nil:
		return fmt.Sprintf("not yet: next try at %s (%d so far)", m.BackfillNextAt.UTC().Format(time.RFC3339), m.BackfillAttempts)
	}
	return "not yet: owed once the message is terminal"
}

func eventDetail(e outbox.Row) string {
	d := fmt.Sprintf("%s key %s v%d %s", e.Target, e.PartitionKey, e.Version, e.Type)
	if e.State != "SENT" {
		d = "not yet: " + d + " " + e.State
		if e.Attempts > 0 {
			d += fmt.Sprintf(" after %d attempts", e.Attempts)
		}
		if e.LastError != nil {
			d += ": " + *e.LastError
		}
	}
	return d
}

// attempts lists a message's attempts: the kept history, or, for a message that ended on its
// first attempt (no history is written for it), that attempt as the processing record tells it.
func attempts(m queue.Message, kept []queue.Attempt) []*controlv1.Attempt {
	if len(kept) == 0 && m.State.Terminal() && m.FinishedAt != nil && m.ProcessingStartedAt != nil {
		kept = []queue.Attempt{{No: 1, Started: *m.ProcessingStartedAt, Ended: *m.FinishedAt, Outcome: m.State,
			ErrorClass: m.ErrorClass, Error: m.LastError}}
		if m.State == queue.Succeeded {
			kept[0].ErrorClass, kept[0].Error = nil, nil
		}
	}
	out := make([]*controlv1.Attempt, 0, len(kept))
	for _, a := range kept {
		pa := &controlv1.Attempt{
			Number:    int32(a.No),
			StartedAt: timestamp(a.Started),
			EndedAt:   timestamp(a.Ended),
			Duration:  durationpb.New(a.Ended.Sub(a.Started)),
			Outcome:   messageState(a.Outcome),
			Error:     str(a.Error),
		}
		if a.ErrorClass != nil {
			pa.ErrorClass = errorClass(*a.ErrorClass)
		}
		out = append(out, pa)
	}
	return out
}

// traceLink returns the trace ID of a W3C traceparent and its link built from uiURL (with
// config.TraceIDPlaceholder); both empty when the traceparent holds no valid trace ID.
func traceLink(traceParent, uiURL string) (id, link string) {
	// version-traceid-spanid-flags
	parts := strings.Split(traceParent, "-")
	if len(parts) != 4 {
		return "", ""
	}
	tid, err := trace.TraceIDFromHex(parts[1])
	if err != nil || !tid.IsValid() {
		return "", ""
	}
	id = tid.String()
	if uiURL != "" {
		link = strings.ReplaceAll(uiURL, config.TraceIDPlaceholder, id)
	}
	return id, link
}
