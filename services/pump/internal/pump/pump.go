// Package pump processes the inbox messages one at a time in strict msg_id order: the queue
// head is the smallest unfinished message at or below the watermark, and nothing behind it
// runs until it reaches a terminal state (seed 003 §5, seed 000 §2–§4).
package pump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
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
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/inbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Session gives exclusive use of the connection that holds the pump role's lock: every write
// of the pump runs on it, so a pump that lost its lock cannot commit (leader.Session).
type Session interface {
	Do(ctx context.Context, fn func(conn *pgx.Conn) error) error
}

// Input is one message ready for its business step.
type Input struct {
	MsgID   int64
	Message *sis.Message
	Now     time.Time
	Trace   [2]string
}

// Result is what a processor's business step decided.
type Result struct {
	// Skip makes the message SKIPPED with this reason; Protocol makes it DEAD(PROTOCOL). The
	// processor wrote nothing in either case.
	Skip     string
	Protocol string
	// Project lists the full states to write to the Redis projection after the commit.
	Project []flight.Flight
}

// Processor runs step ① of seed 003 §5.2 in tx, which holds the pipeline lock: it loads the
// current state, decides with the pure domain rules and writes the new state with its outbox
// events. It never touches Redis, Kafka or the shared MySQL.
type Processor interface {
	Apply(ctx context.Context, tx pgx.Tx, in Input) (Result, error)
}

// Router picks the processor of a decoded message; a nil processor means the kind is legal
// but unsupported, with the reason.
type Router func(m *sis.Message) (Processor, string)

// Projector writes the Redis projection.
type Projector interface {
	Write(ctx context.Context, flights []flight.Flight) (int, error)
}

// RawReader reads a message's text from the inbox.
type RawReader interface {
	Raw(ctx context.Context, id int64) (string, error)
}

// Config is what the pump needs of the configuration.
type Config struct {
	Pipeline           config.Pipeline
	Codec              sis.Options
	IdentityDayBounded bool
	// StepTimeout bounds one message's processing step.
	StepTimeout time.Duration
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
}

// New builds a pump and registers its metrics.
func New(cfg Config, in RawReader, proj Projector, route Router, clk clock.Clock, logger *slog.Logger,
	tel *telemetry.Telemetry, reg prometheus.Registerer) *Pump {
	if cfg.StepTimeout == 0 {
		cfg.StepTimeout = time.Minute
	}
	return &Pump{cfg: cfg, inbox: in, project: proj, route: route, clock: clk, logger: logger, telemetry: tel, metrics: newMetrics(reg)}
}

// Run processes heads until ctx ends. wake delivers wake-ups (NOTIFY from ingest and replay);
// the poll interval is the fallback.
func (p *Pump) Run(ctx context.Context, s Session, wake <-chan struct{}) error {
	for ctx.Err() == nil {
		wait, err := p.Tick(ctx, s)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			p.logger.Error("pump tick failed", "err", err)
			wait = p.cfg.Pipeline.PollInterval
		}
		if wait <= 0 {
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
	return ctx.Err()
}

// Tick handles the current head once and returns how long to wait before the next tick
// (0 = go on at once).
func (p *Pump) Tick(ctx context.Context, s Session) (time.Duration, error) {
	var head queue.Message
	var ok bool
	err := s.Do(ctx, func(conn *pgx.Conn) error {
		var err error
		head, ok, err = queue.Head(ctx, conn)
		return err
	})
	if err != nil {
		return 0, err
	}
	now := p.clock.Now()
	if !ok {
		p.metrics.headAge.Set(0)
		return p.cfg.Pipeline.PollInterval, nil
	}
	p.metrics.headAge.Set(now.Sub(head.EnqueuedAt).Seconds())
	if head.State == queue.Failed && head.Attempts >= p.cfg.Pipeline.MaxAttempts {
		// Exhaustion is decided by attempts only (DECISIONS 2), in one statement that also
		// records the backfill intent.
		var changed bool
		err := s.Do(ctx, func(conn *pgx.Conn) error {
			var err error
			changed, err = queue.Exhaust(ctx, conn, head.MsgID, p.cfg.Pipeline.MaxAttempts, now)
			return err
		})
		if err == nil && changed {
			p.metrics.finished.WithLabelValues(string(queue.Dead), string(queue.Exhausted)).Inc()
			p.logger.Error("message exhausted its attempts: DEAD(EXHAUSTED)", "msg_id", head.MsgID,
				"attempts", head.Attempts, "last_error", deref(head.LastError))
		}
		return 0, err
	}
	if head.State == queue.Failed && head.NextAttemptAt != nil && head.NextAttemptAt.After(now) {
		// The head waits for its retry; nothing behind it may run (head-of-line blocking).
		return head.NextAttemptAt.Sub(now), nil
	}
	p.processOne(ctx, s, head)
	return 0, nil
}

// processOne follows seed 003 §5.2. Every outcome is recorded where it is decided; a failure
// that happens because the service is stopping is not counted as an attempt.
func (p *Pump) processOne(parent context.Context, s Session, head queue.Message) {
	ctx, cancel := context.WithTimeout(parent, p.cfg.StepTimeout)
	defer cancel()
	ctx = p.telemetry.Extract(ctx, telemetry.Carrier{Parent: deref(head.TraceParent), State: deref(head.TraceState)})
	ctx, span := p.telemetry.Tracer.Start(ctx, "pump.process", trace.WithAttributes(attribute.Int64("msg_id", head.MsgID)))
	defer span.End()
	start := p.clock.Now()
	defer func() { p.metrics.duration.Observe(p.clock.Now().Sub(start).Seconds()) }()

	o := p.step(ctx, s, head, span)
	span.SetAttributes(attribute.String("state", string(o.state)))
	if o.class != "" {
		span.SetAttributes(attribute.String("error_class", string(o.class)))
	}
	if parent.Err() != nil && o.state == queue.Failed {
		p.logger.Info("stopping during processing; the attempt is not counted", "msg_id", head.MsgID)
		return
	}
	if err := p.record(ctx, s, head, o); err != nil {
		span.SetStatus(codes.Error, err.Error())
		if !errors.Is(err, queue.ErrNotUnfinished) && parent.Err() == nil {
			p.logger.Error("recording the outcome failed; the message stays the head", "msg_id", head.MsgID, "err", err)
		}
	}
}

// outcome is the decided transition of one message.
type outcome struct {
	state  queue.State
	class  queue.ErrorClass
	reason string
	// recorded is set when the business step already committed the terminal state.
	recorded bool
}

func (p *Pump) step(ctx context.Context, s Session, head queue.Message, span trace.Span) (o outcome) {
	defer func() {
		if r := recover(); r != nil {
			p.logger.Error("panic while processing; recorded as a failure", "msg_id", head.MsgID, "panic", r, "stack", string(debug.Stack()))
			o = outcome{state: queue.Failed, class: queue.Infra, reason: fmt.Sprintf("panic: %v", r)}
		}
	}()
	now := p.clock.Now()
	if err := s.Do(ctx, func(conn *pgx.Conn) error { return queue.MarkStarted(ctx, conn, head.MsgID, now) }); err != nil {
		return outcome{state: queue.Failed, class: queue.Infra, reason: err.Error()}
	}
	raw, err := p.inbox.Raw(ctx, head.MsgID)
	switch {
	case errors.Is(err, inbox.ErrRowMissing):
		return outcome{state: queue.Dead, class: queue.Malformed, reason: "raw-missing"}
	case err != nil:
		return outcome{state: queue.Failed, class: queue.Infra, reason: err.Error()}
	}
	msg, err := sis.Decode(raw, p.cfg.Codec)
	if err != nil {
		if class, _ := sis.ClassOf(err); class == sis.Malformed {
			return outcome{state: queue.Dead, class: queue.Malformed, reason: err.Error()}
		}
		return outcome{state: queue.Failed, class: queue.CodecError, reason: err.Error()}
	}
	span.SetAttributes(attribute.String("type", msg.Meta.TYPE), attribute.String("styp", msg.Meta.STYP))
	identity := sis.Identity(msg.Meta, p.cfg.IdentityDayBounded)
	var holder int64
	err = s.Do(ctx, func(conn *pgx.Conn) error {
		if err := queue.SetKind(ctx, conn, head.MsgID, msg.Meta.TYPE, msg.Meta.STYP); err != nil {
			return err
		}
		var err error
		holder, err = queue.BindIdentity(ctx, conn, head.MsgID, identity)
		return err
	})
	if err != nil {
		return outcome{state: queue.Failed, class: queue.Infra, reason: err.Error()}
	}
	if holder != head.MsgID {
		return outcome{state: queue.Skipped, reason: "duplicate-of:" + strconv.FormatInt(holder, 10)}
	}
	proc, why := p.route(msg)
	if proc == nil {
		return outcome{state: queue.Skipped, class: queue.Unsupported, reason: "unsupported: " + why}
	}
	trace := p.telemetry.Inject(ctx)
	return p.business(ctx, s, proc, Input{MsgID: head.MsgID, Message: msg, Now: now, Trace: [2]string{trace.Parent, trace.State}})
}

// business runs the three steps of a business success under the pipeline lock, which spans
// the Redis write (seed 003 §5.3): ① flight changes and events in one transaction, ② the
// projection, ③ SUCCEEDED with the backfill intent in another transaction.
func (p *Pump) business(ctx context.Context, s Session, proc Processor, in Input) outcome {
	var o outcome
	err := s.Do(ctx, func(conn *pgx.Conn) error {
		if err := flightstore.LockPipeline(ctx, conn); err != nil {
			return err
		}
		defer func() {
			if err := flightstore.UnlockPipeline(context.WithoutCancel(ctx), conn); err != nil {
				p.logger.Warn("pipeline unlock failed", "err", err)
			}
		}()
		var res Result
		if err := db.WithTx(ctx, conn, func(tx pgx.Tx) error {
			var err error
			res, err = proc.Apply(ctx, tx, in)
			return err
		}); err != nil {
			o = outcome{state: queue.Failed, class: queue.Infra, reason: "business transaction: " + err.Error()}
			return nil
		}
		switch {
		case res.Protocol != "":
			o = outcome{state: queue.Dead, class: queue.Protocol, reason: res.Protocol}
			return nil
		case res.Skip != "":
			o = outcome{state: queue.Skipped, reason: res.Skip}
			return nil
		}
		if len(res.Project) > 0 {
			if _, err := p.project.Write(ctx, res.Project); err != nil {
				// The domain change is committed; the message stays unfinished and its re-run
				// rewrites the projection from the current state.
				o = outcome{state: queue.Failed, class: queue.Infra, reason: "redis projection: " + err.Error()}
				return nil
			}
		}
		if err := db.WithTx(ctx, conn, func(tx pgx.Tx) error {
			return queue.Finish(ctx, tx, in.MsgID, queue.Succeeded, "", "", p.clock.Now())
		}); err != nil {
			return err
		}
		o = outcome{state: queue.Succeeded, recorded: true}
		return nil
	})
	if err != nil {
		return outcome{state: queue.Failed, class: queue.Infra, reason: err.Error()}
	}
	return o
}

// record writes a non-business outcome: a terminal state with its backfill intent in one
// UPDATE, or a counted failure with its retry time.
func (p *Pump) record(ctx context.Context, s Session, head queue.Message, o outcome) error {
	now := p.clock.Now()
	log := p.logger.With("msg_id", head.MsgID, "state", o.state, "error_class", o.class, "reason", o.reason)
	defer p.metrics.finished.WithLabelValues(string(o.state), string(o.class)).Inc()
	switch {
	case o.recorded:
		log.Debug("processed")
		return nil
	case o.state == queue.Failed:
		next := now.Add(p.cfg.Pipeline.BackoffAfter(head.Attempts + 1))
		log.Warn("processing failed; will retry", "attempt", head.Attempts+1, "next_attempt_at", next)
		return s.Do(ctx, func(conn *pgx.Conn) error {
			return queue.Fail(ctx, conn, head.MsgID, o.class, o.reason, next, now)
		})
	default:
		if o.state == queue.Dead {
			log.Error("message is DEAD and needs an operator")
		} else {
			log.Info("message skipped")
		}
		return s.Do(ctx, func(conn *pgx.Conn) error {
			return queue.Finish(ctx, conn, head.MsgID, o.state, o.class, o.reason, now)
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type metrics struct {
	finished *prometheus.CounterVec
	duration prometheus.Histogram
	headAge  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_pump_outcomes_total",
			Help: "Processing outcomes by state (FAILED = a counted failed attempt) and error class."}, []string{"state", "error_class"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "msgx_pump_step_duration_seconds",
			Help: "Duration of one processing step.", Buckets: prometheus.ExponentialBuckets(0.0005, 3, 10)}),
		headAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_pump_head_age_seconds",
			Help: "Age of the queue head since it was enqueued (0 when the queue is empty); alert above pipeline.head-age-alert."}),
	}
	reg.MustRegister(m.finished, m.duration, m.headAge)
	return m
}
