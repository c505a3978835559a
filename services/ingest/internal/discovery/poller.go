// Package discovery finds new inbox rows and enqueues them in ID order behind the watermark W
// (the R-INGEST rules).
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

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Txer runs a transaction on the connection that holds the ingest role's lock, so that a
// deposed instance cannot move the watermark (leader.Session implements it).
type Txer = db.Txer

// Config is what the poller needs of the pipeline parameters.
type Config struct {
	// PollInterval is the wait between rounds while the inbox is quiet.
	PollInterval time.Duration
	// BusyPollInterval is the wait after a round that moved W (R-INGEST-13); above
	// PollInterval it is PollInterval.
	BusyPollInterval time.Duration
	ClaimBatch       int
	MaxCommitDelay   time.Duration
	// LateDetectPeriod is how often the released holes are looked up for late arrivals.
	LateDetectPeriod time.Duration
	// LateWatchRetention is how long after its release a hole is still looked up.
	LateWatchRetention time.Duration
	// Seed is the configured cutover seed (pipeline.cutover-watermark); nil when seeding is
	// left to the operator.
	Seed *cursor.Seed
	// Shadow is shadow mode: the inbox's processed markers are written by the system being
	// replaced, so a marker above W says nothing about our own timeline and is not checked.
	Shadow bool
}

// Poller runs discovery rounds.
type Poller struct {
	cfg       Config
	inbox     *aodb.Inbox
	clock     clock.Clock
	logger    *slog.Logger
	telemetry *telemetry.Telemetry
	metrics   *metrics
	outages   *outage.Policy

	// seed is the configured seed until it has been applied or refused; only the goroutine
	// running the rounds touches it.
	seed *cursor.Seed
	// waitingSeed records that the empty-inbox wait was logged, so it is logged once.
	waitingSeed bool
	// lateDue is when the next late-arrival lookup is due (zero: at the first chance).
	lateDue time.Time
	// standing is the violation this process last logged as standing, so a stop is logged
	// once per process rather than every round; cleared when a round finds it resolved.
	standing *cursor.Violation
	// sightings are when the largest inbox IDs were first seen, for the oldest waiting row.
	sightings sightings
}

// New builds a poller and registers its metrics.
func New(cfg Config, in *aodb.Inbox, clk clock.Clock, logger *slog.Logger, tel *telemetry.Telemetry, reg prometheus.Registerer) *Poller {
	return &Poller{cfg: cfg, inbox: in, clock: clk, logger: logger, telemetry: tel, metrics: newMetrics(reg), seed: cfg.Seed,
		outages: newOutages(clk.Now, logger, reg)}
}

// Run runs rounds until ctx ends, each after the wait the previous one's progress calls for
// (Config.wait), and the late-arrival lookup every late-detect period. A failed round changes
// nothing and is retried after the poll interval.
//
// An inbox or PostgreSQL that does not answer is an outage (outage.go): rounds stop, the
// dependency is probed once per poll interval, and the rounds resume when it answers.
func (p *Poller) Run(ctx context.Context, s Session) error {
	// A standby judges nothing: once this term ends the new holder reports the violation, and a
	// 1 left here would keep alerting after an operator resolved it.
	defer p.showViolation(nil)
	l := term{p, s}
	for {
		start := p.clock.Now()
		if !p.outages.Resume(ctx, l) {
			if err := p.sleep(ctx, p.cfg.PollInterval); err != nil {
				return err
			}
			continue
		}
		progress, err := p.Round(ctx, s)
		if err != nil && ctx.Err() == nil {
			if dep, ok := l.outageOf(ctx, err); ok {
				p.outages.Block(ctx, l, dep, 0, err.Error())
			} else {
				p.logger.ErrorContext(ctx, "discovery round failed; watermark unchanged", "err", err)
			}
		}
		if now := p.clock.Now(); !now.Before(p.lateDue) && ctx.Err() == nil && p.outages.Current() == nil {
			// Due again one period later whether or not it succeeded: a failing inbox is
			// already retried by every round, and the holes stay watched.
			p.lateDue = now.Add(p.cfg.LateDetectPeriod)
			if _, err := p.Reconcile(ctx, s); err != nil && ctx.Err() == nil {
				p.logger.ErrorContext(ctx, "late-arrival lookup failed; retried next period", "err", err)
			}
		}
		if err != nil {
			progress = Progress{}
		}
		// The wait counts from the round's start, so a quiet inbox is read once per poll
		// interval however long a round takes.
		if err := p.sleep(ctx, p.cfg.wait(progress)-p.clock.Now().Sub(start)); err != nil {
			return err
		}
	}
}

// sleep waits d (nothing when d <= 0) and returns ctx's error if it ends first.
func (p *Poller) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Progress is what a round did, which decides when the next one runs.
type Progress struct {
	// Moved: the round moved W, so the inbox is being written to now.
	Moved bool
	// Full: a full batch moved W, so more rows may be waiting already.
	Full bool
}

// wait is how long after a round's start the next one begins (R-INGEST-13): at once after a
// full batch, the busy interval after a round that moved W, the poll interval otherwise. Only
// W moving makes the inbox busy: rows held behind a young hole wait for the hole, not for a
// faster poll.
func (c Config) wait(pr Progress) time.Duration {
	switch {
	case pr.Full:
		return 0
	case pr.Moved && c.BusyPollInterval > 0:
		return min(c.BusyPollInterval, c.PollInterval)
	}
	return c.PollInterval
}

// Round runs one discovery round and reports its progress.
// The inbox is read outside any PostgreSQL transaction, so a slow inbox never holds the lock
// connection idle in a transaction; the writes then run in one transaction that first checks
// the cursor did not move meanwhile. While a contract violation stands the round reads and
// writes nothing but the lag: W stays until an operator resolves it (contract.go).
func (p *Poller) Round(ctx context.Context, txer Txer) (Progress, error) {
	start := p.clock.Now()
	defer func() { p.metrics.roundDuration.Observe(p.clock.Now().Sub(start).Seconds()) }()
	if p.seed != nil {
		if ready, err := p.applySeed(ctx, txer); !ready || err != nil {
			return Progress{}, err
		}
	}
	st, err := db.TxV(ctx, txer, func(tx pgx.Tx) (state, error) { return loadState(ctx, tx) })
	if err != nil {
		return Progress{}, err
	}
	cur := st.cur
	p.sightings.resume(st)
	p.showViolation(cur.Violation)
	if cur.Violation != nil {
		p.stillStanding(ctx, cur)
		return Progress{}, nil
	}
	if p.standing != nil {
		// This process saw it standing, and it is gone: an operator resolved it.
		p.logger.InfoContext(ctx, "contract violation resolved; discovery resumes from the watermark", "kind", p.standing.Kind, "w", cur.W)
		p.standing = nil
	}
	rows, err := p.inbox.After(ctx, cur.W, p.cfg.ClaimBatch)
	if err != nil {
		// An unreadable inbox is an infrastructure failure, never "no new messages".
		p.metrics.readErrors.Inc()
		return Progress{}, fmt.Errorf("read inbox: %w", err)
	}
	in, err := p.readWindow(ctx, st, rows)
	if err != nil {
		p.metrics.readErrors.Inc()
		return Progress{}, err
	}
	now := p.clock.Now()
	in.Now, in.Delay = now, p.cfg.MaxCommitDelay
	pl := plan(in)
	pl, violation, err := p.checkContract(ctx, cur, rows, pl, now)
	if err != nil {
		p.metrics.readErrors.Inc()
		return Progress{}, err
	}
	// The inbox's largest ID after the reads: for the lag, and for when the rows still waiting
	// beyond W were first seen (sightings).
	maxID, maxErr := p.inbox.MaxID(ctx)
	if maxErr == nil {
		p.sightings.see(now, maxID)
	}
	waitingSince := p.sightings.oldestWaiting(pl, rows, maxID, maxErr == nil)
	var inserted int64
	err = txer.Tx(ctx, func(tx pgx.Tx) error {
		again, err := cursor.LoadForUpdate(ctx, tx)
		if err != nil {
			return err
		}
		if again.W != cur.W || !sameTime(again.HoleSince, cur.HoleSince) || !sameTime(again.SeededAt, cur.SeededAt) ||
			again.Violation != nil || !sameTime(again.MarkerSince, cur.MarkerSince) {
			// Only a cutover seeding can do this while this instance holds the role: control's
			// contract resolutions need a standing violation, and this round saw none.
			return fmt.Errorf("cursor changed during the round (W %d → %d); the round is retried", cur.W, again.W)
		}
		msgs := make([]queue.NewMessage, len(pl.Enqueue))
		for i, r := range pl.Enqueue {
			msgs[i] = queue.NewMessage{MsgID: r.ID, ReceivedAt: r.ReceivedAt, Trace: p.startTrace(r.ID)}
		}
		if inserted, err = queue.Enqueue(ctx, tx, msgs, now); err != nil {
			return err
		}
		if err := cursor.ReleaseHoles(ctx, tx, pl.Released, now); err != nil {
			return err
		}
		// The clocks per hole are written with W, so a restart resumes each one (R-INGEST-6).
		if err := cursor.SaveOpenHoles(ctx, tx, st.holes, pl.Holes); err != nil {
			return err
		}
		if err := cursor.RecordFills(ctx, tx, pl.Fills, now); err != nil {
			return err
		}
		if err := cursor.SaveDiscovery(ctx, tx, cursor.Discovery{ScannedTo: pl.ScannedTo, WaitingRows: pl.WaitingRows,
			WaitingSince: waitingSince, MaxCommitDelay: p.cfg.MaxCommitDelay}); err != nil {
			return err
		}
		if violation != nil {
			if err := cursor.RecordViolation(ctx, tx, *violation); err != nil {
				return err
			}
		}
		if cur.MarkerSince == nil && !p.cfg.Shadow {
			if err := cursor.StartMarkerWatch(ctx, tx, now); err != nil {
				return err
			}
		}
		return cursor.Save(ctx, tx, pl.W, pl.HoleSince, now)
	})
	if err != nil {
		return Progress{}, err
	}
	p.observe(ctx, cur, pl, inserted, now, maxID, maxErr == nil, waitingSince)
	if violation != nil {
		p.showViolation(violation)
		p.standing = violation
		p.logger.ErrorContext(ctx, "upstream contract violation: discovery stops advancing the watermark until an operator resolves it (docs/runbooks.md)",
			"kind", violation.Kind, "w", pl.W, "detail", violation.Detail)
		return Progress{}, nil
	}
	moved := pl.W > cur.W
	// A full page of the scan beyond the batch also goes on at once: the window catches up
	// with the inbox before the holes in it are seen late.
	scanning := len(in.Beyond) == p.cfg.ClaimBatch && !pl.Capped
	return Progress{Moved: moved, Full: (moved && len(rows) == p.cfg.ClaimBatch) || scanning}, nil
}

// startTrace opens the message's trace: discovery is its first step, and the stored context
// makes the pump, dispatcher and backfill spans join the same trace.
func (p *Poller) startTrace(msgID int64) telemetry.TraceContext {
	ctx, span := p.telemetry.Tracer.Start(context.Background(), "ingest.discover",
		trace.WithNewRoot(), trace.WithAttributes(attribute.Int64("msg_id", msgID)))
	defer span.End()
	return p.telemetry.Inject(ctx)
}

func (p *Poller) observe(ctx context.Context, prev cursor.Cursor, pl Plan, inserted int64, now time.Time, maxID int64, maxKnown bool, waitingSince *time.Time) {
	p.metrics.watermark.Set(float64(pl.W))
	p.metrics.enqueued.Add(float64(inserted))
	if pl.HoleSince != nil {
		p.metrics.holeAge.Set(now.Sub(*pl.HoleSince).Seconds())
	} else {
		p.metrics.holeAge.Set(0)
	}
	p.metrics.openHoles.Set(float64(len(pl.Holes)))
	next := 0.0
	if len(pl.Holes) > 0 {
		next = max(pl.Holes[0].SeenAt.Add(p.cfg.MaxCommitDelay).Sub(now).Seconds(), 0)
	}
	p.metrics.nextRelease.Set(next)
	waiting := pl.WaitingRows
	if maxKnown && maxID > pl.ScannedTo {
		waiting += maxID - pl.ScannedTo // not scanned yet: counted as rows, a bound
	}
	p.metrics.waitingRows.Set(float64(waiting))
	if waitingSince != nil {
		p.metrics.oldestWaiting.Set(max(now.Sub(*waitingSince).Seconds(), 0))
	} else {
		p.metrics.oldestWaiting.Set(0)
	}
	for _, f := range pl.Fills {
		p.metrics.holeFill.Observe(f)
	}
	if len(pl.Released) > 0 {
		p.metrics.permanentHoles.Add(float64(len(pl.Released)))
		p.logger.WarnContext(ctx, "permanent holes released; their IDs are watched for late arrivals",
			"holes", len(pl.Released), "first_id", pl.Released[0][0], "last_id", pl.Released[len(pl.Released)-1][1], "w", pl.W)
	}
	if pl.HoleSince != nil && (prev.HoleSince == nil || !prev.HoleSince.Equal(*pl.HoleSince)) {
		p.logger.InfoContext(ctx, "hole in the inbox IDs; waiting for a late commit", "missing_id", pl.W+1,
			"hole_since", *pl.HoleSince, "open_holes", len(pl.Holes), "max_commit_delay", p.cfg.MaxCommitDelay)
	}
	if pl.Capped {
		p.logger.WarnContext(ctx, "the hole window is full: holes beyond it are seen, and wait, only once W comes closer",
			"w", pl.W, "scanned_to", pl.ScannedTo, "open_holes", len(pl.Holes))
	}
	if inserted > 0 {
		p.logger.DebugContext(ctx, "enqueued", "rows", inserted, "w", pl.W)
	}
	if maxKnown {
		p.metrics.lag.Set(float64(maxID - pl.W))
	}
}

// observeLag sets the lag behind the inbox's largest ID, never clamped: it is negative while
// the inbox is behind W.
func (p *Poller) observeLag(ctx context.Context, w int64) {
	if max, err := p.inbox.MaxID(ctx); err == nil {
		p.metrics.lag.Set(float64(max - w))
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
	violation      *prometheus.GaugeVec
	openHoles      prometheus.Gauge
	nextRelease    prometheus.Gauge
	waitingRows    prometheus.Gauge
	oldestWaiting  prometheus.Gauge
	holeFill       prometheus.Histogram
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
			Help: "Duration of one discovery round.", Buckets: telemetry.Buckets(0.001, 25)}),
		violation: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgx_ingest_contract_violation",
			Help: "1 while an upstream contract violation of this kind stops the watermark (until an operator resolves it), 0 otherwise."},
			[]string{"kind"}),
		openHoles: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_ingest_open_holes",
			Help: "Holes above W waiting for max-commit-delay, each from its own first sighting."}),
		nextRelease: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_ingest_next_hole_release_seconds",
			Help: "Seconds until the oldest open hole reaches max-commit-delay (0 when none, or when it is due)."}),
		waitingRows: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_ingest_waiting_rows",
			Help: "Inbox rows visible beyond W, not enqueued yet (IDs beyond the scan window counted as rows)."}),
		oldestWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_ingest_oldest_waiting_seconds",
			Help: "Time since the oldest inbox row visible beyond W, not enqueued yet, was first seen (0 when none)."}),
		holeFill: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "msgx_ingest_hole_fill_seconds",
			Help:    "Measured commit delays: from a hole's first sighting to its row appearing while W waited for it.",
			Buckets: cursor.FillBuckets}),
	}
	// Every kind from the start, so an alert on 1 never waits for a series to appear.
	for _, k := range cursor.Kinds() {
		m.violation.WithLabelValues(k).Set(0)
	}
	reg.MustRegister(m.watermark, m.lag, m.holeAge, m.permanentHoles, m.enqueued, m.readErrors, m.roundDuration,
		m.lateDetected, m.lateEnqueued, m.watchedHoles, m.violation, m.openHoles, m.nextRelease, m.waitingRows,
		m.oldestWaiting, m.holeFill)
	return m
}

func sameTime(a, b *time.Time) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && a.Equal(*b))
}
