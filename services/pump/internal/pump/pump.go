// Package pump processes the inbox messages one at a time in strict msg_id order: the queue
// head is the smallest unfinished message at or below the watermark, and nothing behind it
// runs until it reaches a terminal state (R-PUMP-1, R-PUMP-2). docs/pump.md describes
// the queue semantics, the failure accounting and the recovery of every interruption.
package pump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/retry"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Session gives exclusive use of the connection that holds the pump role's lock: every write
// of the pump runs on it, so a pump that lost its lock cannot commit (leader.Session). A
// failure that ends the session wraps leader.ErrLost. SetBlocked records the outage the pump
// waits out (nil once it is over) for GetStatus, under the session's own role.
type Session interface {
	db.Doer
	SetBlocked(ctx context.Context, b *outage.State) error
}

// Input is one message ready for its business step.
type Input struct {
	MsgID   int64
	Message *sis.Message
	Now     time.Time
	Trace   telemetry.TraceContext
}

// Result is what a processor's business step decided.
type Result struct {
	// Project lists the states to write to the Redis projection after the commit
	// (flight.Outcome.Projected).
	Project []flight.Projected
	// Then are the further transactions of a message too large for one (a schedule snapshot's
	// batches, docs/schedule.md). Each runs in its own transaction after the previous one
	// committed and its states were projected; applied_at is recorded with the last, and only
	// then is the message finished. A failure between two leaves the earlier ones committed
	// and the message unfinished: its re-run decides the whole message again, so every step
	// must find what an earlier run committed and write nothing of it twice.
	Then []Step
	// Trail, when set, is called once the message SUCCEEDED, on the lock connection and outside
	// every business transaction; a failure is logged, never the message's (R-TX-7: a
	// crash may lose a trail row).
	Trail Trail
}

// Trail appends what a message leaves in a log of its own (schd_snap_log).
type Trail func(ctx context.Context, q db.Executor) error

// Decision is a processor's verdict that the message ends without a change, in the shape of
// river's JobCancel: Apply returns it as its error (Skip, Reject), the pump rolls the business
// transaction back, so nothing of the message is applied, and records the decided state
// instead of counting a failed attempt.
type Decision struct {
	State  queue.State      // SKIPPED or DEAD
	Class  queue.ErrorClass // "" or PROTOCOL
	Reason string
	// Trail, when set, is called once the message ended as decided, like Result.Trail.
	Trail Trail
}

func (d *Decision) Error() string {
	if d.Class != "" {
		return fmt.Sprintf("%s(%s): %s", d.State, d.Class, d.Reason)
	}
	return fmt.Sprintf("%s: %s", d.State, d.Reason)
}

// Skip ends the message SKIPPED: it is valid but has nothing to change (an unknown flight, a
// superseded reference message, an unsolicited answer).
func Skip(reason string) *Decision { return &Decision{State: queue.Skipped, Reason: reason} }

// Reject ends the message DEAD(PROTOCOL): it is well-formed but breaks the protocol (RECS
// disagreeing with its records), so no retry could apply it.
func Reject(reason string) *Decision {
	return &Decision{State: queue.Dead, Class: queue.Protocol, Reason: reason}
}

// OverBound ends the message DEAD(MALFORMED): it decoded, but what it would make is over a
// bound of the codec's limits (docs/codec.md §6: a flight whose document would not fit in a
// Kafka record of kafka.max-message-bytes, R-IDENT-5). Like every excess it is the message's
// own, so no retry could apply it; the backfill marks it as any DEAD one.
func OverBound(reason string) *Decision {
	return &Decision{State: queue.Dead, Class: queue.Malformed, Reason: reason}
}

// WithTrail returns d with the trail to append once the message ended as decided.
func (d *Decision) WithTrail(t Trail) *Decision {
	c := *d
	c.Trail = t
	return &c
}

// DecisionOf returns the decision err carries, or nil when err is a failure (or nil).
func DecisionOf(err error) *Decision {
	var d *Decision
	if errors.As(err, &d) {
		return d
	}
	return nil
}

// Step is one further transaction of a message (Result.Then): it writes in tx and returns the
// states to project once tx committed.
type Step func(ctx context.Context, tx pgx.Tx) ([]flight.Projected, error)

// Processor runs step ① of R-TX-3 in tx, which holds the pipeline lock: it loads the
// current state, decides with the pure domain rules and writes the new state with its outbox
// events. It never touches Redis, Kafka or the shared MySQL. An error rolls the whole
// transaction back and counts as a failed attempt (INFRA).
type Processor interface {
	Apply(ctx context.Context, tx pgx.Tx, in Input) (Result, error)
}

// Reprojector is the optional capability of a processor to re-project a message whose step ①
// already committed (proc_state.applied_at): it loads, in tx under the pipeline lock, the
// current full states of the flights the message concerns, DELETED ones included, and decides
// nothing. Such a message is run again after a crash or a projection failure between ① and ③,
// or after an operator's replay of DEAD(EXHAUSTED); applying it a second time would rewind
// newer state and publish its events twice.
type Reprojector interface {
	Reproject(ctx context.Context, tx pgx.Tx, in Input) ([]flight.Flight, error)
}

// Router picks the processor of a decoded message; a nil processor means the kind is legal
// but unsupported, with the reason.
type Router func(m *sis.Message) (Processor, string)

// Projector writes the Redis projection. Each call must be bounded well below the lock
// connection's lease: the pump holds that connection idle while it waits. Probe tells whether
// Redis answers at all, to tell an outage from a failed write.
type Projector interface {
	Write(ctx context.Context, flights []flight.Projected) (int, error)
	Probe(ctx context.Context) error
}

// RawReader reads a message's text from the inbox; a row that does not exist is an error
// wrapping aodb.ErrRowMissing. Each call must be bounded. Probe tells whether the inbox table
// answers a read at all.
type RawReader interface {
	Raw(ctx context.Context, id int64) (string, error)
	Probe(ctx context.Context) error
}

// Termed is the optional capability of a RawReader that works in the background (ReadAhead):
// Run gives it the term's context with Term and calls end before it returns, so nothing the
// reader started outlives the term.
type Termed interface {
	Term(ctx context.Context) (end func())
}

// Config is what the pump needs of the configuration. Zero durations mean the defaults.
type Config struct {
	// PollInterval is how long the pump waits for work when no wake-up comes.
	PollInterval time.Duration
	// HeadAgeAlert is the age of a stuck head that is logged and exported; 0 turns it off.
	HeadAgeAlert time.Duration
	// Retry paces a failing message's attempts and says when it is DEAD; an outage's probes
	// use its waits too.
	Retry              retry.Policy
	Codec              sis.Options
	IdentityDayBounded bool
	// StepTimeout bounds one message's processing step. The inbox and Redis calls have their
	// own, shorter bounds.
	StepTimeout time.Duration
	// RecordTimeout bounds writing an outcome and releasing the pipeline lock.
	RecordTimeout time.Duration
	// BacklogInterval is how often RunBacklog refreshes the backlog gauges.
	BacklogInterval time.Duration
}

// FromConfig is the pump's configuration from the service's: every value, and so every
// default, comes from pkg/config's registry.
func FromConfig(c config.Config) Config {
	return Config{
		PollInterval: c.Pipeline.PollInterval,
		HeadAgeAlert: c.Pipeline.HeadAgeAlert,
		Retry:        c.Pipeline.Retry(),
		Codec: sis.Options{MaxBytes: c.Codec.MaxBytes, MaxDepth: c.Codec.MaxDepth, MaxText: c.Codec.MaxText,
			Zone: c.Airport.Zone},
		IdentityDayBounded: c.Identity.IncludeDayBoundary,
		StepTimeout:        c.Pipeline.StepTimeout,
		RecordTimeout:      c.Pipeline.RecordTimeout,
		BacklogInterval:    c.Pipeline.BacklogInterval,
	}
}

// Pump is the single FIFO worker.
type Pump struct {
	cfg       Config
	inbox     RawReader
	project   Projector
	route     Router
	clock     clock.Clock
	logger    *slog.Logger
	telemetry *telemetry.Telemetry
	metrics   *metrics

	// alerted is the head whose age crossed pipeline.head-age-alert, so it is logged once.
	alerted int64
	// blocked is the outage policy, with the outage the pump is waiting out, if any.
	blocked *outage.Policy
}

// New builds a pump and registers its metrics. cfg comes from FromConfig: a zero bound is
// not read as a default.
func New(cfg Config, in RawReader, proj Projector, route Router, clk clock.Clock, logger *slog.Logger,
	tel *telemetry.Telemetry, reg prometheus.Registerer) *Pump {
	p := &Pump{cfg: cfg, inbox: in, project: proj, route: route, clock: clk, logger: logger, telemetry: tel}
	p.metrics = newMetrics(reg)
	p.blocked = newOutages(clk.Now, logger, reg)
	p.metrics.headAgeAlert.Set(cfg.HeadAgeAlert.Seconds())
	return p
}

// Run processes heads until ctx ends. wake delivers wake-ups (NOTIFY from ingest and replay);
// the poll interval is only the fallback.
func (p *Pump) Run(ctx context.Context, s Session, wake <-chan struct{}) error {
	// next is the head read in the round trip that finished the previous message, for the tick
	// that follows at once; nil otherwise. It starts nil: a head read in an earlier term says
	// nothing of this one, where another holder may have run it.
	var next *queue.Message
	if t, ok := p.inbox.(Termed); ok {
		defer t.Term(ctx)()
	}
	for ctx.Err() == nil {
		wait, following, err := p.tick(ctx, s, next)
		next = following
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			// Failures are recorded where the message is held (processOne); this is only the
			// loop's last line of defence: log and wait, never count.
			p.logger.ErrorContext(ctx, "pump tick failed", "err", err)
			wait = p.cfg.PollInterval
		}
		if wait <= 0 {
			continue
		}
		// A head read before a wait may be stale after it.
		next = nil
		// During an outage a wake-up (new rows, a replay) changes nothing: the head cannot run
		// until the dependency answers, and probing on every enqueue would hammer it.
		wakeup := wake
		if p.blocked.Current() != nil {
			wakeup = nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-wakeup:
		case <-timer.C:
		}
		timer.Stop()
	}
	return ctx.Err()
}

// Tick handles the current head once (R-PUMP-3) and returns how long to wait before the
// next tick (0 = go on at once).
func (p *Pump) Tick(ctx context.Context, s Session) (time.Duration, error) {
	wait, _, err := p.tick(ctx, s, nil)
	return wait, err
}

// tick is Tick. next, when not nil, is the head the previous tick read with its release, in
// the tick that follows it at once in Run's loop: it is taken instead of reading the head
// again, since nothing between the two could have changed it but the other writers of
// proc_state (ingest, replay), whose changes are processed one tick later, as if they had
// committed a moment later. It returns the head this tick read with its release, if any.
func (p *Pump) tick(ctx context.Context, s Session, next *queue.Message) (time.Duration, *queue.Message, error) {
	if !p.blocked.Resume(ctx, term{p, s}) {
		// Still blocked: the next probe after the backoff of the probes so far.
		return p.outageWait(), nil, nil
	}
	var head queue.Message
	var ok bool
	if next != nil {
		head, ok = *next, next.MsgID != 0
	} else if err := s.Do(ctx, func(conn *pgx.Conn) error {
		ctx, cancel := context.WithTimeout(ctx, p.cfg.RecordTimeout)
		defer cancel()
		var err error
		head, ok, err = queue.Head(ctx, conn)
		return err
	}); err != nil {
		return 0, nil, err
	}
	now := p.clock.Now()
	if !ok {
		p.observeHead(ctx, nil, now)
		return p.cfg.PollInterval, nil, nil
	}
	p.observeHead(ctx, &head, now)
	if head.State == queue.Failed && head.NextAttemptAt != nil && head.NextAttemptAt.After(now) {
		// The head waits for its retry; nothing behind it may run (head-of-line blocking). A
		// wake-up (a replay resetting the retry time) ends the wait early.
		return head.NextAttemptAt.Sub(now), nil, nil
	}
	if head.State == queue.Failed && p.cfg.Retry.Exhausted(head.Attempts) {
		// Exhaustion is decided by attempts only (R-PUMP-4), in one statement under the
		// per-message gate that also records the backfill intent. It is decided once the last
		// backoff has passed, so every step of the table fires (R-PUMP-5's start-up check
		// makes the table as long as the attempts).
		changed, err := db.DoV(ctx, s, func(conn *pgx.Conn) (bool, error) {
			ctx, cancel := context.WithTimeout(ctx, p.cfg.RecordTimeout)
			defer cancel()
			return queue.Exhaust(ctx, conn, head.MsgID, p.cfg.Retry.MaxAttempts, now)
		})
		if err == nil && changed {
			p.metrics.finished.WithLabelValues(string(queue.Dead), string(queue.Exhausted)).Inc()
			p.logger.ErrorContext(ctx, "message exhausted its attempts: DEAD(EXHAUSTED), needs an operator", "msg_id", head.MsgID,
				"attempts", head.Attempts, "last_error_class", deref((*string)(head.ErrorClass)), "last_error", deref(head.LastError))
		}
		return 0, nil, err
	}
	recorded, following := p.processOne(ctx, s, head)
	if !recorded {
		// The outcome could not be written although the session is up (a read-only server,
		// say): the message is still the head, and trying again at once would spin.
		return p.cfg.PollInterval, nil, nil
	}
	return p.outageWait(), following, nil
}

// observeHead exports the head's ages and logs once when the head has been failing for
// longer than pipeline.head-age-alert. The age is an alert, never a transition (R-PUMP-4).
func (p *Pump) observeHead(ctx context.Context, head *queue.Message, now time.Time) {
	if head == nil {
		p.metrics.headAge.Set(0)
		p.metrics.headStuck.Set(0)
		return
	}
	p.metrics.headAge.Set(max(now.Sub(head.EnqueuedAt), 0).Seconds())
	var stuck time.Duration
	if head.ProcessingStartedAt != nil {
		stuck = max(now.Sub(*head.ProcessingStartedAt), 0)
	}
	p.metrics.headStuck.Set(stuck.Seconds())
	if alert := p.cfg.HeadAgeAlert; alert > 0 && stuck > alert && p.alerted != head.MsgID {
		p.alerted = head.MsgID
		p.logger.ErrorContext(ctx, "queue head has been failing longer than pipeline.head-age-alert; the queue is blocked behind it",
			"msg_id", head.MsgID, "since_first_attempt", stuck, "attempts", head.Attempts,
			"error_class", deref((*string)(head.ErrorClass)), "last_error", deref(head.LastError))
	}
}

// outcome is the decided transition of one message.
type outcome struct {
	state  queue.State
	class  queue.ErrorClass
	reason string
	// err is the failure behind a FAILED outcome, kept to tell a lost session from a failure
	// of the message.
	err error
	// recorded is set when the business step already committed the terminal state; gone when
	// the message stopped being unfinished under us (another actor got there first).
	recorded, gone bool
	// dependency names what failed for a FAILED outcome caused by a call to the inbox, Redis
	// or PostgreSQL, and verdict is that store's classification: only an outage.Attempt (or
	// an outage.Unsure whose probe answers) is the message's attempt.
	dependency string
	verdict    outage.Verdict
}

// ends reports whether a step's outcome ends the attempt; the zero outcome lets it go on to
// the next step.
func (o outcome) ends() bool { return o.state != "" || o.gone }

func failed(class queue.ErrorClass, reason string, err error) outcome {
	return outcome{state: queue.Failed, class: class, reason: reason, err: err}
}

// failedCall is a FAILED outcome of a call to dependency, classified where it failed.
func failedCall(dependency string, verdict outage.Verdict, reason string, err error) outcome {
	o := failed(queue.Infra, reason, err)
	o.dependency, o.verdict = dependency, verdict
	return o
}

// processOne follows R-PUMP-8. Every outcome is recorded where it is decided, while the
// message is held; a failure caused by the service stopping or by the lost lock is not an
// attempt of the message and is not counted. It reports false when the outcome could not be
// recorded, and returns the next head when the message's release read it.
func (p *Pump) processOne(parent context.Context, s Session, head queue.Message) (recorded bool, next *queue.Message) {
	started := p.clock.Now()
	ctx, cancel := context.WithTimeout(parent, p.cfg.StepTimeout)
	defer cancel()
	ctx = p.telemetry.Extract(ctx, head.Trace)
	ctx, span := p.telemetry.Tracer.Start(ctx, "pump.process", trace.WithAttributes(attribute.Int64("msg_id", head.MsgID)))
	defer span.End()
	defer func() { p.metrics.duration.Observe(p.clock.Now().Sub(started).Seconds()) }()

	m := &message{p: p, s: s, head: head, started: started, span: span}
	o := func() (o outcome) {
		// The attempt's only recover: a panic anywhere in its steps (the processor, the codec)
		// ends here, after the deferred rollback of its transaction and the release of the
		// pipeline lock ran on the way out (R-PUMP-6).
		defer func() {
			if r := recover(); r != nil {
				o = m.panicked(ctx, r)
			}
		}()
		return m.process(ctx)
	}()
	span.SetAttributes(attribute.String("state", string(o.state)))
	if o.class != "" {
		span.SetAttributes(attribute.String("error_class", string(o.class)))
	}
	switch {
	case o.gone:
		p.logger.InfoContext(ctx, "message is no longer unfinished; nothing to record", "msg_id", head.MsgID)
		return true, m.next
	case o.state == queue.Failed && (parent.Err() != nil || errors.Is(o.err, leader.ErrLost)):
		p.logger.InfoContext(ctx, "interrupted by shutdown or lost leadership; the attempt is not counted",
			"msg_id", head.MsgID, "err", o.err)
		return true, m.next
	case o.dependency != "" && p.blocked.Outage(parent, term{p, s}, o.dependency, o.verdict):
		// Not the message's fault: it keeps the head, uncharged, until the dependency answers.
		span.SetAttributes(attribute.String("blocked_on", o.dependency))
		p.blocked.Block(parent, term{p, s}, o.dependency, head.MsgID, o.reason)
		return true, m.next
	}
	// The step's context may have expired (that is the failure being recorded), so the
	// outcome gets its own bound.
	rctx, rcancel := context.WithTimeout(parent, p.cfg.RecordTimeout)
	defer rcancel()
	// Still inside the span: the recording and its log lines belong to the message's trace.
	rctx = trace.ContextWithSpan(rctx, span)
	if err := p.record(rctx, s, head, o, started); err != nil {
		span.SetStatus(codes.Error, err.Error())
		if !errors.Is(err, queue.ErrNotUnfinished) && parent.Err() == nil {
			p.logger.ErrorContext(ctx, "recording the outcome failed; the message stays the head", "msg_id", head.MsgID, "err", err)
			return false, nil
		}
	}
	return true, m.next
}

// withPipelineLock runs fn holding the pipeline lock, a session lock on the lock connection.
// fn sends lock, the statement that takes it, first in its first transaction (db.Pipelined),
// so the lock costs no round trip of its own, and may queue into release statements to send
// ahead of the unlock in the release's round trip. A lock left behind would stop the flight
// history sweep for the rest of the term, so when the release fails (or taking the lock failed
// in a way that may have left it granted) the connection is closed: that drops every lock of
// the session, ends the term (leader.ErrLost) and lets the elector start a clean one.
func (p *Pump) withPipelineLock(ctx context.Context, conn *pgx.Conn, fn func(lock, release *pgx.Batch) error) (err error) {
	lock, release := &pgx.Batch{}, &pgx.Batch{}
	leader.AddLockPipeline(lock)
	defer func() {
		if conn.IsClosed() {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.RecordTimeout)
		defer cancel()
		// Only what fn added when it succeeded: a failed fn's outcome is recorded after the
		// release, by record.
		last := &pgx.Batch{}
		if err == nil {
			last = release
		}
		leader.AddUnlockPipeline(last)
		rerr := conn.SendBatch(rctx, last).Close()
		if rerr != nil && last.Len() > 1 {
			// One of fn's statements failed, and the server skipped the unlock behind it:
			// release the lock on its own (a second unlock of a released lock is harmless).
			if uerr := leader.UnlockPipeline(rctx, conn); uerr != nil {
				rerr = errors.Join(rerr, uerr)
			} else {
				err = errors.Join(err, rerr)
				return
			}
		}
		if rerr != nil {
			_ = conn.Close(rctx)
			err = errors.Join(err, fmt.Errorf("pipeline lock not released, lock connection closed: %w", rerr))
		}
	}()
	return fn(lock, release)
}

// record writes a non-business outcome: a terminal state with its backfill intent in one
// UPDATE, or a counted failure with its retry time.
func (p *Pump) record(ctx context.Context, s Session, head queue.Message, o outcome, started time.Time) error {
	log := p.logger.With("msg_id", head.MsgID, "state", o.state, "error_class", o.class, "reason", o.reason)
	if o.recorded {
		p.metrics.finished.WithLabelValues(string(o.state), string(o.class)).Inc()
		log.DebugContext(ctx, "processed")
		return nil
	}
	now := p.clock.Now()
	var err error
	if o.state == queue.Failed {
		attempt := head.Attempts + 1
		next := now.Add(p.cfg.Retry.After(attempt))
		err = s.Do(ctx, func(conn *pgx.Conn) error {
			return queue.Fail(ctx, conn, queue.Outcome{MsgID: head.MsgID, Class: o.class, Reason: o.reason, Next: next, Started: started, Now: now})
		})
		if err == nil {
			log.WarnContext(ctx, "processing failed; will retry", "attempt", attempt, "next_attempt_at", next)
		}
	} else {
		err = s.Do(ctx, func(conn *pgx.Conn) error {
			return queue.Finish(ctx, conn, queue.Outcome{MsgID: head.MsgID, State: o.state, Class: o.class, Reason: o.reason, Started: started, Now: now})
		})
		switch {
		case err != nil:
		case o.state == queue.Dead:
			log.ErrorContext(ctx, "message is DEAD and needs an operator")
		default:
			log.InfoContext(ctx, "message skipped")
		}
	}
	if err == nil {
		p.metrics.finished.WithLabelValues(string(o.state), string(o.class)).Inc()
	}
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type metrics struct {
	finished     *prometheus.CounterVec
	duration     prometheus.Histogram
	headAge      prometheus.Gauge
	headStuck    prometheus.Gauge
	headAgeAlert prometheus.Gauge
	backlog      backlogGauges
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_pump_outcomes_total",
			Help: "Recorded processing outcomes by state (FAILED = a counted failed attempt) and error class."}, []string{"state", "error_class"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "msgx_pump_step_duration_seconds",
			Help: "Duration of one processing step.", Buckets: telemetry.Buckets(0.0005, 10)}),
		headAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_pump_head_age_seconds",
			Help: "Age of the queue head since it was enqueued (0 when the queue is empty)."}),
		headStuck: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_pump_head_stuck_seconds",
			Help: "Time since the queue head's first processing attempt (0 when there is no head or it was never tried); alert above msgx_pump_head_age_alert_seconds."}),
		headAgeAlert: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_pump_head_age_alert_seconds",
			Help: "The alert threshold pipeline.head-age-alert, for alert rules."}),
		backlog: newBacklogGauges(),
	}
	reg.MustRegister(m.finished, m.duration, m.headAge, m.headStuck, m.headAgeAlert)
	m.backlog.register(reg)
	return m
}
