package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/services/control/internal/ctl"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// msgxctl runs the built CLI and returns its stdout, stderr and exit code.
func msgxctl(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out strings.Builder
	stderr, code = msgxctlTo(t, env, &out, args...)
	return out.String(), stderr, code
}

// msgxctlTo is msgxctl writing its standard output to stdout as it goes, for a test that acts
// on what the command printed so far.
func msgxctlTo(t *testing.T, env []string, stdout io.Writer, args ...string) (stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin(t, "msgxctl"), args...)
	// Only what the test gives: a token in the developer's environment must not leak in.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var errOut strings.Builder
	cmd.Stdout, cmd.Stderr = stdout, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("msgxctl %v: %v", args, err)
	}
	return errOut.String(), code
}

func TestMsgxctl(t *testing.T) {
	t.Parallel()
	db, my := pgtest.New(t), mysqltest.New(t)
	my.InsertInbox(t, "<MSG/>", nil)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	procRow(t, db, 1, "DEAD", "EXHAUSTED", now)
	procRow(t, db, 2, "DEAD", "MALFORMED", now)
	deadF7 := eventRow(t, db, "KAFKA:msg", "F7", 3, 1, "DEAD", now)
	deadF8 := eventRow(t, db, "KAFKA:msg", "F8", 1, 1, "DEAD", now)
	in := startWith(t, db, "control-cli", now, func(cfg *config.Config) { cfg.MySQL.DSN = my.ServiceDSN }, nil)
	waitActive(t, in)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvTokenFile + "=" + tokenFile}

	t.Run("every RPC has a command", func(t *testing.T) {
		methods := ctl.Service().Methods()
		for i := range methods.Len() {
			name := ctl.CommandName(methods.Get(i))
			if out, errOut, code := msgxctl(t, env, name, "--help"); code != 0 || !strings.Contains(out, string(methods.Get(i).Name())) {
				t.Errorf("msgxctl %s --help: exit %d\n%s%s", name, code, out, errOut)
			}
		}
	})
	t.Run("get-status as JSON", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "get-status", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		// grpcurl's names, 64-bit integers as numbers (issue #56 finding 3): a string in an
		// int64 field fails the decoding.
		var st struct {
			ServedBy  string `json:"servedBy"`
			Discovery struct {
				InboxMaxID int64 `json:"inboxMaxId"`
			} `json:"discovery"`
			ByState []struct {
				State string `json:"state"`
				Count int64  `json:"count"`
			} `json:"byState"`
			Backlog struct {
				Unfinished *int64 `json:"unfinished"`
			} `json:"backlog"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		if st.ServedBy != "control-cli" || st.Discovery.InboxMaxID == 0 || len(st.ByState) != 5 || st.Backlog.Unfinished == nil {
			t.Errorf("status = %+v", st)
		}
	})
	t.Run("get-status --watch -o json: one JSON document a line", func(t *testing.T) {
		cmd := exec.CommandContext(t.Context(), bin(t, "msgxctl"), "get-status", "--watch", "--interval", "1s", "-o", "json")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
		lines := bufio.NewScanner(pipe)
		lines.Buffer(nil, 1<<20)
		for i := range 2 {
			if !lines.Scan() {
				t.Fatalf("the watch ended after %d lines: %v", i, lines.Err())
			}
			var st struct {
				ServedBy string `json:"servedBy"`
				Backlog  struct {
					Unfinished *int64 `json:"unfinished"`
				} `json:"backlog"`
			}
			if err := json.Unmarshal(lines.Bytes(), &st); err != nil || st.ServedBy != "control-cli" || st.Backlog.Unfinished == nil {
				t.Fatalf("line %d is not one status document (%v):\n%s", i+1, err, lines.Text())
			}
		}
	})
	t.Run("--no-headers prints the rows only", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "list-messages", "--state", "dead", "--no-headers")
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "1 ") || !strings.HasPrefix(lines[1], "2 ") {
			t.Errorf("exit %d: %s\n%s", code, errOut, out)
		}
	})
	// Issue #56 finding 2: why a message or an event is dead is in the default table, and
	// -o wide names the table's columns as the table does.
	t.Run("the reason column of dead things", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "list-messages", "--state", "dead")
		if code != 0 || !regexp.MustCompile(`(?m)^MSG_ID .*\bLAST_ERROR$`).MatchString(out) || !regexp.MustCompile(`(?m)^2\s+DEAD\s+MALFORMED\s.*\sMALFORMED$`).MatchString(out) {
			t.Errorf("list-messages --state dead: exit %d: %s\n%s", code, errOut, out)
		}
		wide, _, _ := msgxctl(t, env, "list-messages", "--state", "dead", "-o", "wide")
		head := func(s string) []string { return strings.Fields(regexp.MustCompile(`(?m)^MSG_ID.*$`).FindString(s)) }
		if h, w := head(out), head(wide); len(w) < len(h) || strings.Join(w[:len(h)], " ") != strings.Join(h, " ") {
			t.Errorf("-o wide's columns %v do not start with the table's %v", w, h)
		}
		out, errOut, code = msgxctl(t, env, "requeue-events", "--target", "KAFKA:msg", "--dry-run")
		if code != 0 || !regexp.MustCompile(`(?m)^EVENT_ID .*\bLAST_ERROR$`).MatchString(out) || !strings.Contains(out, "kafka: broker not available") {
			t.Errorf("requeue-events --dry-run: exit %d: %s\n%s", code, errOut, out)
		}
	})
	t.Run("get-status as a table", func(t *testing.T) {
		out, _, code := msgxctl(t, env, "get-status")
		t.Logf("msgxctl get-status:\n%s", out)
		if code != 0 || !strings.Contains(out, "discovery.watermark") || !strings.Contains(out, "by_state (5):") ||
			!strings.Contains(out, "EXHAUSTED") {
			t.Errorf("exit %d, table:\n%s", code, out)
		}
	})
	t.Run("list-messages with enum and repeated flags", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "list-messages", "--states", "dead", "--error-classes=malformed,exhausted",
			"--range.first", "1", "--range.last", "2")
		if code != 0 || !strings.Contains(out, "MSG_ID") || !strings.Contains(out, "MALFORMED") {
			t.Errorf("exit %d: %s\n%s", code, errOut, out)
		}
	})
	t.Run("list-messages: a narrow table with stable columns, wide, every page, names, yaml", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "list-messages")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		t.Logf("msgxctl list-messages:\n%s", out)
		header := regexp.MustCompile(`(?m)^MSG_ID .*$`).FindString(out)
		for _, col := range []string{"MSG_ID", "STATE", "CLASS", "RETRIES", "TYPE", "FLID", "ENQUEUED", "ACKED_BY", "LAST_ERROR"} {
			if !strings.Contains(header, col) {
				t.Errorf("narrow header %q lacks %s", header, col)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); n > 120 {
				t.Errorf("a line of %d characters:\n%s", n, line)
			}
		}
		// The same columns for a page where no message has a FLID or an error.
		one, _, _ := msgxctl(t, env, "list-messages", "--range.first", "2", "--range.last", "2")
		if got := regexp.MustCompile(`(?m)^MSG_ID .*$`).FindString(one); strings.Fields(got) == nil || strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(header), " ") {
			t.Errorf("columns change between calls: %q vs %q", got, header)
		}
		wide, _, code := msgxctl(t, env, "list-messages", "-o", "wide")
		if code != 0 || !strings.Contains(wide, "LAST_ERROR") || !strings.Contains(wide, "BACKFILL_ABANDON_REASON") {
			t.Errorf("wide: exit %d\n%s", code, wide)
		}
		paged, errOut, code := msgxctl(t, env, "list-messages", "--page-size", "1")
		if code != 0 || !strings.Contains(paged, "more: --page-token ") || !strings.Contains(paged, ", or --all for every page") {
			t.Errorf("one page: exit %d: %s\n%s", code, errOut, paged)
		}
		names, errOut, code := msgxctl(t, env, "list-messages", "--page-size", "1", "--all", "-o", "name")
		if code != 0 || names != "1\n2\n" {
			t.Errorf("--all -o name: exit %d: %s\n%q", code, errOut, names)
		}
		y, errOut, code := msgxctl(t, env, "list-messages", "--state", "dead", "--all", "-o", "yaml")
		if code != 0 || !strings.Contains(y, "messages:\n") || !strings.Contains(y, "msgId: 2\n") || !strings.Contains(y, "nextPageToken: \"\"") {
			t.Errorf("yaml: exit %d: %s\n%s", code, errOut, y)
		}
	})
	t.Run("replay dry run, then for real", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "replay", "--msg-ids", "1,2", "--dry-run", "-o", "json")
		if code != 0 || !strings.Contains(out, `"replayedIds": [`) || !strings.Contains(out, `"malformedIds": [`) {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		if st, _ := stateOf(t, db, 1); st != "DEAD" {
			t.Fatalf("the dry run replayed message 1 (%s)", st)
		}
		if _, errOut, code := msgxctl(t, env, "replay", "--error-class", "EXHAUSTED", "--comment", "cli test"); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if st, _ := stateOf(t, db, 1); st != "PENDING" {
			t.Errorf("after the replay message 1 is %s, want PENDING", st)
		}
	})
	t.Run("requeue-events dry run, then for real", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "requeue-events", "--target", "KAFKA:msg", "--flid", "F7", "--dry-run", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		var resp struct {
			DryRun bool `json:"dryRun"`
			Events []struct {
				EventID      int64  `json:"eventId"`
				Flid         string `json:"flid"`
				StateVersion int64  `json:"stateVersion"`
				LastError    string `json:"lastError"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		if !resp.DryRun || len(resp.Events) != 1 || resp.Events[0].EventID != deadF7 ||
			resp.Events[0].Flid != "F7" || resp.Events[0].StateVersion != 3 || resp.Events[0].LastError == "" {
			t.Errorf("dry run = %+v, want event %d of F7", resp, deadF7)
		}
		if st, _, _ := eventState(t, db, deadF7); st != "DEAD" {
			t.Fatalf("the dry run requeued event %d (%s)", deadF7, st)
		}
		out, errOut, code = msgxctl(t, env, "requeue-events", "--target", "KAFKA:msg", "--comment", "cli test")
		if code != 0 || !strings.Contains(out, "requeued") || !strings.Contains(out, "F8") {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		for _, id := range []int64{deadF7, deadF8} {
			if st, _, _ := eventState(t, db, id); st != "PENDING" {
				t.Errorf("after the requeue event %d is %s, want PENDING", id, st)
			}
		}
		if _, errOut, code := msgxctl(t, env, "requeue-events", "--flid", "F7"); code != ctl.ExitUsage {
			t.Errorf("requeue-events without a selector: exit %d, want %d: %s", code, ctl.ExitUsage, errOut)
		}
	})
	t.Run("get-message", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "get-message", "--msg-id", "2")
		if code != 0 || !strings.Contains(out, "message.state") || !strings.Contains(out, "MISSING") {
			t.Errorf("exit %d: %s\n%s", code, errOut, out)
		}
	})
	t.Run("get-message-body", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "get-message-body", "1", "--offset", "2", "--limit", "3", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		var chunk struct {
			Text       string `json:"text"`
			NextOffset int64  `json:"nextOffset"`
			BodyChars  int64  `json:"bodyChars"`
			RawSource  string `json:"rawSource"`
		}
		if err := json.Unmarshal([]byte(out), &chunk); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		if chunk.Text != "SG/" || chunk.NextOffset != 5 || chunk.BodyChars != 6 || chunk.RawSource != "inbox" {
			t.Errorf("chunk = %+v, want SG/ of <MSG/>, next at 5 of 6, from the inbox", chunk)
		}
		// The table is the XML alone, byte for byte (issue #56): chunks appended make the text;
		// where the next one starts goes to stderr.
		first, errOut, code := msgxctl(t, env, "get-message-body", "1", "--limit", "4")
		if code != 0 || first != "<MSG" || !strings.Contains(errOut, "the next chunk: --offset 4") {
			t.Errorf("first chunk: exit %d, stdout %q, stderr %q; want exactly <MSG and the next offset on stderr", code, first, errOut)
		}
		rest, errOut, code := msgxctl(t, env, "get-message-body", "1", "--offset", "4")
		if code != 0 || first+rest != "<MSG/>" || errOut != "" {
			t.Errorf("last chunk: exit %d, stdout %q, stderr %q; want /> and nothing on stderr", code, rest, errOut)
		}
		if wide, _, _ := msgxctl(t, env, "get-message-body", "1", "-o", "wide"); !strings.Contains(wide, "body_chars") || !strings.Contains(wide, "<MSG/>") {
			t.Errorf("-o wide lacks the offsets or the text:\n%s", wide)
		}
		if _, errOut, code := msgxctl(t, env, "get-message-body", "1", "--offset", "7"); code != ctl.ExitCode(codes.OutOfRange) {
			t.Errorf("an offset past the end: exit %d, want %d: %s", code, ctl.ExitCode(codes.OutOfRange), errOut)
		}
	})
	t.Run("seed-cutover, then its refusal", func(t *testing.T) {
		db2 := pgtest.New(t)
		in2 := startWith(t, db2, "control-cli-seed", now, func(cfg *config.Config) { cfg.MySQL.DSN = my.ServiceDSN }, nil)
		waitActive(t, in2)
		env2 := []string{ctl.EnvAddr + "=" + in2.addr, ctl.EnvToken + "=" + token}
		if out, errOut, code := msgxctl(t, env2, "seed-cutover", "--mode", "max", "--comment", "INC-T"); code != 0 || !strings.Contains(out, "watermark") {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		_, errOut, code := msgxctl(t, env2, "seed-cutover", "--mode", "zero", "--comment", "INC-T")
		if code != ctl.ExitCode(codes.FailedPrecondition) || !strings.Contains(errOut, "FailedPrecondition") {
			t.Errorf("second seeding: exit %d (want %d): %s", code, ctl.ExitCode(codes.FailedPrecondition), errOut)
		}
	})
	t.Run("resolve-contract-violation with nothing standing", func(t *testing.T) {
		_, errOut, code := msgxctl(t, env, "resolve-contract-violation", "--kind", "inbox-behind-watermark", "--resolution", "resume", "--dry-run")
		if code != ctl.ExitCode(codes.FailedPrecondition) || !strings.Contains(errOut, "no contract violation") {
			t.Errorf("exit %d (want %d): %s", code, ctl.ExitCode(codes.FailedPrecondition), errOut)
		}
	})
	t.Run("exit codes", func(t *testing.T) {
		cases := []struct {
			name string
			env  []string
			args []string
			want int
		}{
			{"wrong token", []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvToken + "=nope"}, []string{"get-status"}, ctl.ExitCode(codes.Unauthenticated)},
			{"unknown message", env, []string{"get-message", "--msg-id", "999"}, ctl.ExitCode(codes.NotFound)},
			{"no server", []string{ctl.EnvAddr + "=127.0.0.1:1"}, []string{"get-status", "--timeout", "5s"}, ctl.ExitCode(codes.Unavailable)},
			{"no token for a remote control", []string{ctl.EnvAddr + "=control.invalid:9000"}, []string{"get-status"}, ctl.ExitUsage},
			{"address without a port", env, []string{"get-status", "--addr", "127.0.0.1"}, ctl.ExitUsage},
			{"replay without selector", env, []string{"replay"}, ctl.ExitUsage},
			{"unknown flag", env, []string{"replay", "--nope"}, ctl.ExitUsage},
			{"bad enum", env, []string{"replay", "--error-class", "sometimes"}, ctl.ExitUsage},
			{"bad integer", env, []string{"get-message", "--msg-id", "x"}, ctl.ExitUsage},
			{"unknown command", env, []string{"explode"}, ctl.ExitUsage},
			{"bad output", env, []string{"get-status", "-o", "xml"}, ctl.ExitUsage},
			{"missing token file", []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvTokenFile + "=/nonexistent"}, []string{"get-status"}, ctl.ExitLocal},
		}
		for _, tc := range cases {
			if _, errOut, code := msgxctl(t, tc.env, tc.args...); code != tc.want {
				t.Errorf("%s: exit %d, want %d: %s", tc.name, code, tc.want, errOut)
			}
		}
	})
	t.Run("no token given to a control that needs one", func(t *testing.T) {
		_, errOut, code := msgxctl(t, []string{ctl.EnvAddr + "=" + in.addr}, "get-status")
		if code != ctl.ExitCode(codes.Unauthenticated) || !strings.Contains(errOut, "none was given: set MSGXCTL_TOKEN_FILE") {
			t.Errorf("exit %d: %s", code, errOut)
		}
		_, errOut, code = msgxctl(t, []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvToken + "=not-the-token-of-this-control-0123"}, "get-status")
		if code != ctl.ExitCode(codes.Unauthenticated) || !strings.Contains(errOut, "the token from --token (env MSGXCTL_TOKEN) was refused") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
	t.Run("--timeout 0 is no limit", func(t *testing.T) {
		if _, errOut, code := msgxctl(t, env, "get-status", "--timeout", "0"); code != 0 {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
	t.Run("reopen that changes nothing says why", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "reopen", "2", "--dry-run")
		if code != 0 || !strings.Contains(out, "nothing would be reopened: only messages whose processed marker was abandoned can be reopened") ||
			!strings.Contains(out, "message 2 is DEAD, not abandoned") {
			t.Errorf("exit %d: %s\n%s", code, errOut, out)
		}
		out, errOut, code = msgxctl(t, env, "reopen", "2", "--dry-run", "-o", "json")
		if code != 0 || !json.Valid([]byte(out)) || !strings.Contains(errOut, "message 2 is DEAD") {
			t.Errorf("with -o json the reason goes to stderr: exit %d: %s\n%s", code, errOut, out)
		}
	})
	// Issue #56 finding 10: a typo in an ID exits 15 (NOT_FOUND), never 0, and an unknown message
	// is told apart from one that is not DEAD.
	t.Run("unknown IDs exit NOT_FOUND", func(t *testing.T) {
		procRow(t, db, 3, "SUCCEEDED", "", now)
		notFound := ctl.ExitCode(codes.NotFound)
		out, errOut, code := msgxctl(t, env, "reopen", "999999", "--comment", "INC-7")
		if code != notFound || !strings.Contains(out, "message 999999: not found") || !strings.Contains(errOut, "reopen: NotFound: no message 999999") {
			t.Errorf("reopen 999999: exit %d (want %d)\n%s%s", code, notFound, out, errOut)
		}
		out, errOut, code = msgxctl(t, env, "acknowledge-dead", "999999", "3", "--reason", "INC-7")
		if code != notFound || !strings.Contains(out, "not DEAD, not acknowledged: 3") ||
			!strings.Contains(out, "not found (no such message), not acknowledged: 999999") || !strings.Contains(errOut, "no message 999999") {
			t.Errorf("acknowledge-dead 999999 3: exit %d (want %d)\n%s%s", code, notFound, out, errOut)
		}
		out, errOut, code = msgxctl(t, env, "acknowledge-dead", "2", "999999", "--reason", "INC-7", "--dry-run", "-o", "json")
		var got struct {
			AcknowledgedIDs []int64 `json:"acknowledgedIds"`
			NotFoundIDs     []int64 `json:"notFoundIds"`
			NotDeadIDs      []int64 `json:"notDeadIds"`
		}
		if code != notFound || json.Unmarshal([]byte(out), &got) != nil || len(got.AcknowledgedIDs) != 1 || len(got.NotFoundIDs) != 1 ||
			got.NotFoundIDs[0] != 999999 || len(got.NotDeadIDs) != 0 {
			t.Errorf("acknowledge-dead 2 999999 --dry-run -o json: exit %d (want %d)\n%s%s", code, notFound, out, errOut)
		}
		if out, errOut, code := msgxctl(t, env, "acknowledge-dead", "3", "--reason", "INC-7"); code != 0 || !strings.Contains(out, "not DEAD, not acknowledged: 3") {
			t.Errorf("acknowledge-dead 3 (known, not DEAD): exit %d (want 0)\n%s%s", code, out, errOut)
		}
	})
	// Issue #56 finding 6: the usual addressing mistakes are named in words, with the flag that
	// fixes them, not in gRPC's and Go's transport internals; still exit 24 (UNAVAILABLE).
	t.Run("addressing mistakes in plain words", func(t *testing.T) {
		// An HTTP/1.1 server, as every service's admin port is.
		admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ready\n") }))
		defer admin.Close()
		adminAddr := strings.TrimPrefix(admin.URL, "http://")
		tokenEnv := ctl.EnvToken + "=" + token
		for _, tc := range []struct {
			name, addr string
			args       []string
			want       string
		}{
			{"the admin port", adminAddr, nil, adminAddr + " answers HTTP/1.1, not gRPC: --addr names an HTTP port, such as a service's admin port"},
			{"TLS against plaintext", in.addr, []string{"--insecure"}, in.addr + " does not speak TLS: that control serves plaintext (no control.tls-cert), so leave out --ca"},
			{"an unknown host", "no-such-control.invalid:9000", nil, `the host "no-such-control.invalid" of --addr no-such-control.invalid:9000 is unknown`},
		} {
			_, errOut, code := msgxctl(t, []string{ctl.EnvAddr + "=" + tc.addr, tokenEnv}, append([]string{"get-status"}, tc.args...)...)
			if code != ctl.ExitCode(codes.Unavailable) || !strings.Contains(errOut, tc.want) {
				t.Errorf("%s: exit %d, stderr %s; want %d and %q", tc.name, code, errOut, ctl.ExitCode(codes.Unavailable), tc.want)
			}
			for _, internal := range []string{"http2:", "tls: first record", "produced zero addresses", "desc ="} {
				if strings.Contains(errOut, internal) {
					t.Errorf("%s: stderr shows the transport's %q: %s", tc.name, internal, errOut)
				}
			}
		}
	})
	t.Run("mTLS", func(t *testing.T) {
		f := newTLSFiles(t)
		db3 := pgtest.New(t)
		in3 := startWith(t, db3, "control-cli-tls", now, func(cfg *config.Config) {
			cfg.Control.TLSCert, cfg.Control.TLSKey, cfg.Control.ClientCA = f.serverCert, f.serverKey, f.ca
		}, nil)
		env3 := []string{ctl.EnvAddr + "=" + in3.addr, ctl.EnvToken + "=" + token}
		if _, errOut, code := msgxctl(t, env3, "get-status", "--ca", f.ca, "--cert", f.clientCert, "--key", f.clientKey); code != 0 {
			t.Errorf("with a client certificate: exit %d: %s", code, errOut)
		}
		if _, _, code := msgxctl(t, env3, "get-status", "--ca", f.ca); code != ctl.ExitCode(codes.Unavailable) {
			t.Errorf("without a client certificate: exit %d, want %d", code, ctl.ExitCode(codes.Unavailable))
		}
		// Plaintext against a TLS control: the server hangs up; say to give --ca.
		if _, errOut, code := msgxctl(t, env3, "get-status"); code != ctl.ExitCode(codes.Unavailable) || !strings.Contains(errOut, "give --ca") {
			t.Errorf("plaintext against TLS: exit %d, want %d and a hint to give --ca: %s", code, ctl.ExitCode(codes.Unavailable), errOut)
		}
		if _, _, code := msgxctl(t, env3, "get-status", "--cert", f.clientCert); code != ctl.ExitUsage {
			t.Errorf("--cert without --key: exit %d, want %d", code, ctl.ExitUsage)
		}
	})
}
