package delivery_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
)

// laneFailures reads msgx_dispatcher_lane_failures_total for one target and reason.
func laneFailures(t testing.TB, f *fixture, target, reason string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "msgx_dispatcher_lane_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["target"] == target && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// sendUntilDrained runs KAFKA:msg rounds, moving the clock past every backoff, until nothing is
// pending or the deadline.
func (f *fixture) sendUntilDrained(ctx context.Context) {
	f.t.Helper()
	end := time.Now().Add(deadline)
	for f.count(outbox.TargetMsg, "PENDING") > 0 {
		if time.Now().After(end) {
			f.t.Fatalf("%d events still PENDING at the deadline", f.count(outbox.TargetMsg, "PENDING"))
		}
		if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
			f.t.Fatalf("round: %v", err)
		}
		f.clock.Advance(time.Minute)
		time.Sleep(100 * time.Millisecond)
	}
}

// noAttempts fails the test when an event was charged an attempt or is DEAD.
func noAttempts(t testing.TB, f *fixture) {
	t.Helper()
	for _, r := range f.rows(outbox.TargetMsg) {
		if r.Attempts != 0 || r.State == "DEAD" {
			t.Errorf("event %d (%s) is %s with %d attempts: a failure of the lane was charged to it", r.ID, r.FLID, r.State, r.Attempts)
		}
	}
}

// TestCommitTimeoutIsTheLanes: every record was acknowledged but EndTxn answers only after the
// commit bound (the broker commits it all the same). That is the coordinator's failure, not the
// events': nothing is charged (with one attempt allowed they would all be DEAD), the lane backs
// off, and the events are sent again later (duplicates, in order).
//
// kfake: the broker must commit the transaction and hold the EndTxn answer past the commit
// bound; a real broker paused (kafkatest.Own) could not be paused between the records'
// acknowledgements and the EndTxn request, and would not commit while paused.
func TestCommitTimeoutIsTheLanes(t *testing.T) {
	t.Parallel()
	f := setup(t, options{on: fakeBroker, sendTimeout: 4 * time.Second, maxAttempts: 1})
	ctx := t.Context()
	f.add(msgEvent("F1", 1), msgEvent("F2", 1), msgEvent("F3", 1))
	var first atomic.Bool
	first.Store(true)
	c := f.broker.fake
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if first.Swap(false) {
			c.SleepControl(func() { time.Sleep(8 * time.Second) })
		}
		return nil, nil, false
	})
	if _, sent, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil || sent != 0 {
		t.Fatalf("round with a late commit: sent %d, %v", sent, err)
	}
	noAttempts(t, f)
	if n := laneFailures(t, f, outbox.TargetMsg, "commit"); n != 1 {
		t.Fatalf("lane failures (commit) = %v, want 1", n)
	}
	// The lane backs off: an immediate round reads nothing.
	if read, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil || read != 0 {
		t.Fatalf("round during the lane's backoff read %d, %v", read, err)
	}
	f.sendUntilDrained(ctx)
	noAttempts(t, f)
	rows := f.rows(outbox.TargetMsg)
	checkOrder(t, consumeSettled(t, f.broker.addrs, f.broker.topicMsg, len(rows)), rows)
}

// TestCommitHasItsOwnBound: the records are acknowledged just before the send deadline; the
// commit then gets its own bound rather than what is left of the send timeout, and succeeds.
//
// kfake: the broker must hold the Produce answer and then the EndTxn answer for a set time
// each, so that the records are acknowledged just before the send deadline; a real broker
// cannot delay one chosen answer.
func TestCommitHasItsOwnBound(t *testing.T) {
	t.Parallel()
	f := setup(t, options{on: fakeBroker, sendTimeout: 4 * time.Second, maxAttempts: 5})
	ctx := t.Context()
	f.add(msgEvent("F1", 1))
	c := f.broker.fake
	var produce, endTxn atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !produce.Swap(true) {
			c.SleepControl(func() { time.Sleep(2500 * time.Millisecond) })
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !endTxn.Swap(true) {
			c.SleepControl(func() { time.Sleep(2500 * time.Millisecond) })
		}
		return nil, nil, false
	})
	if _, sent, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil || sent != 1 {
		t.Fatalf("round: sent %d, %v; want the commit to finish on its own bound", sent, err)
	}
	noAttempts(t, f)
}

// TestAbandonedFenceDoesNotOverlap: a fence whose InitProducerID outlives the fence timeout is
// the lane's failure (nothing charged); while sarama still runs it, the next round starts no
// second fence (which the late one would then fence), and once it ended the events go out.
//
// kfake: the broker must hold the InitProducerID request of one transactional id until the test
// releases it, and count those requests; a real broker neither holds one chosen request (a
// paused one holds everything and keeps no count) nor says how many it received.
func TestAbandonedFenceDoesNotOverlap(t *testing.T) {
	t.Parallel()
	f := setup(t, options{on: fakeBroker, sendTimeout: 10 * time.Second, maxAttempts: 1})
	ctx := t.Context()
	c := f.broker.fake
	var inits atomic.Int32
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.InitProducerIDRequest)
		if r.TransactionalID != nil && *r.TransactionalID == f.prod.TransactionalID(f.broker.topicMsg) && inits.Add(1) == 1 {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	f.add(msgEvent("F1", 1), msgEvent("F2", 1))
	if _, sent, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil || sent != 0 {
		t.Fatalf("round with a held fence: sent %d, %v", sent, err)
	}
	noAttempts(t, f)
	f.clock.Advance(time.Minute)
	if _, sent, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil || sent != 0 {
		t.Fatalf("round while the first fence still runs: sent %d, %v", sent, err)
	}
	if n := inits.Load(); n != 1 {
		t.Fatalf("%d InitProducerID requests while the first fence was still running, want 1", n)
	}
	if n := laneFailures(t, f, outbox.TargetMsg, "fence"); n != 2 {
		t.Fatalf("lane failures (fence) = %v, want 2", n)
	}
	close(release)
	f.sendUntilDrained(ctx)
	noAttempts(t, f)
	rows := f.rows(outbox.TargetMsg)
	got := consumeSettled(t, f.broker.addrs, f.broker.topicMsg, len(rows))
	checkOrder(t, got, rows)
}

// TestAbortedSendLeavesATrace: a send whose events were all aborted without any failing on its
// own account charges nothing, and is counted.
func TestAbortedSendLeavesATrace(t *testing.T) {
	t.Parallel()
	f := setup(t, options{wrap: func(s delivery.Sink) delivery.Sink {
		return &hook{Sink: s, after: func(out []delivery.Outgoing, errs []error) []error {
			for i := range errs {
				errs[i] = fmt.Errorf("%w: aborted by the test", delivery.ErrNotAttempted)
			}
			return errs
		}}
	}})
	f.add(msgEvent("F1", 1), msgEvent("F2", 1))
	if _, sent, err := f.d.SendOrdered(t.Context(), f.s, f.msg); err != nil || sent != 0 {
		t.Fatalf("aborted round: sent %d, %v", sent, err)
	}
	noAttempts(t, f)
	if n := metricValue(t, f, "msgx_dispatcher_aborted_total", outbox.TargetMsg); n != 1 {
		t.Fatalf("msgx_dispatcher_aborted_total = %v, want 1", n)
	}
}
