package ctl

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// build parses args as the flags of the command of an RPC and returns the request they make.
func build(t *testing.T, command string, args ...string) (proto.Message, error) {
	t.Helper()
	var md protoreflect.MethodDescriptor
	methods := Service().Methods()
	for i := range methods.Len() {
		if CommandName(methods.Get(i)) == command {
			md = methods.Get(i)
		}
	}
	if md == nil {
		t.Fatalf("no RPC for command %s", command)
	}
	fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rf := newRequestFlags(commandDocs[md.Name()], md.Input(), fs, Command(io.Discard).PersistentFlags())
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	req, err := newMessage(md.Input())
	if err != nil {
		t.Fatal(err)
	}
	return req, rf.apply(req)
}

func TestFlagsBuildTheRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method string
		args   []string
		want   proto.Message
		err    string
	}{
		{method: "replay", args: []string{"--msg-id", "1,2", "--msg-ids=3", "--dry-run"},
			want: &controlv1.ReplayRequest{MsgIds: []int64{1, 2, 3}, DryRun: true}},
		{method: "rebuild-projection", args: []string{"--flid", "F1,F2", "--flid", "F3", "--dry-run"},
			want: &controlv1.RebuildProjectionRequest{Flid: []string{"F1", "F2", "F3"}, DryRun: true}},
		{method: "replay", args: []string{"--error-class", "exhausted", "--comment", "INC 7"},
			want: &controlv1.ReplayRequest{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED, Comment: "INC 7"}},
		{method: "replay", args: []string{"--error-class", "ERROR_CLASS_CODEC_ERROR", "--range.first", "5", "--range.last", "9"},
			want: &controlv1.ReplayRequest{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR, Range: &controlv1.IdRange{First: 5, Last: 9}}},
		{method: "replay", args: []string{"--error-class", "codec-error", "--dry-run=false"},
			want: &controlv1.ReplayRequest{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR}},
		{method: "list-messages", args: []string{"--states", "dead,failed", "--abandoned", "--page-size", "5"},
			want: &controlv1.ListMessagesRequest{States: []controlv1.MessageState{controlv1.MessageState_MESSAGE_STATE_DEAD,
				controlv1.MessageState_MESSAGE_STATE_FAILED}, Abandoned: true, PageSize: 5}},
		{method: "seed-cutover", args: []string{"--mode", "id", "--watermark", "41"},
			want: &controlv1.SeedCutoverRequest{Mode: controlv1.SeedMode_SEED_MODE_ID, Watermark: 41}},
		{method: "get-status", want: &controlv1.GetStatusRequest{}},
		{method: "replay", args: []string{"--error-class", "sometimes"}, err: `"sometimes" is not one of malformed, protocol`},
		{method: "get-message", args: []string{"--msg-id", "12x"}, err: `"12x" is not valid: expected a whole number such as 123`},
		{method: "list-messages", args: []string{"--page-size", "9999999999"}, err: `"9999999999" is out of range: expected a number up to 2147483647`},
		{method: "replay", args: []string{"--msg-ids", "1,x"}, err: `"x" is not valid: expected a whole number`},
		{method: "list-messages", args: []string{"--enqueued-from", "yesterday"}, err: "expected a time such as 2026-03-01T06:00:00Z"},
		// One spelling per flag; the proto spelling stays accepted.
		{method: "list-messages", args: []string{"--state", "dead", "--states", "failed", "--error-class", "infra"},
			want: &controlv1.ListMessagesRequest{States: []controlv1.MessageState{controlv1.MessageState_MESSAGE_STATE_DEAD,
				controlv1.MessageState_MESSAGE_STATE_FAILED}, ErrorClasses: []controlv1.ErrorClass{controlv1.ErrorClass_ERROR_CLASS_INFRA}}},
		{method: "get-resource-status", args: []string{"--resource-type", "GATE", "--rsid", "G1"},
			want: &controlv1.GetResourceStatusRequest{Rtyp: "GATE", Rsid: "G1"}},
		{method: "get-reference", args: []string{"--rtype", "GLST", "--record-key", "G3"},
			want: &controlv1.GetReferenceRequest{Rtype: "GLST", Rkey: "G3"}},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			got, err := build(t, tc.method, tc.args...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCommandNames(t *testing.T) {
	t.Parallel()
	root := Command(io.Discard)
	methods := Service().Methods()
	for i := range methods.Len() {
		md := methods.Get(i)
		cmd, _, err := root.Find([]string{CommandName(md)})
		if err != nil || cmd == root {
			t.Errorf("RPC %s has no command %s", md.Name(), CommandName(md))
		}
	}
	for in, want := range map[string]string{"GetStatus": "get-status", "SeedCutover": "seed-cutover", "Replay": "replay"} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestExitCodesAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[int]string{ExitOK: "ok", ExitLocal: "local", ExitUsage: "usage"}
	for c := codes.OK + 1; c <= codes.Unauthenticated; c++ {
		code := ExitCode(c)
		if prev, dup := seen[code]; dup || code > 125 {
			t.Errorf("exit code %d of %s clashes with %s or is out of range", code, c, prev)
		}
		seen[code] = c.String()
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	resp := &controlv1.GetStatusResponse{
		ObservedAt: timestamppb.New(at),
		ServedBy:   "control-a",
		ByState: []*controlv1.StateCount{
			{State: controlv1.MessageState_MESSAGE_STATE_PENDING, Count: 0},
			{State: controlv1.MessageState_MESSAGE_STATE_DEAD, Count: 3},
		},
		Backlog: &controlv1.Backlog{Unfinished: 2, EstimatedDrain: durationpb.New(90 * time.Second)},
		Outbox:  []*controlv1.OutboxTarget{{Target: "KAFKA:msg", Pending: 1}},
	}
	var out bytes.Buffer
	if err := render(&out, "table", false, resp); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"observed_at 2026-03-01T12:00:00Z",
		"backlog.estimated_drain 1m30s",
		"discovery -",
		"by_state (2):",
		"STATE COUNT",
		"PENDING 0", // a zero count is a number, not a missing value
		"DEAD 3",
		"TARGET PENDING DEAD",
	} {
		if !strings.Contains(squeeze(out.String()), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	msg := &controlv1.GetMessageResponse{RawXml: "<MSG>\n</MSG>", RawStatus: controlv1.RawStatus_RAW_STATUS_OK}
	out.Reset()
	if err := render(&out, "table", false, msg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\nraw_xml:\n<MSG>\n</MSG>\n") || !strings.Contains(squeeze(out.String()), "message -") {
		t.Errorf("multi-line text is not a block:\n%s", out.String())
	}
	if strings.Contains(out.String(), "raw_xml is truncated") {
		t.Errorf("a whole text is called truncated:\n%s", out.String())
	}
	msg = &controlv1.GetMessageResponse{Message: &controlv1.Message{MsgId: 42}, RawXml: "<MSG>北京", RawStatus: controlv1.RawStatus_RAW_STATUS_OK,
		BodyTruncated: true, BodyChars: 1 << 24}
	out.Reset()
	if err := render(&out, "table", false, msg); err != nil {
		t.Fatal(err)
	}
	if want := "raw_xml is truncated: 7 of 16777216 characters shown; read the rest with: msgxctl get-message-body 42 --offset 7"; !strings.Contains(out.String(), want) {
		t.Errorf("a truncated text does not say so with the command for the rest (%q):\n%s", want, out.String())
	}
}

// squeeze collapses the table padding, so expectations do not depend on column widths.
func squeeze(s string) string { return regexp.MustCompile(` {2,}`).ReplaceAllString(s, " ") }

func TestJSONIsStable(t *testing.T) {
	t.Parallel()
	resp := &controlv1.ReplayResponse{DryRun: true, Replayed: 2, ReplayedIds: []int64{1, 3}}
	var first bytes.Buffer
	if err := render(&first, "json", false, resp); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		var again bytes.Buffer
		if err := render(&again, "json", false, resp); err != nil {
			t.Fatal(err)
		}
		if again.String() != first.String() {
			t.Fatalf("JSON output varies:\n%s\n%s", first.String(), again.String())
		}
	}
	for _, want := range []string{`"replayedIds": [`, `"notReplayableIds": []`, `"more": false`, `"replayed": 2,`} {
		if !strings.Contains(first.String(), want) {
			t.Errorf("JSON lacks %s (every field, zeros included, with grpcurl's names, int64 as numbers):\n%s", want, first.String())
		}
	}
}

// TestJSONNumbers (issue #56 finding 3): every 64-bit integer is a JSON number, in nested
// messages and lists too; the rest is protojson's (names, enums, timestamps), in the
// .proto's field order.
func TestJSONNumbers(t *testing.T) {
	t.Parallel()
	st := &controlv1.GetStatusResponse{ServedBy: "c-1", Backlog: &controlv1.Backlog{Unfinished: 0, FinishedLast_5M: 12},
		Roles: []*controlv1.RoleStatus{{Role: "pump", Blocked: &controlv1.Blocked{MsgId: 9007199254740991}}}}
	var b bytes.Buffer
	if err := render(&b, "json", false, st); err != nil {
		t.Fatal(err)
	}
	var got struct {
		ServedBy string `json:"servedBy"`
		Backlog  struct {
			Unfinished *float64 `json:"unfinished"`
			Finished   float64  `json:"finishedLast5m"`
		} `json:"backlog"`
		Roles []struct {
			Blocked struct {
				MsgID json.Number `json:"msgId"`
			} `json:"blocked"`
		} `json:"roles"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if got.ServedBy != "c-1" || got.Backlog.Unfinished == nil || *got.Backlog.Unfinished != 0 || got.Backlog.Finished != 12 ||
		len(got.Roles) != 1 || got.Roles[0].Blocked.MsgID != "9007199254740991" {
		t.Errorf("JSON:\n%s", b.String())
	}
	if i, j := strings.Index(b.String(), `"observedAt"`), strings.Index(b.String(), `"servedBy"`); i < 0 || j < 0 {
		t.Errorf("JSON lacks observedAt or servedBy:\n%s", b.String())
	}
	line, err := jsonLine(st)
	if err != nil || bytes.Count(line, []byte("\n")) != 1 || !json.Valid(line) {
		t.Errorf("jsonLine = %q, %v; want one JSON document on one line", line, err)
	}
}

// TestNoHeaders: --no-headers prints a list's rows only.
func TestNoHeaders(t *testing.T) {
	t.Parallel()
	resp := &controlv1.ListMessagesResponse{Messages: []*controlv1.Message{{MsgId: 5, State: controlv1.MessageState_MESSAGE_STATE_DEAD}, {MsgId: 6}}}
	for _, format := range []string{"table", "wide"} {
		var b bytes.Buffer
		if err := render(&b, format, true, resp); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "5 ") || !strings.HasPrefix(lines[1], "6 ") {
			t.Errorf("-o %s --no-headers:\n%s", format, b.String())
		}
	}
}
