package delivery_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// holdProduce makes the cluster hold Produce requests that pass the filter until release is
// closed; held is closed when the first one arrived.
func holdProduce(c *kfake.Cluster, filter func() bool) (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if filter() {
			once.Do(func() { close(held) })
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	return held, release
}

// TestNewTermFencesPreviousHolder: the old holder's record is held by the broker while its
// round waits; the term ends, and the next holder, another process, sends the FLID's events;
// then the broker takes the old request. Consumers must not see the old record after the newer
// ones: the new term's fence makes the broker refuse it, so the old round fails.
// Guards R-INV-15.
//
// kfake: the broker must hold one chosen Produce request while it serves the next holder's
// fence and records; a real broker paused or stopped (kafkatest.Own) would hold the next holder
// too.
func TestNewTermFencesPreviousHolder(t *testing.T) {
	t.Parallel()
	f := setup(t, options{on: fakeBroker, sendTimeout: time.Minute})
	ctx := t.Context()
	f.add(msgEvent("F1", 1))
	var first atomic.Bool
	first.Store(true)
	held, release := holdProduce(f.broker.fake, func() bool { return first.Swap(false) })
	old, oldLane := f.d, f.msg
	oldSent := make(chan int, 1)
	go func() {
		_, sent, _ := old.SendOrdered(ctx, f.s, oldLane)
		oldSent <- sent
	}()
	<-held
	// The old term is over (in service its lock connection is gone); the new holder, a new
	// process with its own producer, takes over.
	f.prod = f.newProducer()
	f.build(options{sendTimeout: 30 * time.Second})
	f.add(msgEvent("F1", 2))
	f.drainMsg(ctx, 10)
	if n := f.count(outbox.TargetMsg, "SENT"); n != 2 {
		t.Fatalf("%d of 2 events SENT by the new holder", n)
	}
	close(release)
	if n := <-oldSent; n != 0 {
		t.Fatalf("the deposed holder's round marked %d events: its late record was accepted", n)
	}
	got := consumeSettled(t, f.broker.addrs, f.broker.topicMsg, 2)
	checkOrder(t, got, f.rows(outbox.TargetMsg))
	if len(got) != 2 {
		t.Fatalf("topic holds %d records, want exactly the new holder's 2: %+v", len(got), got)
	}
}

// consumeSettled reads topic like consume and then goes on reading for a few seconds, so that a
// record landing late shows up too.
func consumeSettled(t testing.TB, addrs []string, topic string, want int) []consumed {
	t.Helper()
	got := consume(t, addrs, topic, want)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	n := 0
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if n++; n > len(got) {
				if err := contracttest.CheckRecord(targetOf(topic), r); err != nil {
					t.Error(err)
				}
				c := consumed{Key: string(r.Key), Value: r.Value, Headers: map[string]string{}}
				for _, h := range r.Headers {
					c.Headers[h.Key] = string(h.Value)
				}
				c.EventID, _ = strconv.ParseInt(c.Headers[kafkarecord.HeaderEventID], 10, 64)
				got = append(got, c)
			}
		})
	}
	return got
}

// coordinator is the node that coordinates the transactional id.
func coordinator(t testing.TB, addrs []string, txnID string) int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1 // transaction
	req.CoordinatorKey = txnID
	req.CoordinatorKeys = []string{txnID}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Coordinators) > 0 {
		return resp.Coordinators[0].NodeID
	}
	return resp.NodeID
}

// TestSlowPartitionDoesNotFailHealthyFLIDs: the leader of one partition holds every produce
// request. That is an outage of the partition, not the event's failure: the FLID on it waits,
// uncharged and PENDING, however long; the FLIDs on the healthy partitions are all sent and none
// waits for the slow one.
//
// kfake: the fault is one partition leader of three brokers that holds every Produce request
// while the transaction coordinator and the other leaders answer; the real broker here is one
// node, which pausing (kafkatest.Own) would stall as a whole, coordinator included.
func TestSlowPartitionDoesNotFailHealthyFLIDs(t *testing.T) {
	t.Parallel()
	b := fakeCluster(t, 3)
	c := b.fake
	f := newFixture(t, b, options{maxAttempts: 4, sendTimeout: 2 * time.Second})
	// The slow broker is not the transaction coordinator: a coordinator that does not answer
	// stalls every transaction of the lane, and then no partition can be told from another
	// (docs/dispatcher.md).
	coord := coordinator(t, b.addrs, f.prod.TransactionalID(b.topicMsg))
	slow := (coord + 1) % 3
	for p := int32(0); p < partitions; p++ {
		if err := c.MoveTopicPartition(b.topicMsg, p, (slow+p)%3); err != nil {
			t.Fatal(err)
		}
	}
	_, release := holdProduce(c, func() bool { return c.CurrentNode() == slow })
	defer close(release)

	bad := flidsOn(t, "BAD", 0, true, 1)[0]
	good := flidsOn(t, "OK", 0, false, 4)
	f.add(msgEvent(bad, 1))
	for v := int64(1); v <= 3; v++ {
		for _, g := range good {
			f.add(msgEvent(g, v))
		}
	}
	for range 5 {
		if _, _, err := f.d.SendOrdered(t.Context(), f.s, f.msg); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
	}
	for _, r := range f.rows(outbox.TargetMsg) {
		switch {
		case r.FLID == bad && (r.State != "PENDING" || r.Attempts != 0):
			t.Errorf("event of the FLID on the slow partition: %s with %d attempts, want PENDING and uncharged", r.State, r.Attempts)
		case r.FLID != bad && r.State != "SENT":
			t.Errorf("event %d of healthy FLID %s: %s with %d attempts, want SENT", r.ID, r.FLID, r.State, r.Attempts)
		}
	}
	if got := metricValue(t, f, "msgx_dispatcher_unavailable_total", outbox.TargetMsg); got < 5 {
		t.Errorf("unavailable counter = %v, want one per round at least", got)
	}
}

// TestStopBetweenWavesSendsNothingMore: a stop that arrives after a wave was recorded hands the
// sink no further wave.
func TestStopBetweenWavesSendsNothingMore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var calls atomic.Int32
	f := setup(t, options{wrap: func(s delivery.Sink) delivery.Sink {
		return &hook{Sink: s, after: func(out []delivery.Outgoing, errs []error) []error {
			calls.Add(1)
			return errs
		}}
	}})
	f.add(msgEvent("F1", 1), msgEvent("F1", 2), msgEvent("F1", 3))
	// The stop arrives right after the first wave's outcome was recorded (the round's third
	// database call: the read, the fence, the mark).
	s := &stopAfter{Session: f.s, n: 3, stop: cancel}
	if _, sent, err := f.d.SendOrdered(ctx, s, f.msg); !errors.Is(err, context.Canceled) || sent != 1 {
		t.Fatalf("stopped round: sent %d, %v; want the first wave marked and context.Canceled", sent, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d sends after the stop, want none", n-1)
	}
}

// stopAfter runs stop after the n-th Do call.
type stopAfter struct {
	delivery.Session
	calls atomic.Int32
	n     int32
	stop  func()
}

func (s *stopAfter) Do(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	err := s.Session.Do(ctx, fn)
	if s.calls.Add(1) == s.n {
		s.stop()
	}
	return err
}

// TestSchdNoStarvation: a FLID whose state changes faster than the flush keeps its place in
// the queue: the flush takes the longest waiting rows first, not the newest event_id.
func TestSchdNoStarvation(t *testing.T) {
	t.Parallel()
	f := setup(t, options{schdLimit: 1})
	ctx := t.Context()
	f.add(schdEvent("BUSY", 1, outbox.TypeUpsert))
	f.clock.Advance(time.Second)
	f.add(schdEvent("QUIET", 1, outbox.TypeUpsert))
	for v := int64(2); v <= 4; v++ {
		f.clock.Advance(time.Second)
		f.add(schdEvent("BUSY", v, outbox.TypeUpsert))
	}
	if n, err := f.d.FlushLatest(ctx, f.s, f.schd); err != nil || n != 1 {
		t.Fatalf("flush: %d, %v", n, err)
	}
	got := consume(t, f.broker.addrs, f.broker.topicSchd, 1)
	if got[0].Key != "BUSY" || got[0].Version != 4 {
		t.Fatalf("first flush sent %s v%d, want BUSY (pending longest) at v4", got[0].Key, got[0].Version)
	}
	// Once sent, a new state of BUSY queues behind QUIET.
	f.clock.Advance(time.Second)
	f.add(schdEvent("BUSY", 5, outbox.TypeUpsert))
	if n, err := f.d.FlushLatest(ctx, f.s, f.schd); err != nil || n != 1 {
		t.Fatalf("flush: %d, %v", n, err)
	}
	for _, r := range f.rows(outbox.TargetSchd) {
		if want := map[string]string{"BUSY": "PENDING", "QUIET": "SENT"}[r.FLID]; r.State != want {
			t.Errorf("after the second flush %s is %s, want %s", r.FLID, r.State, want)
		}
	}
}

// TestPendingReadBounded: a read that the database does not answer (the table is locked) ends
// at the read timeout instead of holding the round, and the lock connection, forever; the
// connection stays open (a lock connection's query is cancelled, not cut, R-LEADER-2).
func TestPendingReadBounded(t *testing.T) {
	t.Parallel()
	f := setup(t, options{readTimeout: 500 * time.Millisecond})
	ctx := t.Context()
	f.add(msgEvent("F1", 1))
	tx, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE msg_event IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := f.d.SendOrdered(ctx, f.s, f.msg)
		done <- err
	}()
	select {
	case err := <-done:
		// The server cancels the statement at the timeout (57014); only a server that ignored
		// the cancel request would leave the client's deadline to end it.
		var pgErr *pgconn.PgError
		if !errors.Is(err, context.DeadlineExceeded) && (!errors.As(err, &pgErr) || pgErr.Code != "57014") {
			t.Fatalf("blocked read: %v, want the read timeout", err)
		}
	case <-time.After(deadline):
		t.Fatal("the read of a round is not bounded")
	}
	if err := f.s.Do(ctx, func(conn *pgx.Conn) error { return conn.Ping(ctx) }); err != nil {
		t.Fatalf("the session after the bounded read: %v", err)
	}
}

// lostLock is a session whose lock connection is gone by the time the work runs on it (the
// fault the lock check after a fence exists for).
type lostLock struct{ db *pgtest.DB }

func (s lostLock) Do(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, s.db.DSN)
	if err != nil {
		return err
	}
	_ = conn.Close(ctx)
	return fn(conn)
}

// TestFenceWithoutTheLockIsNotUsed: when the lock connection fails right after the fence, the
// holder may have fenced its successor; the new producer is dropped unused and the round
// fails without charging anyone.
func TestFenceWithoutTheLockIsNotUsed(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := setup(t, options{wrap: func(s delivery.Sink) delivery.Sink {
		return &hook{Sink: s, before: func([]delivery.Outgoing) { calls.Add(1) }}
	}})
	f.add(msgEvent("F1", 1))
	// The read works on the session; only the fence meets the lost lock.
	s := &splitSession{read: f.s, rest: lostLock{f.db}}
	if _, _, err := f.d.SendOrdered(t.Context(), s, f.msg); err == nil {
		t.Fatal("a round whose fence could not prove the lock succeeded")
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d sends with a producer fenced without the lock", n)
	}
	if f.msg.Sink.(delivery.Fencer).Fenced() {
		t.Fatal("the producer fenced without the lock is kept")
	}
	if rows := f.rows(outbox.TargetMsg); rows[0].State != "PENDING" || rows[0].Attempts != 0 {
		t.Fatalf("event after the lost fence: %+v, want PENDING with no attempt", rows[0])
	}
}

// splitSession serves the first Do from read and the others from rest.
type splitSession struct {
	read, rest delivery.Session
	calls      atomic.Int32
}

func (s *splitSession) Do(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	if s.calls.Add(1) == 1 {
		return s.read.Do(ctx, fn)
	}
	return s.rest.Do(ctx, fn)
}
