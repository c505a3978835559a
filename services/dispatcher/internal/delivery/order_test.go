package delivery_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// interleaved is perFLID events of each of flids FLIDs, written as the pump writes them: the
// first event of every FLID, then the second, and so on.
func interleaved(flids, perFLID int) []outbox.NewEvent {
	var all []outbox.NewEvent
	for v := range int64(perFLID) {
		for i := range flids {
			all = append(all, msgEvent(flidName(i), v+1))
		}
	}
	return all
}

// TestOrderPerFLIDUnderFaults interleaves the events of many FLIDs, injects produce errors
// that sarama retries by itself and errors it gives up on, writes more events meanwhile, and
// reads the topic back: per FLID the events arrive in event_id order with no gap.
// Guards R-INV-13.
//
// kfake: the faults are NOT_LEADER_FOR_PARTITION and REQUEST_TIMED_OUT answers on one chosen
// partition each, a given number of times, and INVALID_RECORD on another; a real broker of one
// node neither moves a leader nor times out a request on demand, and fails a chosen record only
// for its size, which is a refusal (DEAD at once), not a failure sarama gives up on and the
// event retries.
func TestOrderPerFLIDUnderFaults(t *testing.T) {
	t.Parallel()
	f := setup(t, options{on: fakeBroker, maxAttempts: 50, msgLimit: 60})
	ctx := t.Context()
	topic := f.broker.topicMsg
	all := interleaved(12, 10)
	f.add(all[:len(all)/2]...)

	// Retriable: sarama retries inside one send. Not retriable: the send fails, the event
	// backs off and its FLID waits.
	f.broker.fake.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{0}, Err: kerr.NotLeaderForPartition, Count: 3},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{1}, Err: kerr.InvalidRecord, Count: 2},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{2}, Err: kerr.RequestTimedOut, Count: 2},
	)
	for range 3 {
		if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
			t.Fatal(err)
		}
	}
	if f.count(outbox.TargetMsg, "SENT") == 0 {
		t.Fatal("nothing sent under the first faults")
	}

	// Events written meanwhile queue up behind the others.
	f.add(all[len(all)/2:]...)
	f.broker.fake.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{1}, Err: kerr.InvalidRecord, Count: 3},
	)
	f.drainMsg(ctx, 200)

	rows := f.rows(outbox.TargetMsg)
	for _, r := range rows {
		if r.State != "SENT" || r.SentAt == nil {
			t.Fatalf("event %d of %s is %s after draining", r.ID, r.FLID, r.State)
		}
	}
	checkOrder(t, consume(t, f.broker.addrs, topic, len(rows)), rows)
}

// TestOrderPerFLIDAcrossBrokerCrash: the broker (the test's own) is killed with SIGKILL in the
// middle of a round, before its third wave; events written while it is down queue up behind the
// others; it restarts on its data, and the topic read back holds per FLID the events in
// event_id order with no gap. A crash of the broker is an outage: no event is charged.
// Guards R-INV-13.
func TestOrderPerFLIDAcrossBrokerCrash(t *testing.T) {
	t.Parallel()
	const flids = 12
	var f *fixture
	var waves atomic.Int32
	f = setup(t, options{on: ownBroker, maxAttempts: 50, msgLimit: 60, sendTimeout: 5 * time.Second,
		wrap: func(s delivery.Sink) delivery.Sink {
			return &hook{Sink: s, before: func(out []delivery.Outgoing) {
				if out[0].Event.Target == outbox.TargetMsg && waves.Add(1) == 3 {
					f.broker.own.Kill()
				}
			}}
		}})
	ctx := t.Context()
	all := interleaved(flids, 10)
	f.add(all[:len(all)/2]...)
	if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
		t.Fatal(err)
	}
	// The round read five waves of every FLID; the first two went out before the crash.
	if n := f.count(outbox.TargetMsg, "SENT"); waves.Load() < 3 || n != 2*flids {
		t.Fatalf("%d waves, %d SENT by the round the broker died in; want the crash before the third wave and its first two sent",
			waves.Load(), n)
	}

	f.add(all[len(all)/2:]...)
	f.broker.own.Start()
	f.drainMsg(ctx, 200)

	allSentInOrder(t, f)
}

// allSentInOrder checks, once the outbox was drained, that every KAFKA:msg event is SENT, none
// was charged an attempt, and a read_committed consumer reads every FLID's records in order; it
// returns the rows.
func allSentInOrder(t *testing.T, f *fixture) []row {
	t.Helper()
	rows := f.rows(outbox.TargetMsg)
	for _, r := range rows {
		if r.State != "SENT" || r.SentAt == nil {
			t.Fatalf("event %d of %s is %s after draining", r.ID, r.FLID, r.State)
		}
	}
	noAttempts(t, f)
	checkOrder(t, consume(t, f.broker.addrs, f.broker.topicMsg, len(rows)), rows)
	return rows
}

func flidName(i int) string { return "F" + string(rune('A'+i%26)) + string(rune('0'+i/26)) }

// TestFailingFLIDDoesNotBlockOthers: the broker fails every record of one FLID's partition for
// what it is (INVALID_RECORD: the record's own error, charged). The FLID keeps its events (only
// its head is attempted), the others go out; once the broker takes the records again the FLID
// follows in order.
// Guards R-INV-13.
//
// kfake: INVALID_RECORD on one partition, three times; the one record error a real broker gives
// on demand, a record over the topic's max.message.bytes, is a refusal that makes the head DEAD
// at once (TestRecordOverTheTopicLimitIsRefused), not a failure it retries.
func TestFailingFLIDDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	f := setup(t, options{on: fakeBroker, maxAttempts: 50})
	ctx := t.Context()
	bad := flidsOn(t, "BAD", 0, true, 1)[0]
	good := flidsOn(t, "OK", 0, false, 3)
	f.broker.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: f.broker.topicMsg, Partitions: []int32{0},
		Err: kerr.InvalidRecord, Count: 3})
	for v := int64(1); v <= 4; v++ {
		f.add(msgEvent(bad, v))
		for _, g := range good {
			f.add(msgEvent(g, v))
		}
	}
	for range 3 {
		if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
	}
	for _, r := range f.rows(outbox.TargetMsg) {
		switch {
		case r.FLID != bad && r.State != "SENT":
			t.Errorf("event %d of healthy FLID %s is %s", r.ID, r.FLID, r.State)
		case r.FLID == bad && r.State != "PENDING":
			t.Errorf("event %d of failing FLID %s is %s", r.ID, r.FLID, r.State)
		case r.FLID == bad && r.Version == 1 && r.Attempts != 3:
			t.Errorf("head of failing FLID has %d attempts, want 3", r.Attempts)
		case r.FLID == bad && r.Version > 1 && r.Attempts != 0:
			t.Errorf("event %d behind the failing head was attempted %d times", r.ID, r.Attempts)
		}
	}
	f.drainMsg(ctx, 20)
	rows := f.rows(outbox.TargetMsg)
	checkOrder(t, consume(t, f.broker.addrs, f.broker.topicMsg, len(rows)), rows)
	if n := f.count(outbox.TargetMsg, "SENT"); n != len(rows) {
		t.Fatalf("%d of %d sent after recovery", n, len(rows))
	}
}

// TestOrderPerFLIDAcrossLeaderLoss: on three replicating nodes, the leader of a partition the
// round writes to is killed with SIGKILL after the round's second wave. The partition's
// remaining replicas elect a leader; nothing is charged to the events the election held up,
// every event is SENT once the partition has its new leader, and a read_committed consumer
// reads every FLID in order: acks=all with min.insync.replicas 2 lost nothing the dispatcher
// marked.
func TestOrderPerFLIDAcrossLeaderLoss(t *testing.T) {
	t.Parallel()
	const flids = 12
	var f *fixture
	var waves atomic.Int32
	var killed atomic.Int32
	f = setup(t, options{on: clusterBroker, maxAttempts: 50, msgLimit: 60, sendTimeout: 5 * time.Second,
		wrap: func(s delivery.Sink) delivery.Sink {
			return &hook{Sink: s, before: func(out []delivery.Outgoing) {
				if out[0].Event.Target == outbox.TargetMsg && waves.Add(1) == 3 {
					leader := partitionLeader(t, f.broker, 0)
					killed.Store(leader)
					f.broker.nodes.Node(leader).Kill()
				}
			}}
		}})
	ctx := t.Context()
	all := interleaved(flids, 10)
	f.add(all[:len(all)/2]...)
	if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
		t.Fatal(err)
	}
	if killed.Load() == 0 {
		t.Fatalf("%d waves: the round ended before the third, and no leader was killed", waves.Load())
	}
	testwait.ForState(t, 2*time.Minute, "a new leader of partition 0", func() (bool, string) {
		l := partitionLeader(t, f.broker, 0)
		return l >= 0 && l != killed.Load(), fmt.Sprintf("leader %d (node %d killed)", l, killed.Load())
	})
	f.add(all[len(all)/2:]...)
	f.drainMsg(ctx, 200)
	rows := allSentInOrder(t, f)
	t.Logf("node %d, leader of partition 0, killed after wave %d; %d events SENT in order, none charged", killed.Load(), 2, len(rows))
}

// partitionLeader is the node leading the msg topic's partition p (-1 while none does).
func partitionLeader(t testing.TB, b *broker, p int32) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := b.cluster.Admin().ListTopics(ctx, b.topicMsg)
	if err != nil {
		return -1
	}
	return td[b.topicMsg].Partitions[p].Leader
}

// TestNotEnoughReplicasIsAnOutage: on three replicating nodes with the msg topic at
// min.insync.replicas 3, one node is killed and the in-sync replicas fall below the minimum, so
// the brokers refuse acks=all records (NOT_ENOUGH_REPLICAS). For more rounds than the events'
// attempts would allow, nothing is charged and nothing is DEAD: the shortage is an outage. Once
// the node is back in sync, every event goes out in order.
func TestNotEnoughReplicasIsAnOutage(t *testing.T) {
	t.Parallel()
	const flids, maxAttempts = 6, 3
	f := setup(t, options{on: clusterBroker, msgConfigs: map[string]string{"min.insync.replicas": "3"},
		maxAttempts: maxAttempts, sendTimeout: 5 * time.Second})
	ctx := t.Context()
	down := f.broker.nodes.Servers[0]
	down.Kill()
	testwait.ForState(t, 2*time.Minute, "the in-sync replicas below the minimum", func() (bool, string) {
		n := inSync(t, f.broker)
		return n > 0 && n < 3, fmt.Sprintf("%d in sync", n)
	})
	all := interleaved(flids, 4)
	f.add(all...)
	for range 3 * maxAttempts {
		if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
	}
	if n := f.count(outbox.TargetMsg, "SENT"); n != 0 {
		t.Errorf("%d events SENT with the in-sync replicas below the minimum", n)
	}
	if n := f.count(outbox.TargetMsg, "DEAD"); n != 0 {
		t.Errorf("%d events DEAD after the shortage: an outage was charged to them", n)
	}
	noAttempts(t, f)
	down.Start()
	testwait.ForState(t, 2*time.Minute, "the in-sync replicas back to 3", func() (bool, string) {
		n := inSync(t, f.broker)
		return n == 3, fmt.Sprintf("%d in sync", n)
	})
	f.drainMsg(ctx, 200)
	rows := allSentInOrder(t, f)
	t.Logf("%d rounds with %d of 3 replicas in sync: nothing SENT, charged or DEAD; then %d events in order", 3*maxAttempts, 2, len(rows))
}

// inSync is the fewest in-sync replicas of the msg topic's partitions (0 when unknown).
func inSync(t testing.TB, b *broker) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := b.cluster.Admin().ListTopics(ctx, b.topicMsg)
	if err != nil {
		return 0
	}
	fewest := 0
	for _, p := range td[b.topicMsg].Partitions {
		if fewest == 0 || len(p.ISR) < fewest {
			fewest = len(p.ISR)
		}
	}
	return fewest
}
