package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/leaktest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/tools/internal/repo"
	"github.com/msgexchange/msgexchange/tools/stack"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(kafkatest.Main(m)) }

// TestDemoFailsOnAnUnexpectedRow runs the demo on a small day with one message broken
// (-break-row: a FLOP the generator expects to succeed, truncated, ends DEAD): it lists the
// DEAD row's reason, ends with one FAIL line naming the row, exits 1, and leaves none of the
// databases, the inbox account, the Redis keys or the topics it made behind.
func TestDemoFailsOnAnUnexpectedRow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := buildAll(ctx, t)

	kafka := kafkatest.Shared(t)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "msgx-demo"), "-bin", bin, "-flights", "12", "-break-row", "-timeout", "4m")
	cmd.Env = append(os.Environ(), "MSGX_KAFKA_BROKERS="+strings.Join(kafka.Addrs, ","))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("msgx-demo -break-row: %v, want exit 1\n%s\n%s", err, out, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	if !regexp.MustCompile(`^FAIL: 1 rows ended otherwise than the generator expects: msg \d+ \(flop FLOP \w+\) DEAD\(MALFORMED\), expected SUCCEEDED$`).MatchString(last) {
		t.Errorf("the last line is %q, want one FAIL verdict naming the broken row\n%s\n%s", last, out, stderr.String())
	}
	if !regexp.MustCompile(`(?m)^SKIPPED and DEAD rows, with their reasons \(\d+\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  msg \d+ +flop +FLOP \w+ +DEAD\(MALFORMED\) +\S`).MatchString(out) {
		t.Errorf("the summary does not list the DEAD row with its reason:\n%s", out)
	}
	if strings.Count(out, "PASS") != 0 {
		t.Errorf("a failing run printed PASS:\n%s", out)
	}

	// What the run made is gone.
	m := regexp.MustCompile(`PostgreSQL (msgx_demo_\w+), inbox (msgx_demo_\w+) \(account (msgx_demo_\w+)\), Redis prefix (\S+?), topics (msgx-demo-\S+) and (msgx-demo-\S+) on `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo does not name this run's databases and topics:\n%s", out)
	}
	// The broker deletes a topic in the background: its metadata may name it for a moment.
	testwait.ForState(t, 30*time.Second, "the run's topics to be deleted", func() (bool, string) {
		topics, err := kafka.Admin().ListTopics(ctx, m[5], m[6])
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, td := range topics.Sorted() {
			if !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				left = append(left, fmt.Sprintf("%s (%v)", td.Topic, td.Err))
			}
		}
		return len(left) == 0, fmt.Sprintf("topics left: %v", left)
	})
	pgDSN := envOr("MSGX_TEST_PG_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	conn, err := pgx.Connect(ctx, pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", m[1]).Scan(&n); err != nil || n != 0 {
		t.Errorf("PostgreSQL database %s: %d left (err %v), want it dropped", m[1], n, err)
	}
	cfg, err := mysql.ParseDSN(envOr("MSGX_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"))
	if err != nil {
		t.Fatal(err)
	}
	my, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer my.Close()
	var dbs, users int
	if err := my.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?), (SELECT count(*) FROM mysql.user WHERE user = ?)",
		m[2], m[3]).Scan(&dbs, &users); err != nil || dbs != 0 || users != 0 {
		t.Errorf("inbox database %s: %d left, account %s: %d left (err %v), want both dropped", m[2], dbs, m[3], users, err)
	}
	opts, err := redis.ParseURL(envOr("MSGX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if keys, err := rdb.Keys(ctx, m[4]+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("Redis keys %s*: %d left (err %v), want none", m[4], len(keys), err)
	}
}

// buildAll builds the five services, msgxctl and the demo into a directory of the test's.
func buildAll(ctx context.Context, t *testing.T) string {
	t.Helper()
	root := repo.Root(t)
	bin := t.TempDir()
	if err := stack.Build(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./tools/cmd/msgx-demo", "./services/control/cmd/msgxctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build msgx-demo msgxctl: %v\n%s", err, out)
	}
	return bin
}

// TestServeLeavesAStackToLookAround runs the demo as `make run` does (-serve): once the day
// has drained, it prints msgxctl's environment and the inbox's password and keeps the five
// services running; msgxctl get-status, given exactly the printed environment, reaches the
// control through the real binary and sees every role held; SIGTERM (`make stop`) ends the
// stack with the run's verdict and removes the environment file.
func TestServeLeavesAStackToLookAround(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := buildAll(ctx, t)
	dir := t.TempDir()
	kafka := kafkatest.Shared(t)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "msgx-demo"), "-bin", bin, "-flights", "12", "-timeout", "4m", "-serve", dir)
	cmd.Env = append(os.Environ(), "MSGX_KAFKA_BROKERS="+strings.Join(kafka.Addrs, ","))
	// The process writes while the test reads.
	var stdout, stderr testlog.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-exited
		}
	}()

	envFile := filepath.Join(dir, "env")
	testwait.ForState(t, 5*time.Minute, "the demo to serve ("+envFile+")", func() (bool, string) {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("msgx-demo -serve exited before serving: %v\n%s\n%s", err, stdout.String(), stderr.String())
		default:
		}
		// The file is written after the lines are printed; the pipe may deliver them later.
		_, err := os.Stat(envFile)
		return err == nil && strings.Contains(stdout.String(), "the services' log: "), fmt.Sprint(err)
	})
	out := stdout.String()
	m := regexp.MustCompile(`(?m)^  export (MSGXCTL_ADDR=\S+) (MSGXCTL_TOKEN=\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no msgxctl environment printed:\n%s", out)
	}
	if file, err := os.ReadFile(envFile); err != nil || strings.TrimSpace(string(file)) != "export "+m[1]+" "+m[2] {
		t.Errorf("%s holds %q (err %v), want the printed line", envFile, file, err)
	}
	if !regexp.MustCompile(`(?m)^inbox \(MariaDB\): database msgx_demo_\w+ at \S+, account msgx_demo_\w+, password msgx_demo `).MatchString(out) {
		t.Errorf("the inbox's credentials are not printed:\n%s", out)
	}
	admins := regexp.MustCompile(`(?m)^  (ingest|pump|dispatcher|backfill|control) +http://(\S+)$`).FindAllStringSubmatch(out, -1)
	seen := map[string]bool{}
	for _, a := range admins {
		seen[a[2]] = true
	}
	if len(admins) != 5 || len(seen) != 5 {
		t.Errorf("want five distinct admin addresses, got %q", admins)
	}

	// A clean environment but for the printed one: nothing of the test's leaks into msgxctl.
	ctl := exec.CommandContext(ctx, filepath.Join(bin, "msgxctl"), "get-status")
	ctl.Env = []string{"HOME=" + t.TempDir(), m[1], m[2]}
	status, err := ctl.CombinedOutput()
	if err != nil {
		t.Fatalf("msgxctl get-status with %s %s: %v\n%s", m[1], m[2], err, status)
	}
	for _, role := range []string{"pump", "dispatcher", "backfill", "ingest"} {
		if !regexp.MustCompile(`(?m)^` + role + `\s`).Match(status) {
			t.Errorf("get-status does not list the role %s:\n%s", role, status)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = <-exited
	stopped = true
	if err != nil {
		t.Fatalf("msgx-demo -serve after SIGTERM: %v, want exit 0\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n"); lines[len(lines)-1] != "PASS" {
		t.Errorf("the last line is %q, want PASS", lines[len(lines)-1])
	}
	if _, err := os.Stat(envFile); !os.IsNotExist(err) {
		t.Errorf("%s is left after the stop (err %v)", envFile, err)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
