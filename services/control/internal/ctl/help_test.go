package ctl

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func mustNew(t *testing.T, md protoreflect.MessageDescriptor) proto.Message {
	t.Helper()
	m, err := newMessage(md)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEveryCommandIsDocumented fails for an RPC added to control.proto until its entry in
// commandDocs gives it a short line, examples and the help of every flag.
func TestEveryCommandIsDocumented(t *testing.T) {
	t.Parallel()
	methods := Service().Methods()
	for i := range methods.Len() {
		md := methods.Get(i)
		doc, ok := docOf(md)
		if !ok {
			t.Errorf("RPC %s has no entry in commandDocs (help.go): add its Short, Example and flag help", md.Name())
			continue
		}
		if doc.Short == "" || strings.Contains(doc.Short, string(md.Name())) {
			t.Errorf("%s: Short %q must say in words what the command does", md.Name(), doc.Short)
		}
		if !strings.Contains(doc.Example, "msgxctl "+CommandName(md)) && !strings.Contains(doc.Example, "msgxctl flight-history") {
			t.Errorf("%s: no example runs msgxctl %s", md.Name(), CommandName(md))
		}
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		rf := newRequestFlags(doc, md.Input(), fs, Command(io.Discard).PersistentFlags())
		for _, l := range rf.leaves {
			if _, ok := flagDoc(doc, l.field); !ok {
				t.Errorf("%s: field %s (--%s) has no help in commandDocs or sharedFlagDocs", md.Name(), l.field, l.name)
			}
		}
		for _, a := range doc.Args {
			if rf.byField[a] == nil {
				t.Errorf("%s: argument %s is not a field of %s", md.Name(), a, md.Input().FullName())
			}
		}
		if doc.Name != "" {
			if _, err := namesOf(mustNew(t, md.Output()).ProtoReflect(), doc.Name); err != nil {
				t.Errorf("%s: -o name path %s: %v", md.Name(), doc.Name, err)
			}
		}
	}
}

// TestExamplesParse runs every example against a port where nothing listens: an example that
// does not parse or validate exits 2 before dialling; one that does fails to connect (24).
func TestExamplesParse(t *testing.T) {
	t.Setenv(EnvToken, "")
	t.Setenv(EnvTokenFile, "")
	root := Command(io.Discard)
	var examples []string
	examples = append(examples, root.Example)
	for _, c := range root.Commands() {
		examples = append(examples, c.Example)
	}
	n := 0
	for _, ex := range examples {
		for _, line := range strings.Split(ex, "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "msgxctl ") {
				continue
			}
			n++
			args := append(shellWords(t, strings.TrimPrefix(line, "msgxctl ")), "--addr", "127.0.0.1:1", "--timeout", "2s")
			var stderr bytes.Buffer
			code := Main(context.Background(), args, io.Discard, &stderr)
			want := ExitCode(codes.Unavailable)
			if args[0] == "version" {
				want = ExitOK
			}
			if code != want {
				t.Errorf("example %q: exit %d, want %d: %s", line, code, want, stderr.String())
			}
		}
	}
	if n < 40 {
		t.Errorf("only %d examples found", n)
	}
}

// shellWords splits a command line as a shell does for the quoting the examples use.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	quoted, in := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in %q", s)
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func TestCompletion(t *testing.T) {
	t.Setenv(EnvToken, "")
	t.Setenv(EnvTokenFile, "")
	tests := []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"list-messages", "--state", ""}, []string{"pending\n", "dead\n", ":6\n"}, []string{"unspecified"}},
		{[]string{"list-messages", "--state", "dead,"}, []string{"dead,failed\n"}, nil},
		{[]string{"replay", "--error-class", ""}, []string{"codec-error\n", "exhausted\n", ":4\n"}, nil},
		{[]string{"reopen", "--reason", ""}, []string{"missing-row\n", "transient-deadline\n"}, nil},
		{[]string{"get-status", "-o", ""}, []string{"table\n", "wide\n", "yaml\n", "name\n", "json\n"}, nil},
		{[]string{"requeue-events", "--target", ""}, []string{"KAFKA:msg\n", "KAFKA:schd\n"}, nil},
		{[]string{"get-reference", ""}, []string{"GLST\n", "AIRL\n"}, []string{"RSTA"}},
		{[]string{"request-reference", ""}, []string{"RSTA\n"}, nil},
		{[]string{"get-resource-status", ""}, []string{"GATE\n", "STND\n"}, nil},
		{[]string{"get-resource-status", "--resource-type", ""}, []string{"BELT\n"}, nil},
		{[]string{"resolve-contract-violation", "--resolution", ""}, []string{"resume\n", "skip-marked\n"}, nil},
		{[]string{"resolve-contract-violation", "--kind", ""}, []string{"inbox-behind-watermark\n"}, nil},
		{[]string{"seed-cutover", "--mode", ""}, []string{"min\n", "max\n", "zero\n", "id\n"}, nil},
		{[]string{"list-requests", "--state", ""}, []string{"sent\n", "expired\n"}, nil},
		// Rebuild IDs come from the server; none answers here, so none are offered.
		{[]string{"get-projection-rebuild", "--addr", "127.0.0.1:1", ""}, []string{":4\n"}, []string{"\n1\n"}},
	}
	for _, tc := range tests {
		var out, errOut bytes.Buffer
		if code := Main(context.Background(), append([]string{"__complete"}, tc.args...), &out, &errOut); code != 0 {
			t.Errorf("__complete %q: exit %d: %s", tc.args, code, errOut.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("__complete %q lacks %q:\n%s", tc.args, w, out.String())
			}
		}
		for _, w := range tc.not {
			if strings.Contains(out.String(), w) {
				t.Errorf("__complete %q offers %q:\n%s", tc.args, w, out.String())
			}
		}
	}
}

// TestUsageErrors checks that a mistake is named by its flag or argument and says what is
// expected, without the parser's internals, before anything is dialled.
func TestUsageErrors(t *testing.T) {
	t.Setenv(EnvToken, "")
	t.Setenv(EnvTokenFile, "")
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"replay"}, []string{"set at least one of --msg-id, --error-class and --range.first/--range.last"}},
		{[]string{"get-message", "abc"}, []string{`argument MSG_ID: "abc" is not valid: expected a whole number such as 123`}},
		{[]string{"get-message", "--msg-id", "abc"}, []string{`--msg-id: "abc" is not valid: expected a whole number`}},
		{[]string{"get-message", "1", "2"}, []string{"get-message takes at most 1 argument(s) ([MSG_ID]), got 2"}},
		{[]string{"get-message", "--msg-id", "1", "1"}, []string{"give the MSG_ID as an argument or as --msg-id, not both"}},
		{[]string{"get-status", "extra"}, []string{"get-status takes no arguments"}},
		{[]string{"list-messages", "--enqueued-from", "yesterday"}, []string{"--enqueued-from", "expected a time such as 2026-03-01T06:00:00Z"}},
		{[]string{"list-messages", "--state", "broken"}, []string{`--state: "broken" is not one of pending, failed, succeeded, skipped, dead`}},
		{[]string{"list-messages", "--flight-number", "CA1501"}, []string{"--flight-number and --operation-day go together"}},
		{[]string{"seed-cutover"}, []string{"--mode is required: min, zero, max or id"}},
		{[]string{"get-status", "--timeout", "abc"}, []string{`--timeout: "abc" is not valid: expected a duration such as 30s`}},
		{[]string{"get-status", "-o", "xml"}, []string{`-o "xml": expected one of table, wide, json, yaml, name`}},
		{[]string{"get-status", "--addr", "127.0.0.1"}, []string{`--addr "127.0.0.1": expected host:port, e.g. localhost:9000`}},
		{[]string{"get-status", "--addr", "control.invalid:9000"}, []string{"no token: set MSGXCTL_TOKEN_FILE (a file holding it) or MSGXCTL_TOKEN"}},
		{[]string{"list-messages", "--all", "--page-token", "abc"}, []string{"--all starts at the first page: leave out --page-token"}},
		{[]string{"get-reference", "GLST", "--rtype", "AIRL"}, []string{"give the CATEGORY as an argument or as --category"}},
		// FLIDs are checked before dialling as the server checks them, naming the flag (and index).
		{[]string{"requeue-events", "--target", "KAFKA:msg", "--flid", strings.Repeat("9", 201)}, []string{"--flid must be 1 to 200 bytes, got 201"}},
		{[]string{"republish", "2718281", strings.Repeat("9", 201)}, []string{"--flid[1] must be 1 to 200 bytes, got 201"}},
		{[]string{"rebuild-projection", "--flid", "1," + strings.Repeat("9", 201)}, []string{"--flid[1] must be 1 to 200 bytes, got 201"}},
	}
	for _, tc := range tests {
		var errOut bytes.Buffer
		code := Main(context.Background(), tc.args, io.Discard, &errOut)
		if code != ExitUsage {
			t.Errorf("%q: exit %d, want %d: %s", tc.args, code, ExitUsage, errOut.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, w, errOut.String())
			}
		}
		for _, leak := range []string{"strconv.", "2006-01-02T15:04:05", "time: invalid", "msg_ids", "flight_number"} {
			if strings.Contains(errOut.String(), leak) {
				t.Errorf("%q: stderr shows %q:\n%s", tc.args, leak, errOut.String())
			}
		}
	}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, &out, io.Discard); code != 0 || !strings.HasPrefix(out.String(), "msgxctl version ") {
		t.Errorf("exit %d: %q", code, out.String())
	}
}

func TestPagerFromTheDescriptor(t *testing.T) {
	t.Parallel()
	methods := Service().Methods()
	for rpc, want := range map[string]string{
		"ListMessages": "page_token", "ListRequests": "page_token", "ListReference": "page_token",
		"ListProjectionRebuilds": "page_token", "GetFlightHistory": "after_msg_id", "GetStatus": "", "Replay": "",
	} {
		p := pagerOf(methods.ByName(protoreflect.Name(rpc)))
		got := ""
		if p != nil {
			got = p.request
		}
		if got != want {
			t.Errorf("%s pages by %q, want %q", rpc, got, want)
		}
	}
}

// TestServerRefusalsInOperatorTerms checks what msgxctl adds to a server's refusal: what to set
// for a missing or refused token, the operator token for a reader, the address it could not
// reach, and flags for the fields a message names.
func TestServerRefusalsInOperatorTerms(t *testing.T) {
	t.Parallel()
	replay := Service().Methods().ByName("Replay")
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	rf := newRequestFlags(commandDocs["Replay"], replay.Input(), fs, Command(io.Discard).PersistentFlags())
	tests := []struct {
		c    client
		code codes.Code
		msg  string
		want string
	}{
		{client{}, codes.Unauthenticated, "Request unauthenticated with bearer",
			"this control needs a token and none was given: set MSGXCTL_TOKEN_FILE (a file holding it) or MSGXCTL_TOKEN, or give --token-file"},
		{client{token: "x", source: "the token file /run/t"}, codes.Unauthenticated, "invalid bearer token",
			"the token from the token file /run/t was refused (invalid bearer token)"},
		{client{token: "x"}, codes.PermissionDenied, "Replay needs the operator role", "Replay needs the operator role (this command needs the operator token)"},
		{client{addr: "10.0.0.9:9000"}, codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 10.0.0.9:9000: connect: connection refused"`,
			"cannot reach the control API at 10.0.0.9:9000: dial tcp 10.0.0.9:9000: connect: connection refused"},
		{client{timeout: 5 * time.Second}, codes.DeadlineExceeded, "context deadline exceeded", "no answer within --timeout 5s"},
		{client{words: rf.inFlagWords}, codes.InvalidArgument, "error_class ERROR_CLASS_MALFORMED is never replayed; msg_ids has 3 IDs",
			"--error-class malformed is never replayed; --msg-id has 3 IDs"},
		{client{words: rf.inFlagWords}, codes.FailedPrecondition, "range must have 0 < first <= last",
			"--range.first/--range.last must have 0 < first <= last"},
	}
	for _, tc := range tests {
		got := tc.c.explain(status.New(tc.code, tc.msg))
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s %q: got %q, want %q", tc.code, tc.msg, got, tc.want)
		}
	}
}
