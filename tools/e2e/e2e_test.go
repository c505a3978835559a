// Package e2e runs the five services as separate processes against real PostgreSQL, MariaDB,
// Redis and Apache Kafka (the shared local broker, on topics of each test's own), and checks
// the five facts (R-FACT-1) for every inbox row: in the inbox, enqueued, terminal, marked,
// delivered.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/leaktest"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/tools/stack"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds the service binaries once per test process.
func binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := stack.Root()
		if err != nil {
			buildErr = err
			return
		}
		binDir, err = os.MkdirTemp("", "msgx-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildErr = stack.Build(context.Background(), root, binDir)
	})
	if buildErr != nil {
		t.Fatalf("build binaries: %v", buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(kafkatest.Main(m), func(code int) {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
		os.Exit(code)
	})
}

// env is one isolated set of real dependencies: its own databases and Redis prefix, and topics
// and a transactional id of its own on the shared broker.
type env struct {
	pg       *pgtest.DB
	my       *mysqltest.DB
	redis    *redistest.Redis
	kafka    *kafkatest.Cluster
	topicMsg string // the env's KAFKA:msg topic
	// topicSchd is the env's KAFKA:schd topic, compacted as in production: the version floor
	// and a consumer that reads it from the start see what compaction keeps.
	topicSchd string
	stack     *stack.Stack
	token     string
	grpcAddr  string
	httpAddr  string
	records   *recorder
	vars      []string // the services' environment
	logs      *testLog
}

// The topics' base names (the services' defaults); each env's topics add a suffix of its own.
const (
	topicMsg  = "msgx.flight.msg"
	topicSchd = "msgx.flight.schd"
)

// topicPartitions is each topic's partition count: more than one, so that per-FLID order is
// the key's partition's and not the topic's.
const topicPartitions = 3

// schdConfigs are the KAFKA:schd topic's configs as production creates it (docs/dispatcher.md).
var schdConfigs = map[string]string{"cleanup.policy": "compact"}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvOf(t, binaries(t))
}

// newEnvOf is newEnv running the binaries in bin (another release's, say).
func newEnvOf(t testing.TB, bin string) *env {
	t.Helper()
	return newEnvOn(t, bin, mysqltest.New(t))
}

// newEnvOn is newEnvOf with the inbox database my (on a MariaDB server of the test's own, say).
func newEnvOn(t testing.TB, bin string, my *mysqltest.DB) *env {
	t.Helper()
	return newEnvWith(t, bin, my, pgtest.New(t))
}

// newEnvWith is newEnvOn with the PostgreSQL database pg (production-sized tables, say).
func newEnvWith(t testing.TB, bin string, my *mysqltest.DB, pg *pgtest.DB) *env {
	t.Helper()
	e := &env{pg: pg, my: my, redis: redistest.New(t), token: "e2e-operator-token-0123456789abcdef", grpcAddr: freePort(t), httpAddr: freePort(t)}
	// Topics and a transactional id of the env's own: envs of concurrent tests (and packages)
	// on the shared broker never read each other's records nor fence each other's producers.
	e.kafka = kafkatest.Shared(t)
	e.topicMsg = e.kafka.Topic(t, topicMsg, topicPartitions, nil)
	e.topicSchd = e.kafka.Topic(t, topicSchd, topicPartitions, schdConfigs)
	e.records = consume(t, e.kafka.Addrs, e.topicMsg, e.topicSchd)
	e.logs = &testLog{t: t}
	e.vars = []string{
		"MSGX_PG_DSN=" + e.pg.DSN,
		"MSGX_MYSQL_DSN=" + e.my.ServiceDSN,
		"MSGX_REDIS_URL=" + e.redis.URL,
		"MSGX_REDIS_PREFIX=" + e.redis.Prefix,
		"MSGX_KAFKA_BROKERS=" + strings.Join(e.kafka.Addrs, ","),
		"MSGX_KAFKA_TOPIC_MSG=" + e.topicMsg,
		"MSGX_KAFKA_TOPIC_SCHD=" + e.topicSchd,
		"MSGX_KAFKA_TRANSACTIONAL_ID=" + kafkatest.Name("msgx-e2e"),
		"MSGX_ADMIN_ADDR=127.0.0.1:0",
		"MSGX_HTTP_ADDR=" + e.httpAddr,
		"MSGX_HTTP_TOKEN=" + e.token,
		"MSGX_GRPC_ADDR=" + e.grpcAddr,
		"MSGX_CONTROL_TOKEN=" + e.token,
		"MSGX_PIPELINE_POLL_INTERVAL=100ms",
		"MSGX_PIPELINE_BACKFILL_PERIOD=500ms",
		"MSGX_SCHD_FLUSH_PERIOD=200ms",
		"MSGX_SHUTDOWN_TIMEOUT=5s",
		"MSGX_LOG_LEVEL=info",
	}
	e.stack = stack.New(bin, e.vars, e.logs)
	t.Cleanup(func() {
		e.stack.StopAll(10 * time.Second)
		e.logs.stop()
	})
	return e
}

// switchTo stops every service and runs the binaries in bin from now on, on the same
// dependencies: an upgrade (or a rollback) of the whole release.
func (e *env) switchTo(bin string) {
	e.stack.StopAll(10 * time.Second)
	e.stack = stack.New(bin, e.vars, e.logs)
}

// start runs the given roles.
func (e *env) start(t testing.TB, roles ...string) {
	t.Helper()
	for _, r := range roles {
		if err := e.stack.Start(r, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// startAll runs the five services.
func (e *env) startAll(t testing.TB) { e.start(t, stack.Services...) }

// startAllWith starts the five services with settings added to each one's environment.
func (e *env) startAllWith(t testing.TB, settings ...string) {
	t.Helper()
	for _, r := range stack.Services {
		if err := e.stack.Start(r, nil, settings...); err != nil {
			t.Fatal(err)
		}
	}
}

// testLog copies the services' output into the test log until the test ends.
type testLog struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done && testing.Verbose() {
		l.t.Log(string(p[:len(p)-1]))
	}
	return len(p), nil
}

func (l *testLog) stop() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}

// recorder collects every record of both topics by event id, and checks each against the event
// contract (testkit/contracttest): a record that breaks it fails the test that produced it.
type recorder struct {
	mu       sync.Mutex
	events   map[int64]*kgo.Record
	received map[int64]time.Time
	byFLID   map[string][]int64 // KAFKA:msg event ids in arrival order per FLID
	// broken holds the first contract violations seen (at most maxBroken), reported when the
	// test ends; nbroken counts them all.
	broken  []error
	nbroken int
}

// maxBroken bounds the violations a recorder reports: one broken document is enough to act
// on, and a thousand copies of it only bury the test's own output.
const maxBroken = 5

func consume(t testing.TB, addrs []string, msgTopic, schdTopic string) *recorder {
	t.Helper()
	r := &recorder{events: map[int64]*kgo.Record{}, received: map[int64]time.Time{}, byFLID: map[string][]int64{}}
	// read_committed, as every consumer must: the dispatcher sends in transactions, and aborted
	// ones (duplicates, a deposed holder's records) are invisible only then.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(msgTopic, schdTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			fetches.EachRecord(func(rec *kgo.Record) {
				target := outbox.TargetSchd
				if rec.Topic == msgTopic {
					target = outbox.TargetMsg
				}
				broken := contracttest.CheckRecord(target, rec)
				var id int64
				for _, h := range rec.Headers {
					if h.Key == "msgx-event-id" {
						id, _ = strconv.ParseInt(string(h.Value), 10, 64)
					}
				}
				r.mu.Lock()
				if broken != nil {
					if r.nbroken++; r.nbroken <= maxBroken {
						r.broken = append(r.broken, broken)
					}
				}
				r.events[id] = rec
				if _, seen := r.received[id]; !seen {
					r.received[id] = time.Now()
				}
				if rec.Topic == msgTopic {
					r.byFLID[string(rec.Key)] = append(r.byFLID[string(rec.Key)], id)
				}
				r.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, err := range r.broken {
			t.Error(err)
		}
		if r.nbroken > len(r.broken) {
			t.Errorf("%d more records break the event contract", r.nbroken-len(r.broken))
		}
	})
	return r
}

func (r *recorder) has(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.events[id]
	return ok
}

// receivedAt is when the consumer first saw the event (zero if never).
func (r *recorder) receivedAt(id int64) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.received[id]
}

func (r *recorder) record(id int64) *kgo.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events[id]
}

// facts are the five facts of R-FACT-1 for one inbox row.
type facts struct {
	inInbox   bool
	enqueued  bool
	terminal  bool
	state     string
	marked    bool
	delivered bool // every event of the message is SENT and was received from the broker
	events    int
}

func (f facts) String() string {
	return fmt.Sprintf("inbox=%v enqueued=%v terminal=%v(%s) marked=%v delivered=%v(%d events)",
		f.inInbox, f.enqueued, f.terminal, f.state, f.marked, f.delivered, f.events)
}

func (e *env) facts(t *testing.T, id int64) facts {
	t.Helper()
	ctx := context.Background()
	var f facts
	var processed *time.Time
	err := e.my.Admin.QueryRowContext(ctx, `SELECT CMINMSGS_DATE_PROCESSED FROM cminmsgs WHERE CMINMSGS_ID = ?`, id).Scan(&processed)
	f.inInbox = err == nil
	f.marked = processed != nil
	err = e.pg.Pool.QueryRow(ctx, `SELECT state FROM proc_state WHERE msg_id = $1`, id).Scan(&f.state)
	f.enqueued = err == nil
	f.terminal = f.state == "SUCCEEDED" || f.state == "SKIPPED" || f.state == "DEAD"
	rows, err := e.pg.Pool.Query(ctx, `SELECT event_id, state FROM msg_event WHERE msg_id = $1`, id)
	if err != nil {
		t.Fatalf("read events of %d: %v", id, err)
	}
	defer rows.Close()
	f.delivered = true
	for rows.Next() {
		var eid int64
		var state string
		if err := rows.Scan(&eid, &state); err != nil {
			t.Fatal(err)
		}
		f.events++
		if state != "SENT" || !e.records.has(eid) {
			f.delivered = false
		}
	}
	return f
}

// exited waits up to limit for the process name to exit on its own and returns its exit code
// and its output.
func (e *env) exited(t *testing.T, limit time.Duration, name string) (int, string) {
	t.Helper()
	testwait.ForState(t, limit, name+" to exit", func() (bool, string) {
		_, exited := e.stack.Exited(name)
		return exited, "running"
	})
	code, _ := e.stack.Exited(name)
	return code, e.stack.Output(name)
}
