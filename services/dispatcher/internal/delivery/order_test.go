package delivery_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/msgexchange/msgexchange/pkg/outbox"
)

// TestOrderPerFLIDUnderFaults interleaves the events of many FLIDs, injects produce errors
// that sarama retries by itself and errors it gives up on, restarts the broker in the middle,
// and reads the topic back: per FLID the events arrive in event_id order with no gap.
// Guards R-INV-13.
func TestOrderPerFLIDUnderFaults(t *testing.T) {
	t.Parallel()
	f := setup(t, options{maxAttempts: 50, msgLimit: 60})
	ctx := t.Context()
	const flids, perFLID = 12, 10
	var all []outbox.NewEvent
	for v := range int64(perFLID) {
		for i := range flids {
			all = append(all, msgEvent(flidName(i), v+1))
		}
	}
	f.add(all[:len(all)/2]...)

	// Retriable: sarama retries inside one send. Not retriable: the send fails, the event
	// backs off and its FLID waits.
	f.broker.cluster.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topicMsg, Partitions: []int32{0}, Err: kerr.NotLeaderForPartition, Count: 3},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topicMsg, Partitions: []int32{1}, Err: kerr.InvalidRecord, Count: 2},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topicMsg, Partitions: []int32{2}, Err: kerr.RequestTimedOut, Count: 2},
	)
	for range 3 {
		if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
			t.Fatal(err)
		}
	}
	if f.count(outbox.TargetMsg, "SENT") == 0 {
		t.Fatal("nothing sent before the restart")
	}

	// The broker restarts with its data; events written meanwhile queue up behind the others.
	f.broker.stop()
	f.add(all[len(all)/2:]...)
	f.broker.start()
	f.broker.cluster.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topicMsg, Partitions: []int32{1}, Err: kerr.InvalidRecord, Count: 3},
	)
	f.drainMsg(ctx, 200)

	rows := f.rows(outbox.TargetMsg)
	for _, r := range rows {
		if r.State != "SENT" || r.SentAt == nil {
			t.Fatalf("event %d of %s is %s after draining", r.ID, r.FLID, r.State)
		}
	}
	checkOrder(t, consume(t, f.broker.addr, topicMsg, len(rows)), rows)
}

func flidName(i int) string { return "F" + string(rune('A'+i%26)) + string(rune('0'+i/26)) }

// TestFailingFLIDDoesNotBlockOthers fails every produce to one partition: the FLID on it keeps
// its events (only its head is attempted), the others go out; once the partition recovers the
// FLID follows in order.
// Guards R-INV-13.
func TestFailingFLIDDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	f := setup(t, options{maxAttempts: 50})
	ctx := t.Context()
	bad := flidsOn(t, "BAD", 0, true, 1)[0]
	good := flidsOn(t, "OK", 0, false, 3)
	for v := int64(1); v <= 4; v++ {
		f.add(msgEvent(bad, v))
		for _, g := range good {
			f.add(msgEvent(g, v))
		}
	}
	h := f.broker.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topicMsg, Partitions: []int32{0},
		Err: kerr.InvalidRecord, Count: -1})
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
	h.Remove()
	f.drainMsg(ctx, 20)
	rows := f.rows(outbox.TargetMsg)
	checkOrder(t, consume(t, f.broker.addr, topicMsg, len(rows)), rows)
	if n := f.count(outbox.TargetMsg, "SENT"); n != len(rows) {
		t.Fatalf("%d of %d sent after recovery", n, len(rows))
	}
}
