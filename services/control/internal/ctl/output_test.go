package ctl

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

func renderString(t *testing.T, format string, m proto.Message, name string, long bool) string {
	t.Helper()
	var b bytes.Buffer
	if err := renderAs(&b, format, false, m, name, long); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// fullMessage has every field set, the long ones long.
func fullMessage(id int64, flid string) *controlv1.Message {
	at := timestamppb.New(time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC))
	return &controlv1.Message{MsgId: id, State: controlv1.MessageState_MESSAGE_STATE_DEAD,
		ErrorClass: controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED, LastError: strings.Repeat("redis: connection refused; ", 12),
		Attempts: 5, NextAttemptAt: at, IdentityKey: "FLOP|" + flid + "|2026-03-01|CA1501", MsgType: "FLOP", MsgStyp: "ESTT",
		ReceivedAt: at, EnqueuedAt: at, ProcessingStartedAt: at, FinishedAt: at, BackfillNextAt: at, BackfillAt: at,
		BackfillAttempts: 3, BackfillAbandonedAt: at, BackfillAbandonReason: controlv1.AbandonReason_ABANDON_REASON_TRANSIENT_DEADLINE,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "vendor=x", UpdatedAt: at, Flid: flid}
}

func TestListTablesAreNarrowAndStable(t *testing.T) {
	t.Parallel()
	full := &controlv1.ListMessagesResponse{Messages: []*controlv1.Message{fullMessage(1234567, "2718281"), fullMessage(1234568, "2718282")},
		NextPageToken: "abc"}
	sparse := &controlv1.ListMessagesResponse{Messages: []*controlv1.Message{{MsgId: 7, State: controlv1.MessageState_MESSAGE_STATE_PENDING}}}
	narrow := renderString(t, "table", full, "", false)
	for _, line := range strings.Split(narrow, "\n") {
		if n := utf8.RuneCountInString(line); n > 120 {
			t.Errorf("line of %d characters:\n%s", n, line)
		}
	}
	header := regexp.MustCompile(`(?m)^MSG_ID.*$`)
	if a, b := strings.Fields(header.FindString(narrow)), strings.Fields(header.FindString(renderString(t, "table", sparse, "", false))); strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("columns differ between a full and a sparse page: %v vs %v", a, b)
	}
	if strings.Contains(narrow, "FLOP|2718281") || strings.Contains(narrow, "00-4bf92f") || strings.Contains(narrow, "next_page_token") {
		t.Errorf("the narrow table shows long text or the page token:\n%s", narrow)
	}
	// Why each is dead is in the default table (issue #56 finding 2), cut to the width left.
	if !regexp.MustCompile(`(?m)^MSG_ID .* LAST_ERROR$`).MatchString(narrow) ||
		!regexp.MustCompile(`(?m)^1234567\s.*\s+redis: connection refused; .*…$`).MatchString(narrow) {
		t.Errorf("the narrow table lacks the reason column:\n%s", narrow)
	}
	// A column has one name in both tables: wide starts with the narrow table's columns.
	narrowHeader := strings.Fields(header.FindString(narrow))
	if wideHeader := strings.Fields(header.FindString(renderString(t, "wide", full, "", false))); len(wideHeader) < len(narrowHeader) ||
		!slices.Equal(wideHeader[:len(narrowHeader)], narrowHeader) || slices.Contains(wideHeader, "ATTEMPTS") || slices.Contains(wideHeader, "ERROR_CLASS") {
		t.Errorf("wide's columns %v do not start with the table's %v, or name one of them twice", wideHeader, narrowHeader)
	}
	dead := &controlv1.RequeueEventsResponse{DryRun: true, Events: []*controlv1.DeadEvent{{EventId: 77, Target: "KAFKA:msg", Flid: "2718281",
		EventType: "FLOP", StateVersion: 3, MsgId: 1234567, Attempts: 10, LastError: "kafka: MESSAGE_TOO_LARGE\nbroker said no"}}}
	if out := renderString(t, "table", dead, "", false); !regexp.MustCompile(`(?m)^EVENT_ID .* LAST_ERROR$`).MatchString(out) ||
		!strings.Contains(out, "kafka: MESSAGE_TOO_LARGE broker said no") {
		t.Errorf("requeue-events --dry-run's table lacks the reason:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^1234567\s+DEAD\s+EXHAUSTED\s+5\s+FLOP/ESTT\s+2718281\s+2026-03-01T12:00:00Z`).MatchString(narrow) {
		t.Errorf("row not as expected:\n%s", narrow)
	}
	if !regexp.MustCompile(`(?m)^7\s+PENDING\s+-\s+0\s+-\s+-\s+-\s+-\s+-\s*$`).MatchString(renderString(t, "table", sparse, "", false)) {
		t.Errorf("unset cells are not '-':\n%s", renderString(t, "table", sparse, "", false))
	}
	wide := renderString(t, "wide", full, "", false)
	for _, want := range []string{"LAST_ERROR", "TRACE_PARENT", "redis: connection refused", "2026-03-01T12:00:00.123456789Z"} {
		if !strings.Contains(wide, want) {
			t.Errorf("wide lacks %q:\n%s", want, wide)
		}
	}

	reqs := &controlv1.ListRequestsResponse{Requests: []*controlv1.UpstreamRequest{{ReqId: 3, Type: controlv1.RequestType_REQUEST_TYPE_RQFD,
		Scope: "2026-03-01..2026-03-02", State: controlv1.RequestState_REQUEST_STATE_SENT, Seqn: "000042",
		Payload: "<MSG>\n  <META>…</META>\n</MSG>"}}}
	if out := renderString(t, "table", reqs, "", false); strings.Contains(out, "<MSG>") || !strings.Contains(out, "000042") {
		t.Errorf("list-requests shows the payload in the narrow table:\n%s", out)
	}
	if out := renderString(t, "wide", reqs, "", false); !strings.Contains(out, `<MSG>\n  <META>`) {
		t.Errorf("list-requests -o wide lacks the payload:\n%s", out)
	}
	// A registered request's XML is long text: a get shows it, a mutation's answer only wide.
	reg := &controlv1.RequestScheduleResponse{Request: reqs.GetRequests()[0]}
	if out := renderString(t, "table", reg, "", false); strings.Contains(out, "<MSG>") || !strings.Contains(out, "(request.payload: -o wide shows it)") {
		t.Errorf("request-schedule's answer:\n%s", out)
	}
}

func TestHumaneNumbersInTablesExactInJSON(t *testing.T) {
	t.Parallel()
	st := &controlv1.GetStatusResponse{
		Discovery: &controlv1.Discovery{Watermark: 1234567, Lag: proto.Int64(98765), HoleAge: durationpb.New(65*time.Second + 123456789)},
		Backlog:   &controlv1.Backlog{Unfinished: 1234, FinishedPerSecond: 1.0 / 3, EstimatedDrain: durationpb.New(3*time.Hour + 5*time.Minute + 7*time.Second + 5)},
	}
	out := squeeze(renderString(t, "table", st, "", true))
	for _, want := range []string{"discovery.watermark 1234567\n", "discovery.lag 98,765\n", "discovery.hole_age 1m5s\n",
		"backlog.unfinished 1,234\n", "backlog.finished_per_second 0.33\n", "backlog.estimated_drain 3h5m7s\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, format := range []string{"json", "yaml"} {
		exact := renderString(t, format, st, "", true)
		for _, want := range []string{"1234567", "98765", "65.123456789s", "0.3333333333333333", "11107.000000005s"} {
			if !strings.Contains(exact, want) {
				t.Errorf("%s lacks the exact %q:\n%s", format, want, exact)
			}
		}
	}
	if got := grouped(-1234567); got != "-1,234,567" {
		t.Errorf("grouped(-1234567) = %s", got)
	}
}

func TestYAMLAndNames(t *testing.T) {
	t.Parallel()
	replay := &controlv1.ReplayResponse{DryRun: true, Replayed: 2, ReplayedIds: []int64{11, 13}}
	if y := renderString(t, "yaml", replay, "", true); !strings.Contains(y, "dryRun: true\n") || !strings.Contains(y, "replayedIds:\n- 11\n- 13\n") ||
		!strings.Contains(y, "notReplayableIds: []\n") {
		t.Errorf("yaml:\n%s", y)
	}
	for _, tc := range []struct {
		m    proto.Message
		path string
		want string
	}{
		{replay, commandDocs["Replay"].Name, "11\n13\n"},
		{&controlv1.ListMessagesResponse{Messages: []*controlv1.Message{{MsgId: 5}, {MsgId: 6}}}, "", "5\n6\n"},
		{&controlv1.ListReferenceResponse{References: []*controlv1.Reference{{Rtype: "GLST", Rkey: "G3"}}}, "", "GLST/G3\n"},
		{&controlv1.RebuildProjectionResponse{Rebuild: &controlv1.ProjectionRebuild{RebuildId: 9}}, commandDocs["RebuildProjection"].Name, "9\n"},
		{&controlv1.GetProjectionRebuildResponse{Rebuild: &controlv1.ProjectionRebuild{RebuildId: 9}}, "", "9\n"},
		{&controlv1.RequeueEventsResponse{Events: []*controlv1.DeadEvent{{EventId: 77}}}, commandDocs["RequeueEvents"].Name, "77\n"},
		{&controlv1.RequestScheduleResponse{DryRun: true}, commandDocs["RequestSchedule"].Name, ""},
	} {
		if got := renderString(t, "name", tc.m, tc.path, true); got != tc.want {
			t.Errorf("-o name of %T = %q, want %q", tc.m, got, tc.want)
		}
	}
}

func TestGetMessageSaysWhichAttemptsItCounts(t *testing.T) {
	t.Parallel()
	r := &controlv1.GetMessageResponse{Message: &controlv1.Message{MsgId: 4, State: controlv1.MessageState_MESSAGE_STATE_SUCCEEDED},
		Attempts: []*controlv1.Attempt{{Number: 1, Outcome: controlv1.MessageState_MESSAGE_STATE_SUCCEEDED, Duration: durationpb.New(time.Second)}}}
	out := renderString(t, "table", r, "", true)
	if !strings.Contains(out, "attempts (1 kept; 0 failed since the last replay):") || !regexp.MustCompile(`message.failed_attempts_since_replay\s+0\n`).MatchString(out) ||
		regexp.MustCompile(`message.attempts\s`).MatchString(out) {
		t.Errorf("attempts are ambiguous:\n%s", out)
	}
}

// TestRoleStatesInWords: get-status's roles table says each role's state in words, as --watch
// does, not "HELD true ACTIVE false" for a dead holder (issue #56); -o wide keeps the fields.
func TestRoleStatesInWords(t *testing.T) {
	t.Parallel()
	since := timestamppb.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	st := &controlv1.GetStatusResponse{Roles: []*controlv1.RoleStatus{
		{Role: "pump", Held: true, Active: false, Instance: "pump-7f9c", Since: since},
		{Role: "dispatcher", Held: true, Active: true, Instance: "disp-1", Since: since},
		{Role: "backfill"},
	}}
	out := renderString(t, "table", st, "", false)
	for _, want := range []string{
		`(?m)^ROLE\s+STATE\s+INSTANCE\s+SINCE\s+BLOCKED_ON$`,
		`(?m)^pump\s+INACTIVE \(holder gone, no standby has taken over\)\s+pump-7f9c\s`,
		`(?m)^dispatcher\s+active\s+disp-1\s`,
		`(?m)^backfill\s+not held\s+-\s`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the roles table does not match %s:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`(?m)^(pump|dispatcher|backfill)\s.*\b(true|false)\b`).MatchString(out) {
		t.Errorf("the roles table shows booleans:\n%s", out)
	}
	if wide := renderString(t, "wide", st, "", false); !regexp.MustCompile(`(?m)^ROLE\s+STATE\s.*\bHELD\b.*\bACTIVE\b`).MatchString(wide) {
		t.Errorf("-o wide lacks the held and active fields:\n%s", wide)
	}
	// The same words as --watch.
	full := statusOf(1000, 0)
	full.Roles = st.Roles
	screen := renderScreen(full, nil, &watchState{}, 2*time.Second, time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC))
	for _, w := range []string{"pump        pump-7f9c  INACTIVE (holder gone, no standby has taken over)", "backfill    -  not held"} {
		if !strings.Contains(screen, w) {
			t.Errorf("--watch does not say %q:\n%s", w, screen)
		}
	}
}
