package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/notify"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// TestDeadAfterMaxAttempts: a head the broker keeps failing for what it is (INVALID_RECORD, the
// record's own error: charged, docs/dispatcher.md "Broker errors") becomes DEAD at max-attempts
// and is kept with the broker's reason; it keeps blocking its FLID (docs/dispatcher.md) while the
// other FLID goes on, until it is requeued, and then the FLID goes out in order.
//
// kfake: INVALID_RECORD on the partition of one chosen FLID, three times; a real broker refuses a
// record for what it is only for its size, which is a refusal (DEAD at once,
// TestRecordOverTheTopicLimitIsRefused), or for a key-less record on a compacted topic, which
// the dispatcher never sends.
func TestDeadAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	f := setup(t, options{on: fakeBroker, maxAttempts: 3})
	ctx := t.Context()
	bad := flidsOn(t, "BAD", 1, true, 1)[0]
	good := flidsOn(t, "OK", 1, false, 1)[0]
	f.broker.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: f.broker.topicMsg, Partitions: []int32{1},
		Err: kerr.InvalidRecord, Count: 3})
	f.add(msgEvent(bad, 1), msgEvent(good, 1), msgEvent(bad, 2), msgEvent(good, 2))
	for range 5 {
		if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
	}
	rows := f.rows(outbox.TargetMsg)
	want := map[int64]string{rows[0].ID: "DEAD", rows[1].ID: "SENT", rows[2].ID: "PENDING", rows[3].ID: "SENT"}
	for _, r := range rows {
		if r.State != want[r.ID] {
			t.Errorf("event %d (%s v%d) is %s, want %s", r.ID, r.FLID, r.Version, r.State, want[r.ID])
		}
	}
	if rows[0].Attempts != 3 || rows[2].Attempts != 0 {
		t.Errorf("attempts: dead head %d (want 3), event behind it %d (want 0)", rows[0].Attempts, rows[2].Attempts)
	}
	var lastError string
	if err := f.db.Pool.QueryRow(ctx, `SELECT last_error FROM msg_event WHERE event_id = $1`, rows[0].ID).Scan(&lastError); err != nil ||
		!strings.Contains(lastError, sarama.ErrInvalidRecord.Error()) {
		t.Errorf("dead letter's last_error = %q (%v), want the broker's error", lastError, err)
	}
	if got := metricValue(t, f, "msgx_dispatcher_dead_total", outbox.TargetMsg); got != 1 {
		t.Errorf("dead counter = %v, want 1", got)
	}
	if got := metricValue(t, f, "msgx_dispatcher_refused_total", outbox.TargetMsg); got != 0 {
		t.Errorf("refused counter = %v, want 0: INVALID_RECORD is charged, not refused", got)
	}

	if err := outbox.Requeue(ctx, f.db.Pool, rows[0].ID, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.drainMsg(ctx, 10)
	rows = f.rows(outbox.TargetMsg)
	checkOrder(t, consume(t, f.broker.addrs, f.broker.topicMsg, len(rows)), rows)
}

// TestRecordOverTheTopicLimitIsRefused: the broker refuses a record over the topic's
// max.message.bytes (MESSAGE_TOO_LARGE; kafka.max-message-bytes does not know the topic's
// limit, so the record is sent). It would refuse it every time: the head is DEAD at once with
// the broker's reason, nothing is charged to anyone else, the other FLIDs go out and the
// refused FLID's later events wait behind its dead letter. Once the topic's limit is raised and
// the dead letter requeued, the FLID follows in order.
func TestRecordOverTheTopicLimitIsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, options{maxAttempts: 50, msgConfigs: map[string]string{"max.message.bytes": strconv.Itoa(refusedAbove)}})
	ctx := t.Context()
	// Alone in its partition: the broker's refusal is then the record's, not its batch's.
	bad := flidsOn(t, "BAD", 1, true, 1)[0]
	good := flidsOn(t, "OK", 1, false, 3)
	for v := int64(1); v <= 3; v++ {
		f.add(oversized(msgEvent(bad, v)))
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
	rows := f.rows(outbox.TargetMsg)
	for _, r := range rows {
		switch {
		case r.FLID != bad && (r.State != "SENT" || r.Attempts != 0):
			t.Errorf("event %d of healthy FLID %s is %s with %d attempts", r.ID, r.FLID, r.State, r.Attempts)
		case r.FLID == bad && r.Version == 1 && (r.State != "DEAD" || r.Attempts != 1):
			t.Errorf("refused head %d is %s with %d attempts, want DEAD at its first", r.ID, r.State, r.Attempts)
		case r.FLID == bad && r.Version > 1 && (r.State != "PENDING" || r.Attempts != 0):
			t.Errorf("event %d behind the refused head is %s with %d attempts", r.ID, r.State, r.Attempts)
		}
	}
	var lastError string
	if err := f.db.Pool.QueryRow(ctx, `SELECT last_error FROM msg_event WHERE event_id = $1`, rows[0].ID).Scan(&lastError); err != nil ||
		!strings.Contains(lastError, sarama.ErrMessageSizeTooLarge.Error()) || !strings.Contains(lastError, "refused") {
		t.Errorf("dead letter's last_error = %q (%v), want the broker's refusal", lastError, err)
	}
	for name, want := range map[string]float64{"msgx_dispatcher_refused_total": 1, "msgx_dispatcher_dead_total": 1,
		"msgx_dispatcher_failed_attempts_total": 0} {
		if got := metricValue(t, f, name, outbox.TargetMsg); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	f.broker.setTopicConfig(t, f.broker.topicMsg, "max.message.bytes", strconv.Itoa(config.Default().Kafka.MaxMessageBytes))
	if err := outbox.Requeue(ctx, f.db.Pool, rows[0].ID, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.drainMsg(ctx, 20)
	rows = f.rows(outbox.TargetMsg)
	if n := f.count(outbox.TargetMsg, "SENT"); n != len(rows) {
		t.Fatalf("%d of %d sent after the limit was raised", n, len(rows))
	}
	checkOrder(t, consume(t, f.broker.addrs, f.broker.topicMsg, len(rows)), rows)
}

// TestBrokerDown: with the broker gone (killed, a broker of the test's own) the fence fails: a
// failure of the lane, so nothing is marked SENT, no event is charged an attempt (an outage
// never makes a FLID's head DEAD) and the lane backs off; when the broker is back everything
// goes out in order.
func TestBrokerDown(t *testing.T) {
	t.Parallel()
	f := setup(t, options{on: ownBroker, maxAttempts: 50, sendTimeout: 3 * time.Second})
	ctx := t.Context()
	for v := int64(1); v <= 3; v++ {
		f.add(msgEvent("F1", v), msgEvent("F2", v))
	}
	f.broker.own.Kill()
	for range 2 {
		if _, sent, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil || sent != 0 {
			t.Fatalf("round with the broker down: sent %d, %v", sent, err)
		}
		f.clock.Advance(time.Minute)
	}
	for _, r := range f.rows(outbox.TargetMsg) {
		if r.State != "PENDING" || r.SentAt != nil {
			t.Fatalf("event %d is %s with the broker down", r.ID, r.State)
		}
		if r.Attempts != 0 {
			t.Errorf("event %d (v%d) has %d attempts, want 0", r.ID, r.Version, r.Attempts)
		}
	}
	if n := laneFailures(t, f, outbox.TargetMsg, "fence"); n != 2 {
		t.Errorf("lane failures (fence) = %v, want 2", n)
	}
	f.broker.own.Start()
	f.drainMsg(ctx, 100)
	rows := f.rows(outbox.TargetMsg)
	if n := f.count(outbox.TargetMsg, "SENT"); n != len(rows) {
		t.Fatalf("%d of %d sent once the broker is back", n, len(rows))
	}
	noAttempts(t, f)
	checkOrder(t, consume(t, f.broker.addrs, f.broker.topicMsg, len(rows)), rows)
}

// TestDeletedTopicIsAnOutage: the msg topic is deleted under traffic (an operator's mistake, or
// a topic being recreated): the broker answers UNKNOWN_TOPIC_OR_PARTITION for every record,
// which says nothing about the events (an outage in the table of broker errors, kafka.Classify). They stay PENDING and uncharged round after round (with
// one attempt allowed a charge would make them DEAD), and once the topic exists again they go
// out in order.
func TestDeletedTopicIsAnOutage(t *testing.T) {
	t.Parallel()
	f := setup(t, options{maxAttempts: 1})
	ctx := t.Context()
	f.add(msgEvent("F1", 1), msgEvent("F2", 1))
	if _, sent, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil || sent != 2 {
		t.Fatalf("round before the deletion: sent %d, %v", sent, err)
	}
	f.broker.dropTopic(t, f.broker.topicMsg)
	f.add(msgEvent("F1", 2), msgEvent("F2", 2), msgEvent("F1", 3))
	for range 3 {
		if _, sent, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil || sent != 0 {
			t.Fatalf("round without the topic: sent %d, %v", sent, err)
		}
		f.clock.Advance(time.Minute)
	}
	noAttempts(t, f)
	if n := f.count(outbox.TargetMsg, "PENDING"); n != 3 {
		t.Fatalf("%d events PENDING without the topic, want the 3 written after the deletion", n)
	}
	if got := metricValue(t, f, "msgx_dispatcher_unavailable_total", outbox.TargetMsg); got < 3 {
		t.Errorf("unavailable counter = %v, want one per round at least", got)
	}
	// The operator reads why the events wait.
	if logs := f.logs.String(); !strings.Contains(logs, "partition unavailable; its events wait uncharged") ||
		!strings.Contains(logs, sarama.ErrUnknownTopicOrPartition.Error()) {
		t.Errorf("the log does not say the events wait for the missing topic:\n%s", logs)
	}
	// An outage, not the transaction's failure nor a refusal: the lane does not back off and
	// nothing goes DEAD (docs/dispatcher.md, "Broker errors").
	for name, want := range map[string]float64{"msgx_dispatcher_refused_total": 0, "msgx_dispatcher_dead_total": 0,
		"msgx_dispatcher_failed_attempts_total": 0} {
		if got := metricValue(t, f, name, outbox.TargetMsg); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for _, reason := range []string{"fence", "commit", "transaction"} {
		if n := laneFailures(t, f, outbox.TargetMsg, reason); n != 0 {
			t.Errorf("lane failures (%s) = %v, want 0", reason, n)
		}
	}
	f.broker.recreateTopic(t, f.broker.topicMsg)
	f.drainMsg(ctx, 50)
	noAttempts(t, f)
	if n := f.count(outbox.TargetMsg, "SENT"); n != 5 {
		t.Fatalf("%d of 5 events SENT once the topic is back", n)
	}
	// The recreated topic holds what was sent after the deletion, in order per FLID.
	var after []row
	for _, r := range f.rows(outbox.TargetMsg) {
		if r.Version > 1 {
			after = append(after, r)
		}
	}
	checkOrder(t, consumeSettled(t, f.broker.addrs, f.broker.topicMsg, len(after)), after)
}

// TestRestartMidBatch: the dispatcher dies after the broker acknowledged part of a batch and
// before it recorded it. The next process sends those events again: duplicates, never a gap,
// never out of order.
func TestRestartMidBatch(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	crash := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	f := setup(t, options{msgLimit: 40, wrap: func(s delivery.Sink) delivery.Sink {
		return &hook{Sink: s, after: func(out []delivery.Outgoing, errs []error) []error {
			if out[0].Event.Target != outbox.TargetMsg || calls.Add(1) != 3 {
				return errs
			}
			// The process dies here: acknowledged, never recorded.
			cancel()
			close(crash)
			lost := make([]error, len(errs))
			for i := range lost {
				lost[i] = errors.New("process died")
			}
			return lost
		}}
	}})
	for v := int64(1); v <= 6; v++ {
		for i := range 10 {
			f.add(msgEvent(flidName(i), v))
		}
	}
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx, f.s, nil) }()
	select {
	case <-crash:
	case <-time.After(deadline):
		t.Fatal("the third send never happened")
	}
	<-done
	if n := f.count(outbox.TargetMsg, "SENT"); n == 0 || n == 60 {
		t.Fatalf("%d SENT at the crash, want part of the backlog", n)
	}
	for _, r := range f.rows(outbox.TargetMsg) {
		if r.Attempts != 0 {
			t.Fatalf("event %d has %d attempts: a stop is no failed attempt", r.ID, r.Attempts)
		}
	}

	// A new process: its own producer and dispatcher.
	f.prod = f.newProducer()
	f.build(options{msgLimit: 40})
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	go func() { done <- f.d.Run(ctx2, f.s, nil) }()
	testwait.For(t, deadline, "the events sent", func() bool { return f.count(outbox.TargetMsg, "SENT") == 60 })
	cancel2()
	<-done
	rows := f.rows(outbox.TargetMsg)
	// The records of the lost send are on the topic twice.
	got := consume(t, f.broker.addrs, f.broker.topicMsg, 70)
	checkOrder(t, got, rows)
}

// TestNotifyWakesDispatcher: with a poll interval far beyond the test, only the pump's NOTIFY
// (sent by outbox.Add on commit) can make the dispatcher send.
func TestNotifyWakesDispatcher(t *testing.T) {
	t.Parallel()
	f := setup(t, options{poll: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var rounds atomic.Int64
	f.d.OnOrderedRound(func(target string) {
		if target == outbox.TargetMsg {
			rounds.Add(1)
		}
	})
	listener := notify.New(f.db.DSN, slog.New(slog.DiscardHandler), outbox.Channel)
	go func() { _ = listener.Run(ctx) }()
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx, f.s, listener.C()) }()
	// Write only once two rounds are over: the one at start, and the one the listener's wake-up
	// after its LISTEN brings (it wakes once per connection). Written earlier, the events could
	// be sent by one of those, and the test would pass without a NOTIFY.
	testwait.For(t, deadline, "the rounds before the write", func() bool { return rounds.Load() >= 2 })
	f.add(msgEvent("F1", 1), msgEvent("F1", 2))
	testwait.For(t, deadline, "the events sent", func() bool { return f.count(outbox.TargetMsg, "SENT") == 2 })
	cancel()
	<-done
}

// TestBacklogGauges: while running, the dispatcher reports per target the pending events, the
// age of the oldest one and the DEAD ones; a DEAD head holds the event behind it pending.
func TestBacklogGauges(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	f.add(msgEvent("F1", 1), msgEvent("F1", 2), schdEvent("F9", 1, outbox.TypeUpsert))
	f.db.Exec(t, `UPDATE msg_event SET state = 'DEAD', attempts = 5 WHERE target = 'KAFKA:msg' AND state_version = 1`)
	f.clock.Advance(10 * time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx, f.s, nil) }()
	testwait.For(t, deadline, "the events sent", func() bool {
		return metricValue(t, f, "msgx_dispatcher_pending", outbox.TargetMsg) == 1 &&
			metricValue(t, f, "msgx_dispatcher_dead_events", outbox.TargetMsg) == 1 &&
			metricValue(t, f, "msgx_dispatcher_oldest_pending_seconds", outbox.TargetMsg) == 600 &&
			metricValue(t, f, "msgx_dispatcher_sent_total", outbox.TargetSchd) == 1 &&
			metricValue(t, f, "msgx_dispatcher_pending", outbox.TargetSchd) == 0
	})
	cancel()
	<-done
	if rows := f.rows(outbox.TargetMsg); rows[1].State != "PENDING" || rows[1].Attempts != 0 {
		t.Fatalf("event behind the DEAD head: %+v, want untouched", rows[1])
	}
}

// TestEndToEndLatency: a message's end-to-end latency is observed once, when its first event is
// acknowledged, from its enqueue and from its inbox RECEIVED_AT.
func TestEndToEndLatency(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	now := f.clock.Now()
	for _, id := range []int64{1, 2} {
		f.db.Exec(t, `INSERT INTO proc_state (msg_id, state, received_at, enqueued_at, updated_at)
			VALUES ($1, 'PENDING', $2, $3, $3)`, id, now.Add(-40*time.Second), now.Add(-30*time.Second))
	}
	// Message 1 has two events (F1 v1 and F2 v1), message 2 one.
	f.add(msgEvent("F1", 1), msgEvent("F2", 1), msgEvent("F1", 2))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx, f.s, nil) }()
	testwait.For(t, deadline, "three events sent", func() bool { return metricValue(t, f, "msgx_dispatcher_sent_total", outbox.TargetMsg) == 3 })
	cancel()
	<-done
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "msgx_pipeline_e2e_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			got[m.GetLabel()[0].GetValue()] = [2]float64{float64(h.GetSampleCount()), h.GetSampleSum()}
		}
	}
	want := map[string][2]float64{"enqueued": {2, 60}, "received": {2, 80}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("e2e latency (count, sum) by from = %v, want %v", got, want)
	}
}
