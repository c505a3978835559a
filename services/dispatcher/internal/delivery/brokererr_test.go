package delivery_test

import (
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// holder is a sarama interceptor that holds the first record of one key inside the producer (as
// a producer stalled in a GC pause or on a slow host would) until the test releases it.
type holder struct {
	key      string
	once     sync.Once
	held     chan struct{}
	release  chan struct{}
	released sync.Once
}

func newHolder(key string) *holder {
	return &holder{key: key, held: make(chan struct{}), release: make(chan struct{})}
}

func (h *holder) OnSend(m *sarama.ProducerMessage) {
	k, err := m.Key.Encode()
	if err != nil || string(k) != h.key {
		return
	}
	h.once.Do(func() {
		close(h.held)
		<-h.release
	})
}

func (h *holder) let() { h.released.Do(func() { close(h.release) }) }

// TestTransactionTimeoutIsTheLanes: the dispatcher's transaction stays open past its
// transaction.timeout.ms (one record of it held inside the producer after another was
// acknowledged), and the coordinator aborts it and bumps the producer's epoch. The held record
// then meets the broker's answer to an old epoch: the transaction's failure, not the events'
// (docs/dispatcher.md, "Broker errors"). The lane backs off and fences again, nothing is charged
// (with one attempt allowed a charge would make the events DEAD), the events then go out exactly
// once each, in order, and a read_committed consumer never sees the aborted record.
func TestTransactionTimeoutIsTheLanes(t *testing.T) {
	t.Parallel()
	first := flidsOn(t, "A", 0, true, 1)[0]
	// On another partition, so that sarama adds it to the transaction after the abort.
	held := flidsOn(t, "H", 0, false, 1)[0]
	h := newHolder(held)
	t.Cleanup(h.let)
	f := setup(t, options{maxAttempts: 1, sendTimeout: deadline, tune: func(c *sarama.Config) {
		// Short, so that the coordinator aborts the held transaction at its next check
		// (transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s by default); long
		// enough that the other transactions of the test never reach it.
		c.Producer.Transaction.Timeout = 3 * time.Second
		c.Producer.Interceptors = []sarama.ProducerInterceptor{h}
	}})
	ctx := t.Context()
	f.add(msgEvent(first, 1), msgEvent(held, 1), msgEvent(first, 2), msgEvent(held, 2))
	type result struct {
		sent int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		_, sent, err := f.d.SendOrdered(ctx, f.s, f.msg)
		done <- result{sent, err}
	}()
	select {
	case <-h.held:
	case <-time.After(deadline):
		t.Fatal("the record to hold never reached the producer")
	}
	txnID := f.prod.TransactionalID(f.broker.topicMsg)
	testwait.ForState(t, deadline, "the coordinator to abort the timed-out transaction", func() (bool, string) {
		d, err := f.broker.cluster.Admin().DescribeTransactions(ctx, txnID)
		if err != nil {
			return false, err.Error()
		}
		return d[txnID].State == "CompleteAbort", d[txnID].State
	})
	h.let()
	r := <-done
	if r.err != nil || r.sent != 0 {
		t.Fatalf("round of the timed-out transaction: sent %d, %v", r.sent, r.err)
	}
	noAttempts(t, f)
	if n := laneFailures(t, f, outbox.TargetMsg, "transaction"); n != 1 {
		t.Fatalf("lane failures (transaction) = %v, want 1", n)
	}
	if n := f.count(outbox.TargetMsg, "PENDING"); n != 4 {
		t.Fatalf("%d events PENDING after the aborted transaction, want 4", n)
	}
	// The lane backs off: an immediate round reads nothing.
	if read, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil || read != 0 {
		t.Fatalf("round during the lane's backoff read %d, %v", read, err)
	}
	f.drainMsg(ctx, 20)
	noAttempts(t, f)
	rows := f.rows(outbox.TargetMsg)
	if n := f.count(outbox.TargetMsg, "SENT"); n != len(rows) {
		t.Fatalf("%d of %d SENT after the lane fenced again", n, len(rows))
	}
	got := consumeSettled(t, f.broker.addrs, f.broker.topicMsg, len(rows))
	checkOrder(t, got, rows)
	if len(got) != len(rows) {
		t.Errorf("a read_committed consumer sees %d records, want the %d events once each: %+v", len(got), len(rows), got)
	}
}
