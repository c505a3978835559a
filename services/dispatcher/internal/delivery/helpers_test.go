package delivery_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

const (
	partitions = 3
	// deadline bounds every wait of these tests; generous, the machine is shared.
	deadline = 2 * time.Minute
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// broker is where a test's records go, with the test's own msg and schd topics of partitions
// partitions: the shared real broker (the default), a real broker of the test's own that it
// kills and restarts (own), or a kfake cluster (fake) for a fault the real broker cannot
// produce on demand; each test that takes kfake says which fault.
type broker struct {
	addrs     []string
	topicMsg  string
	topicSchd string
	cluster   *kafkatest.Cluster // a real broker's admin; nil on kfake
	own       *kafkatest.Server
	nodes     *kafkatest.Nodes // a cluster of the test's own
	fake      *kfake.Cluster
}

// realTopics creates the test's topics on a real broker: the msg topic with msgConfigs (nil for
// the broker's defaults), the schd topic compacted, as in service (docs/dispatcher.md, "Kafka
// prerequisites").
func realTopics(t testing.TB, c *kafkatest.Cluster, msgConfigs map[string]string) *broker {
	t.Helper()
	return &broker{addrs: c.Addrs, cluster: c,
		topicMsg:  c.Topic(t, "msgx.flight.msg", partitions, msgConfigs),
		topicSchd: c.Topic(t, "msgx.flight.schd", partitions, map[string]string{"cleanup.policy": "compact"})}
}

func sharedBroker(t testing.TB, msgConfigs map[string]string) *broker {
	t.Helper()
	return realTopics(t, kafkatest.Shared(t), msgConfigs)
}

// ownBroker is a real broker of the test's own (a JVM: only for a test that kills it).
func ownBroker(t testing.TB, msgConfigs map[string]string) *broker {
	t.Helper()
	s := kafkatest.Own(t, nil)
	b := realTopics(t, s.Cluster, msgConfigs)
	b.own = s
	return b
}

// clusterBroker is a cluster of three nodes of the test's own, the topics at replication factor
// 3 and min.insync.replicas 2 as in production (JVMs: only for a test that kills a node).
func clusterBroker(t testing.TB, msgConfigs map[string]string) *broker {
	t.Helper()
	n := kafkatest.OwnCluster(t, 3, nil)
	b := realTopics(t, n.Cluster, msgConfigs)
	b.nodes = n
	return b
}

// fakeBroker is a kfake cluster of one node.
func fakeBroker(t testing.TB, _ map[string]string) *broker {
	t.Helper()
	return fakeCluster(t, 1)
}

func fakeCluster(t testing.TB, nodes int) *broker {
	t.Helper()
	b := &broker{topicMsg: kafkatest.Name("msgx.flight.msg"), topicSchd: kafkatest.Name("msgx.flight.schd")}
	c, err := kfake.NewCluster(kfake.NumBrokers(nodes), kfake.SeedTopics(partitions, b.topicMsg, b.topicSchd))
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	b.fake, b.addrs = c, c.ListenAddrs()
	return b
}

// setTopicConfig sets one config of a topic on the real broker and waits until the broker
// describes the topic with it.
func (b *broker) setTopicConfig(t testing.TB, topic, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	adm := b.cluster.Admin()
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: &value}}, topic)
	if err == nil {
		for _, r := range resps {
			err = cmp.Or(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("set %s=%s on %s: %v", key, value, topic, err)
	}
	testwait.For(t, deadline, key+" of "+topic, func() bool {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return false
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			return false
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				return c.Value != nil && *c.Value == value
			}
		}
		return false
	})
}

// dropTopic deletes a topic of the test's own on the real broker under the dispatcher's feet and
// waits until the broker no longer knows it.
func (b *broker) dropTopic(t testing.TB, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := kafkatest.DeleteTopic(ctx, b.cluster.Admin(), topic); err != nil {
		t.Fatal(err)
	}
}

// recreateTopic creates a dropped topic again under its name, as an operator would, and waits
// until every partition has a leader. The kit's cleanup deletes it at the end as before.
func (b *broker) recreateTopic(t testing.TB, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := kafkatest.CreateTopic(ctx, b.cluster.Admin(), topic, partitions, nil); err != nil {
		t.Fatal(err)
	}
}

// refusedAbove is the max.message.bytes of a msg topic on which the broker refuses the records
// of chosen FLIDs for their size (oversized): ordinary events' records are far below it.
const refusedAbove = 4096

// oversized gives e a payload whose record the broker refuses on a topic of max.message.bytes
// refusedAbove, while it fits the producer's kafka.max-message-bytes (the default), so it is
// sent: a record the broker refuses for what it is.
func oversized(e outbox.NewEvent) outbox.NewEvent {
	// Padded in a field the event contract declares, so that the record, once the limit is
	// raised and it is sent, is still one the contract describes (consume checks it).
	e.Payload = changeEvent(e.PartitionKey, e.Version, strings.Repeat("X", refusedAbove))
	return e
}

// partitionOf is the partition sarama's default (hash) partitioner picks for key; the hash
// does not depend on the topic.
func partitionOf(t testing.TB, key string) int32 {
	t.Helper()
	p, err := sarama.NewHashPartitioner("").Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// flidsOn returns n FLIDs whose records go to partition p (want == true) or never to it.
func flidsOn(t testing.TB, prefix string, p int32, want bool, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		f := fmt.Sprintf("%s%d", prefix, i)
		if (partitionOf(t, f) == p) == want {
			out = append(out, f)
		}
	}
	return out
}

// newProducer is a producer of the fixture's transactional id prefix: every process of the
// test (a new term, a restart) shares it, as all dispatcher instances do, so that each fences
// the one before; no other test has it.
func (f *fixture) newProducer() *kafka.Producer {
	f.t.Helper()
	cfg := kafka.Config("msgx-dispatcher-test", config.Default().Kafka.MaxMessageBytes)
	if f.tune != nil {
		f.tune(cfg)
	}
	p, err := kafka.NewWithConfig(f.broker.addrs, cfg, f.txnID)
	if err != nil {
		f.t.Fatalf("producer: %v", err)
	}
	f.t.Cleanup(func() { _ = p.Close(30 * time.Second) })
	return p
}

type fixture struct {
	t      testing.TB
	db     *pgtest.DB
	broker *broker
	txnID  string
	clock  *testclock.Clock
	prod   *kafka.Producer
	s      delivery.Session
	d      *delivery.Dispatcher
	reg    *prometheus.Registry
	msg    delivery.Lane
	schd   delivery.Lane
	// tune changes the producer's sarama configuration (kafka.Config) before it is made.
	tune func(*sarama.Config)
	// logs holds what the dispatcher logged.
	logs *logBuffer
}

// logBuffer is a log sink the dispatcher writes and a test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type options struct {
	// on makes the broker (default sharedBroker) with msgConfigs on the msg topic.
	on          func(t testing.TB, msgConfigs map[string]string) *broker
	msgConfigs  map[string]string
	maxAttempts int
	sendTimeout time.Duration
	msgLimit    int
	wrap        func(delivery.Sink) delivery.Sink
	poll        time.Duration
	readTimeout time.Duration
	schdLimit   int
	tune        func(*sarama.Config)
}

func setup(t testing.TB, o options) *fixture {
	t.Helper()
	on := o.on
	if on == nil {
		on = sharedBroker
	}
	return newFixture(t, on(t, o.msgConfigs), o)
}

// newFixture is a fixture on b: a database of its own, a producer of a transactional id of its
// own and the dispatcher.
func newFixture(t testing.TB, b *broker, o options) *fixture {
	t.Helper()
	f := &fixture{t: t, db: pgtest.New(t), broker: b, txnID: kafkatest.Name(config.Default().Kafka.TransactionalID),
		clock: testclock.New(t0), reg: prometheus.NewRegistry(), tune: o.tune,
		logs: &logBuffer{}}
	f.s = f.db.Session(t)
	f.prod = f.newProducer()
	f.build(o)
	return f
}

// build (re)creates the dispatcher on the fixture's producer.
func (f *fixture) build(o options) {
	pipe := config.Default().Pipeline
	if o.poll > 0 {
		pipe.PollInterval = o.poll
	}
	if o.maxAttempts > 0 {
		pipe.MaxAttempts = o.maxAttempts
		pipe.Backoff = slices.Repeat([]time.Duration{time.Second}, o.maxAttempts)
	}
	var msgSink, schdSink delivery.Sink = kafka.Target{Producer: f.prod, Topic: f.broker.topicMsg},
		kafka.Target{Producer: f.prod, Topic: f.broker.topicSchd, NullTombstones: true}
	if o.wrap != nil {
		msgSink, schdSink = o.wrap(msgSink), o.wrap(schdSink)
	}
	limit := 500
	if o.msgLimit > 0 {
		limit = o.msgLimit
	}
	f.msg = delivery.Lane{Target: outbox.TargetMsg, Mode: delivery.Ordered, Limit: limit, Sink: msgSink}
	f.schd = delivery.Lane{Target: outbox.TargetSchd, Mode: delivery.Latest, Limit: cmp.Or(o.schdLimit, 500),
		Period: 50 * time.Millisecond, Sink: schdSink}
	tel, err := telemetry.New(context.Background(), "msgx-dispatcher-test")
	if err != nil {
		f.t.Fatal(err)
	}
	f.reg = prometheus.NewRegistry()
	c := config.Default()
	c.Pipeline = pipe
	cfg := delivery.FromConfig(c, f.msg, f.schd)
	cfg.SendTimeout = cmp.Or(o.sendTimeout, 20*time.Second)
	cfg.ReadTimeout = cmp.Or(o.readTimeout, cfg.ReadTimeout)
	cfg.StatsPeriod = 100 * time.Millisecond
	f.d = delivery.New(cfg, f.clock, slog.New(slog.NewTextHandler(f.logs, nil)), tel, f.reg)
}

// add writes events in one transaction through outbox.Add, the producer side's contract.
func (f *fixture) add(events ...outbox.NewEvent) {
	f.t.Helper()
	err := db.WithTx(context.Background(), f.db.Pool, func(tx pgx.Tx) error {
		return outbox.Add(context.Background(), tx, events, f.clock.Now())
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// The events' payloads have the shape of the pump's (the event contract, which consume checks
// every record against): a change event of a FLOP, and the flight document of a state.
func msgEvent(flid string, version int64) outbox.NewEvent {
	return outbox.NewEvent{Target: outbox.TargetMsg, PartitionKey: flid, Type: outbox.TypeUpsert, Version: version,
		Payload: changeEvent(flid, version, ""), MsgID: version}
}

func schdEvent(flid string, version int64, typ string) outbox.NewEvent {
	e := outbox.NewEvent{Target: outbox.TargetSchd, PartitionKey: flid, Type: typ, Version: version, MsgID: version}
	if typ == outbox.TypeUpsert {
		e.Payload = fmt.Appendf(nil, `{"FLID":%q,"STATE":"ACTIVE","STATE_VERSION":%d,"UPDATED_AT":"2026-12-07T00:00:00Z"}`, flid, version)
	}
	return e
}

// changeEvent is a KAFKA:msg change event of a FLOP that changed ESTT; via, when not empty,
// names a code-share child.
func changeEvent(flid string, version int64, via string) []byte {
	b := fmt.Appendf(nil, `{"CHANGED":["ESTT"],"FLID":%q,"MSG_ID":%d,"STATE":"ACTIVE","STATE_VERSION":%d,"STYP":"FLOP","UPDATED_AT":"2026-12-07T00:00:00Z"`,
		flid, version, version)
	if via != "" {
		b = fmt.Appendf(b, `,"VIA":%q`, via)
	}
	return append(b, '}')
}

// row is one msg_event row as the tests check it.
type row struct {
	ID       int64
	FLID     string
	Version  int64
	State    string
	Attempts int
	SentAt   *time.Time
}

func (f *fixture) rows(target string) []row {
	f.t.Helper()
	rs, err := f.db.Pool.Query(context.Background(), `SELECT event_id, partition_key, state_version, state, attempts, sent_at
		FROM msg_event WHERE target = $1 ORDER BY event_id`, target)
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rs, pgx.RowToStructByPos[row])
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) count(target, state string) int {
	f.t.Helper()
	var n int
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM msg_event WHERE target = $1 AND state = $2`,
		target, state).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// drainMsg runs KAFKA:msg rounds, moving the clock past every backoff, until nothing is
// pending or the round budget is spent.
func (f *fixture) drainMsg(ctx context.Context, rounds int) {
	f.t.Helper()
	for range rounds {
		if f.count(outbox.TargetMsg, "PENDING") == 0 {
			return
		}
		if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
			f.t.Fatalf("round: %v", err)
		}
		f.clock.Advance(time.Minute)
	}
}

// consumed is one record read back from the broker.
type consumed struct {
	Key     string
	Value   []byte
	EventID int64
	Version int64
	Type    string
	Headers map[string]string
}

// consume reads topic from the start until want records arrived (or the deadline), as every
// consumer must: read_committed, so aborted transactions stay invisible.
func consume(t testing.TB, addrs []string, topic string, want int) []consumed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []consumed
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d records before the deadline, want %d", topic, len(out), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if err := contracttest.CheckRecord(targetOf(topic), r); err != nil {
				t.Error(err)
			}
			c := consumed{Key: string(r.Key), Value: r.Value, Headers: map[string]string{}}
			for _, h := range r.Headers {
				c.Headers[h.Key] = string(h.Value)
			}
			c.EventID, _ = strconv.ParseInt(c.Headers[kafkarecord.HeaderEventID], 10, 64)
			c.Version, _ = strconv.ParseInt(c.Headers[kafkarecord.HeaderStateVersion], 10, 64)
			c.Type = c.Headers[kafkarecord.HeaderEventType]
			out = append(out, c)
		})
	}
	return out
}

// targetOf is the outbox target whose records topic holds (the tests' topics are named after
// the production ones, msgx.flight.msg and msgx.flight.schd).
func targetOf(topic string) string {
	if strings.Contains(topic, "schd") {
		return outbox.TargetSchd
	}
	return outbox.TargetMsg
}

// checkOrder checks what a consumer of the msg topic sees: per FLID, event ids never go back (a
// duplicate may follow its original, nothing older may follow anything newer), and every
// event the outbox holds as SENT arrived, so there is no gap.
func checkOrder(t testing.TB, got []consumed, sent []row) {
	t.Helper()
	last := map[string]int64{}
	seen := map[int64]bool{}
	for _, c := range got {
		if c.EventID < last[c.Key] {
			t.Errorf("FLID %s: event %d arrived after event %d", c.Key, c.EventID, last[c.Key])
		}
		last[c.Key] = c.EventID
		seen[c.EventID] = true
	}
	for _, r := range sent {
		if r.State == "SENT" && !seen[r.ID] {
			t.Errorf("FLID %s: event %d is SENT but never reached the topic", r.FLID, r.ID)
		}
	}
	ids := map[int64]bool{}
	for _, r := range sent {
		ids[r.ID] = true
	}
	for id := range seen {
		if !ids[id] {
			t.Errorf("event %d on the topic is not in the outbox", id)
		}
	}
}

// hook wraps a sink to run a function around each call (to act in the middle of a send).
type hook struct {
	delivery.Sink
	mu     sync.Mutex
	before func(out []delivery.Outgoing)
	after  func(out []delivery.Outgoing, errs []error) []error
}

func (h *hook) Deliver(ctx context.Context, out []delivery.Outgoing) []error {
	h.mu.Lock()
	before, after := h.before, h.after
	h.mu.Unlock()
	if before != nil {
		before(out)
	}
	errs := h.Sink.Deliver(ctx, out)
	if after != nil {
		errs = after(out, errs)
	}
	return errs
}

func (h *hook) Fence(ctx context.Context) error { return h.Sink.(delivery.Fencer).Fence(ctx) }
func (h *hook) Fenced() bool                    { return h.Sink.(delivery.Fencer).Fenced() }
func (h *hook) Release()                        { h.Sink.(delivery.Fencer).Release() }

// metricValue reads a counter or gauge of the fixture's registry for one target; -1 when absent.
func metricValue(t testing.TB, f *fixture, name, target string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "target" && l.GetValue() == target {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1 // not (yet) reported
}
