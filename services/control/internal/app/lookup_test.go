package app_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/services/control/internal/ctl"
	"github.com/msgexchange/msgexchange/testkit/flights"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// lookupFixture is a flight F1 in PostgreSQL and Redis with one message that failed twice and
// then succeeded, its delivered event and its marker; control runs over it.
func lookupFixture(t *testing.T) (env []string, rd *redistest.Redis, msgID int64) {
	t.Helper()
	pg, my := pgtest.New(t), mysqltest.New(t)
	rd = redistest.New(t)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	received := at(0)
	msgID = my.InsertInbox(t, "<MSG/>", &received)
	pg.Exec(t, `INSERT INTO proc_state (msg_id, state, attempts, msg_type, msg_styp, received_at, enqueued_at,
		processing_started_at, finished_at, backfill_next_at, backfill_at, trace_parent, updated_at, flid)
		VALUES ($1, 'SUCCEEDED', 2, 'FLOP', 'ESTT', $2, $3, $4, $5, $5, $6, $7, $6, 'F1')`,
		msgID, at(0), at(1), at(2), at(9), at(12), traceParent)
	for i, a := range []struct {
		start, end int
		outcome    string
		class, err any
	}{{2, 3, "FAILED", "INFRA", "redis: connection refused"}, {5, 6, "FAILED", "INFRA", "redis: connection refused"},
		{8, 9, "SUCCEEDED", nil, nil}} {
		pg.Exec(t, `INSERT INTO proc_attempt (msg_id, attempt_no, started_at, ended_at, outcome, error_class, error)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, msgID, i+1, at(a.start), at(a.end), a.outcome, a.class, a.err)
	}
	eventRow(t, pg, "KAFKA:msg", "F1", 3, msgID, "SENT", at(10))
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f := flight.New("F1")
	f.Version, f.LastMsgID, f.CreatedAt, f.UpdatedAt, f.OperationDay = 3, msgID, at(9), at(9), &day
	f.Scalars = map[string]string{"FLNO": "CA1501", "ALCD": "CA", "ESTT": "01MAR260850"}
	flights.Write(t, pg.Pool, f)
	if _, err := projection.New(rd.Client, rd.Prefix, 5*time.Second).Write(t.Context(), flight.Project([]flight.Flight{f})); err != nil {
		t.Fatal(err)
	}
	in := startWith(t, pg, "control-lookup", time.Now(), func(cfg *config.Config) {
		cfg.MySQL.DSN, cfg.Redis.URL, cfg.Redis.Prefix = my.ServiceDSN, rd.URL, rd.Prefix
		cfg.Tracing.UIURL = "http://jaeger.test:16686/trace/{trace_id}"
	}, nil)
	waitActive(t, in)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvTokenFile + "=" + tokenFile}, rd, msgID
}

func TestMsgxctlLookup(t *testing.T) {
	t.Parallel()
	env, rd, id := lookupFixture(t)
	sid := fmt.Sprint(id)

	t.Run("get-message ID prints the timeline", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "get-message", sid)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		t.Logf("msgxctl get-message %s:\n%s", sid, out)
		// The steps in order with their gaps, the attempts with their errors, the trace link.
		steps := regexp.MustCompile(`(?s)timeline:\n.*in-inbox.*\n.*\+1s\s+enqueued.*\n.*\+1s\s+processing-started.*\n` +
			`.*\+7s\s+terminal\s+SUCCEEDED.*\n.*\+1s\s+event-sent\s+KAFKA:msg key F1 v3.*\n.*\+2s\s+marked`)
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`message ` + sid + `  SUCCEEDED  FLOP/ESTT  flight F1`),
			regexp.MustCompile(`trace http://jaeger.test:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736`),
			steps,
			regexp.MustCompile(`attempts \(3 kept; \d+ failed since the last replay\):\n\s+#1 .*1s\s+FAILED\(INFRA\)\s+redis: connection refused\n\s+#2 .*\n\s+#3 .*SUCCEEDED`),
			regexp.MustCompile(`events \(1\):`),
		} {
			if !want.MatchString(out) {
				t.Errorf("output does not match %s:\n%s", want, out)
			}
		}
		flagOut, _, code := msgxctl(t, env, "get-message", "--msg-id", sid)
		if code != 0 || flagOut != out {
			t.Errorf("--msg-id %s: exit %d, output differs from the positional form", sid, code)
		}
		for _, args := range [][]string{{"get-message", sid, "--msg-id", sid}, {"get-message", "x"}, {"get-message", "1", "2"}} {
			if _, errOut, code := msgxctl(t, env, args...); code != ctl.ExitUsage {
				t.Errorf("msgxctl %v: exit %d, want %d: %s", args, code, ctl.ExitUsage, errOut)
			}
		}
		out, _, code = msgxctl(t, env, "get-message", sid, "-o", "json")
		if code != 0 || !strings.Contains(out, `"traceUrl": "http://jaeger.test:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736"`) ||
			!strings.Contains(out, `"step": "marked"`) {
			t.Errorf("json: exit %d\n%s", code, out)
		}
	})
	t.Run("list-messages by flight", func(t *testing.T) {
		for _, args := range [][]string{{"--flid", "F1"}, {"--flight-number", "CA1501", "--operation-day", "2026-03-01"}} {
			out, errOut, code := msgxctl(t, env, append([]string{"list-messages"}, args...)...)
			if code != 0 || !regexp.MustCompile(`(?m)^`+sid+`\s+SUCCEEDED`).MatchString(out) {
				t.Errorf("list-messages %v: exit %d: %s\n%s", args, code, errOut, out)
			}
		}
		if _, _, code := msgxctl(t, env, "list-messages", "--flight-number", "CA1501"); code != ctl.ExitUsage {
			t.Errorf("flight number without a day: exit %d, want %d", code, ctl.ExitUsage)
		}
	})
	t.Run("get-flight side by side, then with a drift", func(t *testing.T) {
		out, errOut, code := msgxctl(t, env, "get-flight", "F1")
		if code != 0 || !strings.Contains(out, "flight F1  drift none") || !regexp.MustCompile(`\n\s+version\s+3\s+3\n`).MatchString(out) ||
			regexp.MustCompile(`\n\s+ESTT\s`).MatchString(out) || !regexp.MustCompile(`\d+ of \d+ fields equal on both sides`).MatchString(out) || strings.Contains(out, "≠") ||
			!strings.Contains(out, "messages (1):") || !strings.Contains(out, "events (1):") {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		// -o wide: every field side by side.
		out, errOut, code = msgxctl(t, env, "get-flight", "F1", "-o", "wide")
		if code != 0 || !regexp.MustCompile(`\n\s+ESTT\s+"01MAR260850"\s+"01MAR260850"\n`).MatchString(out) {
			t.Fatalf("-o wide: exit %d: %s\n%s", code, errOut, out)
		}
		// Redis holds another ESTT at the same version: a content drift, the field marked.
		key := projection.FlightKey(rd.Prefix, "F1")
		doc, err := rd.Client.Get(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rd.Client.Set(t.Context(), key, strings.Replace(doc, "01MAR260850", "01MAR260900", 1), 0).Err(); err != nil {
			t.Fatal(err)
		}
		out, _, code = msgxctl(t, env, "get-flight", "--flid", "F1")
		t.Logf("msgxctl get-flight F1 with a drift:\n%s", out)
		if code != 0 || !strings.Contains(out, "drift CONTENT") || !regexp.MustCompile(`≠\s+ESTT\s+"01MAR260850"\s+"01MAR260900"`).MatchString(out) {
			t.Errorf("after the drift: exit %d\n%s", code, out)
		}
		if _, _, code := msgxctl(t, env, "get-flight", "NOPE"); code != ctl.ExitCode(5) {
			t.Errorf("unknown flight: exit %d, want %d (NOT_FOUND)", code, ctl.ExitCode(5))
		}
	})
	t.Run("get-status --watch writes plain lines when stdout is not a terminal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin(t, "msgxctl"), "get-status", "-w", "--interval", "1s")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errOut strings.Builder
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		// The rows waiting beyond W count in the drain estimate: with one waiting and nothing
		// finishing, the drain is unknown.
		line := regexp.MustCompile(`^\S+Z W=\d+ lag=\d+ hole_age=\S+ holes=0/0 open_holes=0 waiting=\d+ oldest_waiting=\S+ unfinished=0 ` +
			`rate=\S+ drain=(0s|unknown) backfill=0/0 ` +
			`outbox=KAFKA:msg:0/0,KAFKA:schd:0/0 roles=.*control:control-lookup`)
		for i := range 2 {
			if !lines.Scan() {
				t.Fatalf("line %d missing: %v %s", i+1, lines.Err(), errOut.String())
			}
			if !line.MatchString(lines.Text()) || strings.Contains(lines.Text(), "\x1b") {
				t.Errorf("line %d = %q", i+1, lines.Text())
			}
		}
		// Ctrl-C ends the watch as success.
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("after SIGINT: %v (%s)", err, errOut.String())
		}
	})
	t.Run("get-status -w redraws in place on a terminal (tmux)", func(t *testing.T) {
		tmux, err := exec.LookPath("tmux")
		if err != nil {
			t.Skip("tmux is not installed; the manual check is in docs/control.md")
		}
		// A private server (-L): nothing of the developer's own tmux is touched.
		sock := fmt.Sprintf("msgx-watch-%d", os.Getpid())
		run := func(args ...string) string {
			t.Helper()
			out, err := exec.Command(tmux, append([]string{"-L", sock}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("tmux %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		line := "env " + strings.Join(env, " ") + " " + bin(t, "msgxctl") + " get-status -w --interval 1s"
		run("new-session", "-d", "-s", "watch", "-x", "160", "-y", "60", line)
		t.Cleanup(func() { _ = exec.Command(tmux, "-L", sock, "kill-server").Run() })
		header := regexp.MustCompile(`msgxctl get-status --watch  every 1s  (\S+)  \(Ctrl-C to stop\)`)
		var first string
		testwait.For(t, 20*time.Second, "the watch screen", func() bool {
			screen := run("capture-pane", "-p", "-t", "watch")
			if m := header.FindStringSubmatch(screen); m != nil && strings.Contains(screen, "OUTBOX") {
				first = m[1]
				return true
			}
			return false
		})
		var screen string
		testwait.For(t, 20*time.Second, "a redraw", func() bool {
			screen = run("capture-pane", "-p", "-t", "watch")
			m := header.FindStringSubmatch(screen)
			return m != nil && m[1] != first
		})
		t.Logf("the watch screen under tmux:\n%s", screen)
		// Redrawn in place: one screen, its header on the first line, nothing scrolled.
		if n := len(header.FindAllString(screen, -1)); n != 1 || !strings.HasPrefix(screen, "msgxctl get-status --watch") {
			t.Errorf("%d headers, want one screen redrawn in place:\n%s", n, screen)
		}
		for _, want := range []string{"ROLES", "control-lookup", "DISCOVERY", "watermark", "BACKLOG", "unfinished 0",
			"estimated drain", "BACKFILL  pending 0", "KAFKA:msg   pending 0   dead 0", "STATES"} {
			if !strings.Contains(screen, want) {
				t.Errorf("screen lacks %q:\n%s", want, screen)
			}
		}
		run("send-keys", "-t", "watch", "C-c")
	})
}
