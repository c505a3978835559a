// Package delivery drains the outbox (msg_event) to its targets (the R-OUTBOX rules). Each target is
// a Lane: an ordered lane (KAFKA:msg) sends each FLID's events in event_id order, one after the
// other, on every wake-up; a latest-state lane (KAFKA:schd) sends up to a limit of rows every
// period. Events are marked SENT only after the target acknowledged them: delivery is at
// least once, and never out of order within a FLID.
package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/retry"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Outgoing is one event on its way to a target, with the trace context of its send span.
type Outgoing struct {
	Event outbox.Event
	Trace telemetry.TraceContext
}

// Sink writes events to one target and returns one error per event (nil = acknowledged).
// Deliver must return by ctx's deadline; an event without an answer by then is an error. The
// lane never hands a Sink two events of one FLID in one call, and gives it the next event of a
// FLID only after the previous one was acknowledged. An error wrapping ErrNotAttempted is not
// the event's own failure (another event of the call failed, or the sink never sent it): it is
// not counted as an attempt. An error wrapping ErrLaneFailed (made by LaneFailure) is the
// target's failure, not the event's (a transaction's commit failed): it is not counted either,
// and the lane backs off.
type Sink interface {
	Deliver(ctx context.Context, out []Outgoing) []error
}

// ErrNotAttempted marks an event a Sink did not attempt on its own account.
var ErrNotAttempted = errors.New("delivery: not attempted")

// ErrLaneFailed marks a failure of the lane's target as a whole (a fence, a commit), which says
// nothing about the events: they are not charged an attempt, so an outage of the target's
// coordinator can never make them DEAD; the lane backs off instead.
var ErrLaneFailed = errors.New("delivery: the lane failed")

// ErrRefused marks an event its target refuses for what it is, before sending it or on the
// broker's answer (a record larger than the broker accepts): no retry can deliver it, and retrying would only spend the event's
// attempts and the lane's sends on a certain refusal. The event goes DEAD at once with the reason,
// the dead letter an operator requeues once the cause is gone (docs/dispatcher.md).
var ErrRefused = errors.New("delivery: refused by the target")

// Refusal wraps err as the target's refusal of the event (ErrRefused).
func Refusal(err error) error { return fmt.Errorf("%w: %w", ErrRefused, err) }

// laneError is a lane failure with its reason, the label of msgx_dispatcher_lane_failures_total.
type laneError struct {
	reason string
	err    error
}

// ErrUnavailable marks an event whose partition could not take it (no leader, no answer, a
// broken connection, a coordinator not available), or that the brokers refuse to this client (an
// ACL): an outage of the broker or of its configuration, not the event's failure. It is not charged an
// attempt; its FLID waits for the next round like one that failed, so the healthy FLIDs of the
// same transaction go out in the next wave without it.
var ErrUnavailable = errors.New("delivery: partition unavailable")

// LaneFailure wraps err as a failure of the lane (ErrLaneFailed) for the given reason.
func LaneFailure(reason string, err error) error { return &laneError{reason: reason, err: err} }

func (e *laneError) Error() string        { return fmt.Sprintf("%s: %s: %v", ErrLaneFailed, e.reason, e.err) }
func (e *laneError) Unwrap() error        { return e.err }
func (e *laneError) Is(target error) bool { return target == ErrLaneFailed }

// Fencer is a Sink whose writes must be fenced against the previous holder of the role (the
// Kafka sink: a transactional producer per term). Before a send finds it unfenced, the lane
// calls Fence on the role's lock connection and checks afterwards that the connection still
// holds the lock, so a holder's fence always comes after every earlier holder's and before
// every later one's. Release drops the term's fence when the term ends.
type Fencer interface {
	Fence(ctx context.Context) error
	Fenced() bool
	Release()
}

// Mode is how a lane reads its target.
type Mode int

const (
	// Ordered sends every event, per FLID in event_id order (KAFKA:msg, R-OUTBOX-2).
	Ordered Mode = iota
	// Latest sends the latest state per FLID every period (KAFKA:schd, R-OUTBOX-4).
	Latest
)

// Lane is one outbox target and where its events go.
type Lane struct {
	Target string // the outbox target, e.g. outbox.TargetMsg
	Sink   Sink
	Mode   Mode
	// Limit bounds the events of one round; Period is a Latest lane's flush period.
	Limit  int
	Period time.Duration
}

// Session gives exclusive use of the dispatcher role's lock connection (leader.Session), so a
// deposed dispatcher cannot mark events.
type Session = db.Doer

// Config is what delivery needs of the configuration.
type Config struct {
	// PollInterval is how often the lanes look for events when no wake-up comes.
	PollInterval time.Duration
	// Gather is the least time from the start of an Ordered lane's round to the start of the
	// next one a wake-up brings (0: none). Under a backlog the pump commits a message every few
	// milliseconds and each commit wakes the lane: a round per wake-up would send one or two
	// events at the whole cost of a round (a read, a produce, a mark), which takes the CPU the
	// pump needs on a small machine. Waiting out the rest of Gather sends what was committed
	// meanwhile in one round. An idle lane's first wake-up starts a round at once, so a
	// message arriving alone waits nothing (docs/performance.md).
	Gather time.Duration
	// Retry paces a failing event's attempts and a failing partition's rounds, and says when
	// an event is DEAD.
	Retry retry.Policy
	Lanes []Lane
	// SendTimeout bounds one Deliver call: an event unanswered by then is a failed attempt.
	SendTimeout time.Duration
	// ReadTimeout bounds the read of a round's batch.
	ReadTimeout time.Duration
	// StatsPeriod is how often the backlog gauges are refreshed.
	StatsPeriod time.Duration
}

// FromConfig is the dispatcher's configuration from the service's (pkg/config's registry),
// with the lanes the service wires.
func FromConfig(c config.Config, lanes ...Lane) Config {
	return Config{
		PollInterval: c.Pipeline.PollInterval,
		Gather:       c.Dispatcher.Gather,
		Retry:        c.Pipeline.Retry(),
		Lanes:        lanes,
		SendTimeout:  c.Kafka.SendTimeout,
		ReadTimeout:  c.Dispatcher.ReadTimeout,
		StatsPeriod:  c.Dispatcher.StatsPeriod,
	}
}

// Dispatcher runs the lanes.
type Dispatcher struct {
	cfg       Config
	clock     clock.Clock
	logger    *slog.Logger
	telemetry *telemetry.Telemetry
	metrics   *metrics

	mu    sync.Mutex
	lanes map[string]*laneBackoff

	// roundDone, when set (tests only, before Run), is told each time an Ordered lane has
	// finished a round and is about to wait for a wake-up or its poll.
	roundDone func(target string)
}

// laneBackoff is a lane's run of failures and when it may send again.
type laneBackoff struct {
	failures int
	until    time.Time
}

const (
	minPoll = 50 * time.Millisecond
	// markTimeout bounds recording the outcome of a send. It runs even when the work is being
	// stopped, so that acknowledged events are not sent again after a restart.
	markTimeout = 5 * time.Second
	// fenceTimeout bounds a fence, which holds the lock connection without a query: well
	// below its 10 s idle timeout.
	fenceTimeout = 5 * time.Second
	// lockCheckTimeout bounds the query that proves the lock was held after a fence; with the
	// fence it stays below the lock connection's idle timeout.
	lockCheckTimeout = 2 * time.Second
	// retriesPerWave bounds how often a wave is sent again without the events that failed on
	// their own account, for the events that were only aborted with them.
	retriesPerWave = 3
)

// New builds a dispatcher and registers its metrics; cfg comes from FromConfig. It panics on a lane without a Sink or a
// limit, or a Latest lane without a period: wiring mistakes.
func New(cfg Config, clk clock.Clock, logger *slog.Logger, tel *telemetry.Telemetry, reg prometheus.Registerer) *Dispatcher {
	for _, l := range cfg.Lanes {
		if l.Sink == nil || l.Limit <= 0 || (l.Mode == Latest && l.Period <= 0) {
			panic(fmt.Sprintf("delivery: lane %s is incomplete", l.Target))
		}
	}
	return &Dispatcher{cfg: cfg, clock: clk, logger: logger, telemetry: tel, metrics: newMetrics(reg, cfg.Lanes),
		lanes: map[string]*laneBackoff{}}
}

// Run delivers until ctx ends: each Ordered lane on every wake-up and poll interval, each
// Latest lane every period, and the backlog gauges every StatsPeriod. It releases the sinks'
// fences when it returns: the next term (here or in another process) fences again, and that
// fence aborts or refuses whatever this term's producer may still be retrying.
func (d *Dispatcher) Run(ctx context.Context, s Session, wake <-chan struct{}) error {
	g, gctx := errgroup.WithContext(ctx)
	wakes := make([]chan struct{}, len(d.cfg.Lanes))
	for i, lane := range d.cfg.Lanes {
		wakes[i] = make(chan struct{}, 1)
		g.Go(func() error {
			if lane.Mode == Latest {
				return d.runLatest(gctx, s, lane)
			}
			return d.runOrdered(gctx, s, lane, wakes[i])
		})
	}
	g.Go(func() error {
		for {
			select {
			case <-gctx.Done():
				return gctx.Err()
			case <-wake:
				for _, w := range wakes {
					select {
					case w <- struct{}{}:
					default:
					}
				}
			}
		}
	})
	g.Go(func() error { return d.runStats(gctx, s) })
	err := g.Wait()
	for _, lane := range d.cfg.Lanes {
		if f, ok := lane.Sink.(Fencer); ok {
			f.Release()
		}
	}
	return err
}

func (d *Dispatcher) runOrdered(ctx context.Context, s Session, lane Lane, wake <-chan struct{}) error {
	poll := time.NewTicker(max(d.cfg.PollInterval, minPoll))
	defer poll.Stop()
	var began time.Time
	for {
		if wait := d.cfg.Gather - d.clock.Now().Sub(began); wait > 0 && !clock.Sleep(ctx, wait) {
			return ctx.Err()
		}
		began = d.clock.Now()
		for {
			read, sent, err := d.SendOrdered(ctx, s, lane)
			if err != nil && ctx.Err() == nil {
				d.logger.ErrorContext(ctx, "delivery round failed", "target", lane.Target, "err", err)
			}
			// A full batch that made progress means more is waiting; anything else waits for
			// the next wake-up or poll, so a blocked backlog never spins.
			if err != nil || read < lane.Limit || sent == 0 {
				break
			}
		}
		if d.roundDone != nil {
			d.roundDone(lane.Target)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-poll.C:
		}
	}
}

func (d *Dispatcher) runLatest(ctx context.Context, s Session, lane Lane) error {
	flush := time.NewTicker(lane.Period)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-flush.C:
		}
		if _, err := d.FlushLatest(ctx, s, lane); err != nil && ctx.Err() == nil {
			d.logger.ErrorContext(ctx, "flush failed", "target", lane.Target, "err", err)
		}
	}
}

// SendOrdered runs one round of an Ordered lane: it reads a frozen batch and sends it in
// waves, the i-th wave carrying the i-th event of every FLID still going, so an event leaves
// only after its predecessor was acknowledged; a FLID whose event fails stops for this round
// and the others go on. It returns how many events it read and how many it marked SENT.
func (d *Dispatcher) SendOrdered(ctx context.Context, s Session, lane Lane) (read, sent int, err error) {
	if d.backingOff(lane) {
		return 0, 0, nil
	}
	batch, err := d.pending(ctx, s, lane)
	if err != nil {
		return 0, 0, err
	}
	var order []string
	queues := map[string][]outbox.Event{}
	for _, e := range batch {
		if _, ok := queues[e.PartitionKey]; !ok {
			order = append(order, e.PartitionKey)
		}
		queues[e.PartitionKey] = append(queues[e.PartitionKey], e)
	}
	for wave := 0; len(order) > 0; wave++ {
		// A stop between waves sends nothing more: the next holder starts from the outbox.
		if ctx.Err() != nil {
			return len(batch), sent, context.Cause(ctx)
		}
		var events []outbox.Event
		var going []string
		for _, flid := range order {
			if q := queues[flid]; wave < len(q) {
				events = append(events, q[wave])
				going = append(going, flid)
			}
		}
		if len(events) == 0 {
			break
		}
		marked, failed, err := d.send(ctx, s, lane, events)
		sent += marked
		if err != nil {
			return len(batch), sent, err
		}
		order = order[:0]
		for _, flid := range going {
			if !failed[flid] {
				order = append(order, flid)
			}
		}
	}
	return len(batch), sent, nil
}

// FlushLatest runs one round of a Latest lane: the due rows, up to the lane's limit, in one
// call. It returns how many rows it marked SENT.
func (d *Dispatcher) FlushLatest(ctx context.Context, s Session, lane Lane) (int, error) {
	if d.backingOff(lane) {
		return 0, nil
	}
	batch, err := d.pending(ctx, s, lane)
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	marked, _, err := d.send(ctx, s, lane, batch)
	return marked, err
}

func (d *Dispatcher) pending(ctx context.Context, s Session, lane Lane) ([]outbox.Event, error) {
	var batch []outbox.Event
	rctx, cancel := context.WithTimeout(ctx, d.cfg.ReadTimeout)
	defer cancel()
	err := s.Do(rctx, func(conn *pgx.Conn) error {
		var err error
		batch, err = outbox.Pending(rctx, conn, lane.Target, lane.Limit, d.clock.Now())
		return err
	})
	return batch, err
}

// send delivers events (at most one per FLID) and records each outcome: SENT for the
// acknowledged ones, a counted attempt with backoff (or DEAD) for those that failed on their own
// account, DEAD at once for those the sink refused. Events that were only aborted along with a failing one (ErrNotAttempted) are sent
// again at once without it, up to retriesPerWave times; any still left wait, uncounted, for the
// next round. It returns how many it marked SENT and the FLIDs whose event was not sent.
func (d *Dispatcher) send(ctx context.Context, s Session, lane Lane, events []outbox.Event) (int, map[string]bool, error) {
	failed := map[string]bool{}
	marked := 0
	for try := 0; ; try++ {
		m, own, refused, skipped, err := d.attempt(ctx, s, lane, events)
		marked += m
		for _, group := range [][]outbox.Event{own, refused} {
			for _, e := range group {
				failed[e.PartitionKey] = true
			}
		}
		if err != nil || len(skipped) == 0 || len(own) == 0 || try == retriesPerWave {
			for _, e := range skipped {
				failed[e.PartitionKey] = true
			}
			return marked, failed, err
		}
		events = skipped
	}
}

// backingOff reports whether lane is waiting after a lane failure.
func (d *Dispatcher) backingOff(lane Lane) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.lanes[lane.Target]
	return b != nil && d.clock.Now().Before(b.until)
}

// laneFailed backs lane off after a failure of its target, on the pipeline's backoff steps.
func (d *Dispatcher) laneFailed(ctx context.Context, lane Lane, reason string, err error) {
	d.mu.Lock()
	b := d.lanes[lane.Target]
	if b == nil {
		b = &laneBackoff{}
		d.lanes[lane.Target] = b
	}
	b.failures++
	wait := d.cfg.Retry.After(b.failures)
	b.until = d.clock.Now().Add(wait)
	failures := b.failures
	d.mu.Unlock()
	d.metrics.laneFailures.WithLabelValues(lane.Target, reason).Inc()
	d.logger.WarnContext(ctx, "lane failed; events not charged, lane backs off", "target", lane.Target, "reason", reason,
		"failures_in_a_row", failures, "backoff", wait, "err", err)
}

// laneOK ends a lane's run of failures: its target answered for the events.
func (d *Dispatcher) laneOK(lane Lane) {
	d.mu.Lock()
	delete(d.lanes, lane.Target)
	d.mu.Unlock()
}

// fence fences lane's sink for this term if it is not yet: on the lock connection, then a
// query on that connection proves the lock was still held after the fence. It returns the
// sink's error (a lane failure) or an error of the session (the round's).
func (d *Dispatcher) fence(ctx context.Context, s Session, lane Lane) (sinkErr, err error) {
	f, ok := lane.Sink.(Fencer)
	if !ok || f.Fenced() {
		return nil, nil
	}
	err = s.Do(ctx, func(conn *pgx.Conn) error {
		fctx, cancel := context.WithTimeout(ctx, fenceTimeout)
		defer cancel()
		if sinkErr = f.Fence(fctx); sinkErr != nil {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, lockCheckTimeout)
		defer cancel()
		_, err := conn.Exec(cctx, `SELECT 1`)
		return err
	})
	if err != nil {
		// Possibly fenced after the next holder: never send with it.
		f.Release()
		return nil, fmt.Errorf("fence %s: %w", lane.Target, err)
	}
	return sinkErr, nil
}

// attempt makes one Deliver call and records its outcome. It returns how many events it marked
// SENT, the events that failed on their own account (counted), those the sink refused (DEAD)
// and those not attempted.
func (d *Dispatcher) attempt(ctx context.Context, s Session, lane Lane, events []outbox.Event) (marked int, own, refused, skipped []outbox.Event, err error) {
	out, spans := d.startSpans(ctx, lane, events)
	errs, err := d.deliver(ctx, s, lane, out)
	if err != nil {
		for _, sp := range spans {
			sp.RecordError(err)
			sp.End()
		}
		return 0, nil, nil, events, err
	}
	// A stop (not the send deadline) is no attempt of the event's: it is sent again by the next
	// holder without being counted.
	stopping := ctx.Err() != nil
	v := judge(events, errs, stopping)
	for i := range events {
		if errs[i] != nil {
			spans[i].RecordError(errs[i])
		}
		spans[i].End()
	}
	marked, err = d.record(ctx, s, lane, events, errs, v.acked, stopping)
	d.report(ctx, lane, v, marked, len(events))
	if err != nil {
		return marked, v.own, v.refused, v.skipped, fmt.Errorf("record %s delivery: %w", lane.Target, err)
	}
	if stopping {
		return marked, v.own, v.refused, v.skipped, context.Cause(ctx)
	}
	return marked, v.own, v.refused, v.skipped, nil
}

// startSpans starts each event's send span as a child of the trace its message began, and
// carries the span's context in the outgoing record.
func (d *Dispatcher) startSpans(ctx context.Context, lane Lane, events []outbox.Event) ([]Outgoing, []trace.Span) {
	out := make([]Outgoing, len(events))
	spans := make([]trace.Span, len(events))
	for i, e := range events {
		ectx := d.telemetry.Extract(ctx, e.Trace)
		ectx, spans[i] = d.telemetry.Tracer.Start(ectx, "dispatcher.send", trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.Int64("event_id", e.ID), attribute.String("flid", e.PartitionKey),
				attribute.String("target", lane.Target), attribute.Int64("state_version", e.Version)))
		if e.MsgID != nil {
			spans[i].SetAttributes(attribute.Int64("msg_id", *e.MsgID))
		}
		out[i] = Outgoing{Event: e, Trace: d.telemetry.Inject(ectx)}
	}
	return out, spans
}

// deliver fences the lane's target if it needs it and delivers the records: one error per
// record. A fence the sink itself failed is every record's lane failure; err is a failure of
// the fence's own bookkeeping (the role lost), which sends nothing.
func (d *Dispatcher) deliver(ctx context.Context, s Session, lane Lane, out []Outgoing) ([]error, error) {
	sinkErr, err := d.fence(ctx, s, lane)
	if err != nil {
		return nil, err
	}
	start := d.clock.Now()
	defer func() { d.metrics.latency.WithLabelValues(lane.Target).Observe(d.clock.Now().Sub(start).Seconds()) }()
	if sinkErr != nil {
		errs := make([]error, len(out))
		for i := range errs {
			errs[i] = LaneFailure("fence", sinkErr)
		}
		return errs, nil
	}
	sctx, cancel := context.WithTimeout(ctx, d.cfg.SendTimeout)
	defer cancel()
	return lane.Sink.Deliver(sctx, out), nil
}

// verdicts sorts a send's events by what their errors mean.
type verdicts struct {
	acked, own, refused, skipped []outbox.Event
	// laneErr is the first lane failure (the lane backs off), abortErr the first send that was
	// not attempted; unavailable counts the events of partitions without a leader (or refused
	// to this client), unavailableErr is the first one's error, for the operator to read why.
	laneErr, abortErr, unavailableErr error
	unavailable                       int
}

func judge(events []outbox.Event, errs []error, stopping bool) verdicts {
	var v verdicts
	for i, e := range events {
		switch {
		case errs[i] == nil:
			v.acked = append(v.acked, e)
		case errors.Is(errs[i], ErrRefused):
			// Decided before any send, so a stop does not make it any less final.
			v.refused = append(v.refused, e)
		case stopping:
			v.skipped = append(v.skipped, e)
		case errors.Is(errs[i], ErrLaneFailed):
			v.skipped = append(v.skipped, e)
			v.laneErr = cmp.Or(v.laneErr, errs[i])
		case errors.Is(errs[i], ErrNotAttempted):
			v.skipped = append(v.skipped, e)
			v.abortErr = cmp.Or(v.abortErr, errs[i])
		case errors.Is(errs[i], ErrUnavailable):
			v.own = append(v.own, e)
			v.unavailable++
			v.unavailableErr = cmp.Or(v.unavailableErr, errs[i])
		default:
			v.own = append(v.own, e)
		}
	}
	return v
}

// record writes the send's outcome on the lock connection, under its own bound even when the
// term is ending: the acknowledged events SENT, the refused ones DEAD, and a failed attempt
// counted on each event that failed on its own account.
func (d *Dispatcher) record(ctx context.Context, s Session, lane Lane, events []outbox.Event, errs []error, acked []outbox.Event, stopping bool) (int, error) {
	now := d.clock.Now()
	mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer mcancel()
	marked := 0
	err := s.Do(mctx, func(conn *pgx.Conn) error {
		sent, err := outbox.MarkSent(mctx, conn, acked, now)
		if err != nil {
			return err
		}
		marked = sent.Count
		d.observeFirstDeliveries(sent.First, now)
		for i, e := range events {
			if errors.Is(errs[i], ErrRefused) {
				dead, err := outbox.Refuse(mctx, conn, e, errs[i].Error(), now)
				if err != nil {
					return err
				}
				if dead {
					d.metrics.refused.WithLabelValues(lane.Target).Inc()
					d.metrics.dead.WithLabelValues(lane.Target).Inc()
					d.logger.ErrorContext(ctx, "event refused by its target; DEAD at once, not retried", "event_id", e.ID,
						"target", lane.Target, "flid", e.PartitionKey, "err", errs[i])
				}
				continue
			}
			if errs[i] == nil || stopping || errors.Is(errs[i], ErrNotAttempted) || errors.Is(errs[i], ErrLaneFailed) ||
				errors.Is(errs[i], ErrUnavailable) {
				continue
			}
			attempt := e.Attempts + 1
			dead, err := outbox.Fail(mctx, conn, outbox.Failure{Event: e, Reason: errs[i].Error(),
				Next: now.Add(d.cfg.Retry.After(attempt)), MaxAttempts: d.cfg.Retry.MaxAttempts, Now: now})
			if err != nil {
				return err
			}
			d.metrics.failed.WithLabelValues(lane.Target).Inc()
			if dead {
				d.metrics.dead.WithLabelValues(lane.Target).Inc()
				d.logger.ErrorContext(ctx, "event is DEAD after its last attempt; kept as the dead letter", "event_id", e.ID,
					"target", lane.Target, "flid", e.PartitionKey, "attempts", attempt, "err", errs[i])
			} else {
				d.logger.WarnContext(ctx, "send failed; will retry", "event_id", e.ID, "target", lane.Target,
					"flid", e.PartitionKey, "attempt", attempt, "err", errs[i])
			}
		}
		return nil
	})
	return marked, err
}

// report counts the send and moves the lane's health: a lane failure backs the lane off, any
// answer of the target's clears it.
func (d *Dispatcher) report(ctx context.Context, lane Lane, v verdicts, marked, events int) {
	d.metrics.sent.WithLabelValues(lane.Target).Add(float64(marked))
	if v.unavailable > 0 {
		d.metrics.unavailable.WithLabelValues(lane.Target).Add(float64(v.unavailable))
		d.logger.WarnContext(ctx, "partition unavailable; its events wait uncharged", "target", lane.Target, "events", v.unavailable,
			"err", v.unavailableErr)
	}
	switch {
	case v.laneErr != nil:
		reason := "send"
		var le *laneError
		if errors.As(v.laneErr, &le) {
			reason = le.reason
		}
		d.laneFailed(ctx, lane, reason, v.laneErr)
	case len(v.acked) > 0 || len(v.own) > 0:
		// Not a refusal: that is the sink's own verdict, no answer of the target's.
		d.laneOK(lane)
	}
	if v.abortErr != nil && v.laneErr == nil && len(v.own) == 0 && len(v.acked) == 0 {
		// Nothing failed on its own account and nothing went through: without this the send
		// would leave no trace at all.
		d.metrics.aborted.WithLabelValues(lane.Target).Inc()
		d.logger.WarnContext(ctx, "send aborted; no event charged", "target", lane.Target, "events", events, "err", v.abortErr)
	}
}

func (d *Dispatcher) runStats(ctx context.Context, s Session) error {
	t := time.NewTicker(d.cfg.StatsPeriod)
	defer t.Stop()
	for {
		if err := d.observe(ctx, s); err != nil && ctx.Err() == nil {
			d.logger.WarnContext(ctx, "outbox statistics failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// observe refreshes the backlog gauges from the outbox.
func (d *Dispatcher) observe(ctx context.Context, s Session) error {
	stats, err := db.DoV(ctx, s, func(conn *pgx.Conn) (map[string]outbox.TargetStats, error) {
		return outbox.Stats(ctx, conn, d.clock.Now())
	})
	if err != nil {
		return err
	}
	for target, st := range stats {
		d.metrics.pending.WithLabelValues(target).Set(float64(st.Pending))
		d.metrics.deadNow.WithLabelValues(target).Set(float64(st.Dead))
		d.metrics.oldest.WithLabelValues(target).Set(st.OldestPendingAge.Seconds())
	}
	return nil
}

type metrics struct {
	laneFailures *prometheus.CounterVec
	refused      *prometheus.CounterVec
	aborted      *prometheus.CounterVec
	unavailable  *prometheus.CounterVec
	sent         *prometheus.CounterVec
	failed       *prometheus.CounterVec
	dead         *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	pending      *prometheus.GaugeVec
	deadNow      *prometheus.GaugeVec
	oldest       *prometheus.GaugeVec
	e2e          *prometheus.HistogramVec
}

// observeFirstDeliveries ends the end-to-end latency of the messages whose first event was
// just acknowledged: from ingest's enqueue (our clock) and from the inbox's RECEIVED_AT
// (AODB's clock, so skewed by the difference between the two). A negative span, a clock
// ahead of ours, counts as zero.
func (d *Dispatcher) observeFirstDeliveries(first []outbox.FirstDelivery, now time.Time) {
	for _, f := range first {
		d.metrics.e2e.WithLabelValues("enqueued").Observe(max(now.Sub(f.EnqueuedAt), 0).Seconds())
		if f.ReceivedAt != nil {
			d.metrics.e2e.WithLabelValues("received").Observe(max(now.Sub(*f.ReceivedAt), 0).Seconds())
		}
	}
}

func newMetrics(reg prometheus.Registerer, lanes []Lane) *metrics {
	m := &metrics{
		laneFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_dispatcher_lane_failures_total",
			Help: "Failures of a target as a whole (reason fence, commit or transaction): no event charged, the lane backed off."},
			[]string{"target", "reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_dispatcher_refused_total",
			Help: "Events the target refused for what they are (a record over kafka.max-message-bytes, or one the broker refused for its size): DEAD at once."}, []string{"target"}),
		aborted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_dispatcher_aborted_total",
			Help: "Send calls aborted without any event failing on its own account or being acknowledged."}, []string{"target"}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_dispatcher_unavailable_total",
			Help: "Events whose partition could not take them (no leader, no answer): an outage, not charged to the event."},
			[]string{"target"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_dispatcher_sent_total",
			Help: "Events acknowledged by the target and marked SENT (rate() = sent/s)."}, []string{"target"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_dispatcher_failed_attempts_total",
			Help: "Send attempts that failed or got no answer in time, counted on the event."}, []string{"target"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_dispatcher_dead_total",
			Help: "Events that became DEAD after their last attempt."}, []string{"target"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "msgx_dispatcher_send_seconds",
			Help:    "Duration of one send call to a target, until every event in it was answered or the send timeout.",
			Buckets: telemetry.Buckets(0.001, 50)}, []string{"target"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgx_dispatcher_pending",
			Help: "PENDING events per target."}, []string{"target"}),
		deadNow: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgx_dispatcher_dead_events",
			Help: "DEAD events (the dead-letter record) per target; a DEAD KAFKA:msg event blocks its FLID."}, []string{"target"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgx_dispatcher_oldest_pending_seconds",
			Help: "Age of the oldest PENDING event per target."}, []string{"target"}),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "msgx_pipeline_e2e_latency_seconds",
			Help: "End-to-end latency of a message: from the inbox (from=received, the inbox's RECEIVED_AT) or from " +
				"ingest's enqueue (from=enqueued) to Kafka's acknowledgement of its first event.",
			Buckets: telemetry.LatencyBuckets}, []string{"from"}),
	}
	reg.MustRegister(m.laneFailures, m.refused, m.aborted, m.unavailable, m.sent, m.failed, m.dead, m.latency, m.pending, m.deadNow, m.oldest, m.e2e)
	for _, from := range []string{"enqueued", "received"} {
		m.e2e.WithLabelValues(from)
	}
	for _, l := range lanes {
		// Present from the start, so that an alert on a rate sees zero rather than nothing.
		m.sent.WithLabelValues(l.Target)
		m.failed.WithLabelValues(l.Target)
		m.dead.WithLabelValues(l.Target)
		m.aborted.WithLabelValues(l.Target)
		m.unavailable.WithLabelValues(l.Target)
		m.refused.WithLabelValues(l.Target)
		for _, reason := range []string{"fence", "commit", "transaction"} {
			m.laneFailures.WithLabelValues(l.Target, reason)
		}
	}
	return m
}
