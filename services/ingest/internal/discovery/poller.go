// Package discovery finds new inbox rows and enqueues them in ID order behind the watermark W
// (seed 000 §5.1, DECISIONS 1).
package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/inbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Txer runs a transaction on the connection that holds the ingest role's lock, so that a
// deposed instance cannot move the watermark (leader.Session implements it).
type Txer interface {
	Tx(ctx context.Context, fn func(tx pgx.Tx) error) error
}

// Config is what the poller needs of the pipeline parameters.
type Config struct {
	PollInterval   time.Duration
	ClaimBatch     int
	MaxCommitDelay time.Duration
	// LateDetectPeriod is how often the released holes are looked up for late arrivals.
	LateDetectPeriod time.Duration
	// LateWatchRetention is how long after its release a hole is still looked up.
	LateWatchRetention time.Duration
	// Seed is the configured cutover seed (pipeline.cutover-watermark); nil when seeding is
	// left to the operator.
	Seed *cursor.Seed
}

// Poller runs discovery rounds.
type Poller struct {
	cfg       Config
	inbox     *inbox.Inbox
	clock     clock.Clock
	logger    *slog.Logger
	telemetry *telemetry.Telemetry
	metrics   *metrics

	// seed is the configured seed until it has been applied or refused; only the goroutine
	// running the rounds touches it.
	seed *cursor.Seed
	// waitingSeed records that the empty-inbox wait was logged, so it is logged once.
	waitingSeed bool
	// lateDue is when the next late-arrival lookup is due (zero: at the first chance).
	lateDue time.Time
}

// New builds a poller and registers its metrics.
func New(cfg Config, in *inbox.Inbox, clk clock.Clock, logger *slog.Logger, tel *telemetry.Telemetry, reg prometheus.Registerer) *Poller {
	return &Poller{cfg: cfg, inbox: in, clock: clk, logger: logger, telemetry: tel, metrics: newMetrics(reg), seed: cfg.Seed}
}

// Run runs a round every poll interval, and the late-arrival lookup every late-detect period,
// until ctx ends. A failed round changes nothing and is retried at the next tick.
func (p *Poller) Run(ctx context.Context, tx Txer) error {
	t := time.NewTicker(p.cfg.PollInterval)
	defer t.Stop()
	for {
		more, err := p.Round(ctx, tx)
		if err != nil && ctx.Err() == nil {
			p.logger.Error("discovery round failed; watermark unchanged", "err", err)
		}
		if now := p.clock.Now(); !now.Before(p.lateDue) && ctx.Err() == nil {
			// Due again one period later whether or not it succeeded: a failing inbox is
			// already retried by every round, and the holes stay watched.
			p.lateDue = now.Add(p.cfg.LateDetectPeriod)
			if _, err := p.Reconcile(ctx, tx); err != nil && ctx.Err() == nil {
				p.logger.Error("late-arrival lookup failed; retried next period", "err", err)
			}
		}
		if more && err == nil {
			continue // a full batch: the backlog goes on without waiting for the tick
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Round runs one discovery round and reports whether the batch was full (more rows may wait).
// The inbox is read outside any PostgreSQL transaction, so a slow inbox never holds the lock
// connection idle in a transaction; the writes then run in one transaction that first checks
// the cursor did not move meanwhile.
func (p *Poller) Round(ctx context.Context, txer Txer) (more bool, err error) {
	start := p.clock.Now()
	defer func() { p.metrics.roundDuration.Observe(p.clock.Now().Sub(start).Seconds()) }()
	if p.seed != nil {
		if ready, err := p.applySeed(ctx, txer); !ready || err != nil {
			return false, err
		}
	}
	var cur cursor.Cursor
	if err := txer.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		cur, err = cursor.Load(ctx, tx)
		return err
	}); err != nil {
		return false, err
	}
	rows, err := p.inbox.After(ctx, cur.W, p.cfg.ClaimBatch)
	if err != nil {
		// An unreadable inbox is an infrastructure failure, never "no new messages".
		p.metrics.readErrors.Inc()
		return false, fmt.Errorf("read inbox: %w", err)
	}
	now := p.clock.Now()
	pl := plan(cur.W, cur.HoleSince, rows, now, p.cfg.MaxCommitDelay)
	var inserted int64
	err = txer.Tx(ctx, func(tx pgx.Tx) error {
		again, err := cursor.LoadForUpdate(ctx, tx)
		if err != nil {
			return err
		}
		if again.W != cur.W || !sameTime(again.HoleSince, cur.HoleSince) || !sameTime(again.SeededAt, cur.SeededAt) {
			// Only a cutover seeding can do this while this instance holds the role.
			return fmt.Errorf("cursor changed during the round (W %d → %d); the round is retried", cur.W, again.W)
		}
		msgs := make([]queue.NewMessage, len(pl.Enqueue))
		for i, r := range pl.Enqueue {
			msgs[i] = queue.NewMessage{MsgID: r.ID, ReceivedAt: r.ReceivedAt, Trace: p.startTrace(r.ID)}
		}
		if inserted, err = queue.Enqueue(ctx, tx, msgs, now); err != nil {
			return err
		}
		if pl.Released != nil {
			if err := cursor.ReleaseHole(ctx, tx, pl.Released[0], pl.Released[1], now); err != nil {
				return err
			}
		}
		return cursor.Save(ctx, tx, pl.W, pl.HoleSince, now)
	})
	if err != nil {
		return false, err
	}
	p.observe(ctx, cur, pl, inserted, now)
	return len(rows) == p.cfg.ClaimBatch && pl.W > cur.W, nil
}

// startTrace opens the message's trace: discovery is its first step, and the stored context
// makes the pump, dispatcher and backfill spans join the same trace.
func (p *Poller) startTrace(msgID int64) [2]string {
	ctx, span := p.telemetry.Tracer.Start(context.Background(), "ingest.discover",
		trace.WithNewRoot(), trace.WithAttributes(attribute.Int64("msg_id", msgID)))
	defer span.End()
	c := p.telemetry.Inject(ctx)
	return [2]string{c.Parent, c.State}
}

func (p *Poller) observe(ctx context.Context, prev cursor.Cursor, pl Plan, inserted int64, now time.Time) {
	p.metrics.watermark.Set(float64(pl.W))
	p.metrics.enqueued.Add(float64(inserted))
	if pl.HoleSince != nil {
		p.metrics.holeAge.Set(now.Sub(*pl.HoleSince).Seconds())
	} else {
		p.metrics.holeAge.Set(0)
	}
	if pl.Released != nil {
		p.metrics.permanentHoles.Inc()
		p.logger.Warn("permanent hole released; its IDs are watched for late arrivals",
			"first_id", pl.Released[0], "last_id", pl.Released[1], "hole_since", prev.HoleSince)
	}
	if pl.HoleSince != nil && (prev.HoleSince == nil || !prev.HoleSince.Equal(*pl.HoleSince)) {
		p.logger.Info("hole in the inbox IDs; waiting for a late commit", "missing_id", pl.W+1, "max_commit_delay", p.cfg.MaxCommitDelay)
	}
	if inserted > 0 {
		p.logger.Debug("enqueued", "rows", inserted, "w", pl.W)
	}
	if max, err := p.inbox.MaxID(ctx); err == nil {
		p.metrics.lag.Set(float64(max - pl.W))
	}
}

type metrics struct {
	watermark      prometheus.Gauge
	lag            prometheus.Gauge
	holeAge        prometheus.Gauge
	permanentHoles prometheus.Counter
	enqueued       prometheus.Counter
	readErrors     prometheus.Counter
	roundDuration  prometheus.Histogram
	lateDetected   prometheus.Counter
	lateEnqueued   prometheus.Counter
	watchedHoles   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		watermark: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_ingest_watermark",
			Help: "The watermark W: every inbox ID up to it is enqueued or a released hole."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_ingest_watermark_lag",
			Help: "Largest inbox ID minus W."}),
		holeAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_ingest_hole_age_seconds",
			Help: "Age of the hole that currently stops the watermark (0 when none)."}),
		permanentHoles: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_ingest_permanent_holes_total",
			Help: "Holes released as permanent after max-commit-delay."}),
		enqueued: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_ingest_rows_enqueued_total",
			Help: "Inbox rows enqueued into proc_state."}),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_ingest_inbox_read_errors_total",
			Help: "Discovery rounds and late-arrival lookups that could not read the inbox."}),
		lateDetected: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_ingest_late_arrival_detected_total",
			Help: "Inbox rows found inside a released permanent hole after W had passed them."}),
		lateEnqueued: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_ingest_late_arrival_enqueued_total",
			Help: "Late arrivals enqueued into proc_state by the reconciliation."}),
		watchedHoles: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_ingest_watched_holes",
			Help: "Released holes still looked up for late arrivals (released within the watch retention)."}),
		roundDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "msgx_ingest_round_duration_seconds",
			Help: "Duration of one discovery round.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
	}
	reg.MustRegister(m.watermark, m.lag, m.holeAge, m.permanentHoles, m.enqueued, m.readErrors, m.roundDuration,
		m.lateDetected, m.lateEnqueued, m.watchedHoles)
	return m
}

func sameTime(a, b *time.Time) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && a.Equal(*b))
}
