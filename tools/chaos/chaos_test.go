package chaos_test

import (
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/tools/chaos"
	"github.com/msgexchange/msgexchange/tools/internal/repo"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// TestChaos is the chaos run: one minute with a long broker outage by default (`make
// test`); MSGX_CHAOS_DURATION, MSGX_CHAOS_LONG, MSGX_CHAOS_FAILOVERS, MSGX_CHAOS_SEED,
// MSGX_CHAOS_FLIGHTS and MSGX_CHAOS_BIN shape longer ones (`make chaos`, docs/chaos.md). Every failed check fails
// the test; the services' logs are kept then and their directory named.
// Guards R-INV-23.
func TestChaos(t *testing.T) {
	cfg, err := chaos.FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LogDir, err = os.MkdirTemp("", "msgx-chaos-"); err != nil {
		t.Fatal(err)
	}
	if cfg.Bin == "" {
		cfg.Bin = build(t, cfg.LogDir)
	}
	kafka := withKafka
	if cfg.Cluster {
		kafka = withCluster
	}
	run, ref := kafka(t, target(t), cfg.LogDir), target(t)
	if cfg.Has(chaos.FailoverRedis) {
		run = withSentinel(t, run)
	}
	if cfg.Has(chaos.FailoverPG) {
		run = withReplicatedPG(t, run)
	}

	// Bounded as a whole: the window (grown by at most every long outage and its gaps), the
	// drain, the clean run and the set-up.
	bound := cfg.Window + cfg.DrainTimeout + cfg.CleanTimeout + 5*time.Minute
	for _, d := range cfg.Long {
		bound += chaos.LongOutage(d) + 10*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	// With -v (make chaos) the timeline and the summary go straight to stdout, unprefixed;
	// otherwise into the test log, which go test shows when the test fails.
	logs := &testLog{t: t}
	defer logs.stop()
	var out io.Writer = logs
	if testing.Verbose() {
		out = os.Stdout
	}
	rep, err := chaos.Run(ctx, cfg, run, ref, out)
	if err != nil {
		t.Fatalf("chaos run: %v (logs in %s)", err, cfg.LogDir)
	}
	for _, c := range rep.Checks {
		if !c.Pass {
			t.Errorf("%s: %s", c.Name, c.Detail)
		}
	}
	if t.Failed() {
		t.Logf("services' logs kept in %s", cfg.LogDir)
		return
	}
	_ = os.RemoveAll(cfg.LogDir)
}

// build compiles the binaries into dir/bin.
func build(t *testing.T, dir string) string {
	t.Helper()
	root := repo.Root(t)
	bin := dir + "/bin"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := stack.Build(ctx, root, bin); err != nil {
		t.Fatalf("build: %v", err)
	}
	return bin
}

// target gives a stack its own database, inbox and Redis server: the faults pause that server,
// which must not stall the other test packages running beside this one.
func target(t *testing.T) chaos.Target {
	t.Helper()
	pg, my, rd := pgtest.New(t), mysqltest.New(t), redistest.Own(t)
	return chaos.Target{
		PGDSN:           pg.DSN,
		PGAdminDSN:      maintenanceDSN(t, pg.DSN),
		MySQLAdminDSN:   my.AdminDSN,
		MySQLServiceDSN: my.ServiceDSN,
		RedisURL:        rd.URL,
		RedisPrefix:     rd.Prefix,
	}
}

// withKafka adds a broker of the stack's own to tg, with the two topics as production has them
// (three partitions each, KAFKA:schd compacted): the faults kill that broker, which must never
// be the shared one the other test packages use. A failed test keeps the broker's log in
// logDir beside the services' (the broker's own folder goes with the test).
func withKafka(t *testing.T, tg chaos.Target, logDir string) chaos.Target {
	t.Helper()
	k := kafkatest.Own(t, nil)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if b, err := os.ReadFile(filepath.Join(k.Dir(), "kafka.log")); err == nil {
			_ = os.WriteFile(filepath.Join(logDir, "kafka.log"), b, 0o600)
		}
	})
	tg.Kafka = k
	tg.TopicMsg = k.Topic(t, "msgx.flight.msg", 3, nil)
	tg.TopicSchd = k.Topic(t, "msgx.flight.schd", 3, map[string]string{"cleanup.policy": "compact"})
	return tg
}

// maintenanceDSN points dsn at the server's postgres database.
func maintenanceDSN(t *testing.T, dsn string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/postgres"
		return u.String()
	}
	return dsn + " dbname=postgres"
}

// testLog copies the harness's lines into the test log until the test ends.
type testLog struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
	line []byte
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return len(p), nil
	}
	l.line = append(l.line, p...)
	for {
		i := strings.IndexByte(string(l.line), '\n')
		if i < 0 {
			break
		}
		l.t.Log(string(l.line[:i]))
		l.line = l.line[i+1:]
	}
	return len(p), nil
}

func (l *testLog) stop() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}
