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
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/leaktest"
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
	root := repo.Root(t)
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := stack.Build(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./tools/cmd/msgx-demo")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build msgx-demo: %v\n%s", err, out)
	}

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

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
