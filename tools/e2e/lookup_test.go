package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/msgexchange/msgexchange/pkg/projection"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// TestOperatorLookup asks the operator's questions of a flight's messages after they went
// through the five binaries: a message's timeline, attempts and trace link (GetMessage), the
// messages of a flight by FLID, by flight number and day and by time (ListMessages), and the
// flight itself, PostgreSQL next to Redis with the drift (GetFlight).
func TestOperatorLookup(t *testing.T) {
	e := newEnv(t)
	const flid = "E2E-LOOKUP"
	msgs := scenario(flid)
	// A message that fails on every attempt (an element the codec does not know) and goes
	// DEAD(EXHAUSTED) after three quick ones.
	codec := &message{xml: strings.Replace(msgs[1].xml, "</MSG>", "<XTRA>1</XTRA></MSG>", 1), want: "DEAD"}
	msgs = append(msgs, codec)
	e.start(t, "ingest", "dispatcher", "backfill")
	if err := e.stack.Start("pump", nil, "MSGX_PIPELINE_MAX_ATTEMPTS=3", "MSGX_PIPELINE_BACKOFF=100ms,100ms,100ms"); err != nil {
		t.Fatal(err)
	}
	if err := e.stack.Start("control", nil, "MSGX_TRACING_UI_URL=http://jaeger.test:16686/trace/{trace_id}"); err != nil {
		t.Fatal(err)
	}
	e.insert(t, msgs)
	adft, estt, dup := msgs[0], msgs[1], msgs[2]
	for _, m := range msgs {
		testwait.ForState(t, 90*time.Second, "message "+m.want, func() (bool, string) {
			f := e.facts(t, m.id)
			return f.terminal && f.marked && f.delivered, f.String()
		})
	}
	client, ctx := e.control(t)

	t.Run("GetMessage: the timeline of a delivered message", func(t *testing.T) {
		got, err := client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: estt.id})
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		var prev, started time.Time
		for i, s := range got.GetTimeline() {
			steps = append(steps, s.GetStep())
			if s.At == nil {
				t.Errorf("step %s has no time, but every fact happened", s.GetStep())
				continue
			}
			at := s.GetAt().AsTime()
			if i > 0 && (s.SincePrevious == nil || s.GetSincePrevious().AsDuration() != at.Sub(prev)) {
				t.Errorf("step %s: since_previous %v, want %v", s.GetStep(), s.GetSincePrevious().AsDuration(), at.Sub(prev))
			}
			// The inbox's clock is MariaDB's (seconds); ours is the rest, in order, except that
			// the events commit with the message's business transaction, before its terminal
			// step is stamped, so the dispatcher may send one before "terminal": the marker and
			// the deliveries only come after processing started.
			switch {
			case s.GetStep() == "marked" || s.GetStep() == "event-sent":
				if at.Before(started) {
					t.Errorf("step %s at %v before processing started (%v)", s.GetStep(), at, started)
				}
			case i > 1 && at.Before(prev):
				t.Errorf("step %s at %v before the step before it (%v)", s.GetStep(), at, prev)
			}
			if s.GetStep() == "processing-started" {
				started = at
			}
			prev = at
		}
		want := []string{"in-inbox", "enqueued", "processing-started", "terminal"}
		if len(steps) < 6 || !slices.Equal(steps[:4], want) || !slices.Contains(steps, "marked") || !slices.Contains(steps, "event-sent") {
			t.Errorf("timeline %v, want %v then marked and each event sent", steps, want)
		}
		if n := strings.Count(strings.Join(steps, " "), "event-sent"); n != len(got.GetEvents()) {
			t.Errorf("%d event-sent steps for %d events", n, len(got.GetEvents()))
		}
		if a := got.GetAttempts(); len(a) != 1 || a[0].GetOutcome() != controlv1.MessageState_MESSAGE_STATE_SUCCEEDED {
			t.Errorf("attempts = %v, want the one that succeeded", a)
		}
		traceID := strings.Split(got.GetMessage().GetTraceParent(), "-")[1]
		if got.GetTraceId() != traceID || got.GetTraceUrl() != "http://jaeger.test:16686/trace/"+traceID {
			t.Errorf("trace %q %q, want %s and its link", got.GetTraceId(), got.GetTraceUrl(), traceID)
		}
		if got.GetMessage().GetFlid() != flid {
			t.Errorf("flid = %q, want %s", got.GetMessage().GetFlid(), flid)
		}
	})
	t.Run("GetMessage: every attempt of an exhausted message with its error", func(t *testing.T) {
		got, err := client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: codec.id})
		if err != nil {
			t.Fatal(err)
		}
		a := got.GetAttempts()
		if len(a) != 3 {
			t.Fatalf("attempts = %v, want 3", a)
		}
		for i, at := range a {
			if at.GetNumber() != int32(i+1) || at.GetOutcome() != controlv1.MessageState_MESSAGE_STATE_FAILED ||
				at.GetErrorClass() != controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR || !strings.Contains(at.GetError(), "XTRA") {
				t.Errorf("attempt %d = %v", i+1, at)
			}
		}
		if term := got.GetTimeline()[3]; term.GetStep() != "terminal" || !strings.HasPrefix(term.GetDetail(), "DEAD(EXHAUSTED)") {
			t.Errorf("terminal step = %v", term)
		}
	})
	ids := func(t *testing.T, req *controlv1.ListMessagesRequest) ([]int64, string) {
		t.Helper()
		resp, err := client.ListMessages(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, m := range resp.GetMessages() {
			out = append(out, m.GetMsgId())
		}
		return out, resp.GetNextPageToken()
	}
	// The schedule (through its events), the FLOP and its duplicate; not the other flight's
	// message, nor the ones that never decoded (no flight is known of them).
	flights := []int64{adft.id, estt.id, dup.id}
	t.Run("ListMessages by FLID, by flight number and day, by window, a page at a time", func(t *testing.T) {
		if got, _ := ids(t, &controlv1.ListMessagesRequest{Flid: flid}); !slices.Equal(got, flights) {
			t.Errorf("by FLID: %v, want %v", got, flights)
		}
		if got, _ := ids(t, &controlv1.ListMessagesRequest{FlightNumber: "CA1501", OperationDay: "2026-11-30"}); !slices.Equal(got, flights) {
			t.Errorf("by flight number: %v, want %v", got, flights)
		}
		if got, _ := ids(t, &controlv1.ListMessagesRequest{FlightNumber: "CA1501", OperationDay: "2026-12-01"}); len(got) != 0 {
			t.Errorf("another day: %v, want none", got)
		}
		later := timestamppb.New(time.Now().Add(time.Minute))
		if got, _ := ids(t, &controlv1.ListMessagesRequest{Flid: flid, EnqueuedFrom: later}); len(got) != 0 {
			t.Errorf("a window after the messages: %v, want none", got)
		}
		if got, _ := ids(t, &controlv1.ListMessagesRequest{Flid: flid, EnqueuedTo: later}); !slices.Equal(got, flights) {
			t.Errorf("a window around the messages: %v, want %v", got, flights)
		}
		first, tok := ids(t, &controlv1.ListMessagesRequest{Flid: flid, PageSize: 2})
		rest, end := ids(t, &controlv1.ListMessagesRequest{Flid: flid, PageSize: 2, PageToken: tok})
		if !slices.Equal(append(first, rest...), flights) || tok == "" || end != "" {
			t.Errorf("pages %v (%q) and %v (%q), want %v in two pages", first, tok, rest, end, flights)
		}
	})
	t.Run("GetFlight: PostgreSQL next to Redis, the drift, the messages and events", func(t *testing.T) {
		got, err := client.GetFlight(ctx, &controlv1.GetFlightRequest{Flid: flid})
		if err != nil {
			t.Fatal(err)
		}
		pg, rd := got.GetPostgres(), got.GetRedis()
		if pg.GetVersion() == 0 || rd.Version == nil || rd.GetVersion() != pg.GetVersion() || got.GetDrift() != "" || got.GetDrifted() ||
			pg.GetDocumentJson() != rd.GetDocumentJson() || pg.GetFlightNumber() != "CA1501" || pg.GetOperationDay() != "2026-11-30" {
			t.Errorf("flight = %v, want the same version and document in both stores and no drift", got)
		}
		var msgIDs []int64
		for _, m := range got.GetMessages() {
			msgIDs = append(msgIDs, m.GetMsgId())
		}
		if want := []int64{dup.id, estt.id, adft.id}; !slices.Equal(msgIDs, want) {
			t.Errorf("messages %v, want %v (newest first)", msgIDs, want)
		}
		if len(got.GetEvents()) == 0 {
			t.Error("no events")
		}
		for i, ev := range got.GetEvents() {
			if ev.GetPartitionKey() != flid || (i > 0 && ev.GetEventId() > got.GetEvents()[i-1].GetEventId()) {
				t.Errorf("event %v: another flight's, or not newest first", ev)
			}
		}

		// The projection loses its document: the drift shows.
		if err := e.redis.Client.Del(ctx, projection.FlightKey(e.redis.Prefix, flid)).Err(); err != nil {
			t.Fatal(err)
		}
		got, err = client.GetFlight(ctx, &controlv1.GetFlightRequest{Flid: flid})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetDrift() != string(projection.Missing) || !got.GetDrifted() || got.GetRedis().GetDocumentJson() != "" {
			t.Errorf("after losing the document: drift %q drifted %v", got.GetDrift(), got.GetDrifted())
		}
		if _, err := client.GetFlight(ctx, &controlv1.GetFlightRequest{Flid: "NEVER-SEEN"}); status.Code(err) != codes.NotFound {
			t.Errorf("unknown flight: %v, want NotFound", err)
		}
	})
}
