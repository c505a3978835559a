// Package maintenance runs the retention sweeps of the backfill service (the R-RETAIN rules): it
// deletes the processing records, sent events, schedule trail, closed requests and ended
// operator jobs that are past their retention, and moves finished flights to flight_history.
//
// The sweeps never starve the pump: each batch is one short transaction of at most Batch rows
// with its own statement timeout, batches repeat only while they come back full with a jittered
// pause between them, and only the history sweep takes the pipeline lock, for one flight at a
// time (the shape of river's job_cleaner).
package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Session gives exclusive use of the backfill role's lock connection (leader.Session): every
// deletion is fenced by it.
type Session = db.Txer

// Config is what the sweeps need; FromConfig fills it from the registry.
type Config struct {
	Period    time.Duration // how often every sweep runs
	Batch     int           // rows per deleting transaction (retention.batch)
	Statement time.Duration // statement timeout of one batch, under the 10s lease
	// Pause bounds the random pause between two full batches (retention.pause); 0 = none.
	Pause time.Duration

	ProcRetention    time.Duration // pipeline.proc-retention
	EventRetention   time.Duration // pipeline.event-retention
	SnapLogRetention time.Duration // schd.snap-log-retention
	ReqRetention     time.Duration // pipeline.req-retention
	JobRetention     time.Duration // retention.jobs
	History          flightstore.HistoryPolicy
	HistoryBatch     int // flights read per history round
}

// FromConfig is the sweeps' configuration from the service's (pkg/config's registry). The
// period, the statement bound and the history round are fixed: a minute keeps a day's expiries
// far ahead of the sweep, 5s stays under the lock connection's lease with the pipeline's
// writes going on (retention.batch is bounded to fit it), and a hundred flights keep one
// history round's transaction short.
func FromConfig(c config.Config) Config {
	return Config{
		Period:           time.Minute,
		Batch:            c.Retention.Batch,
		Statement:        5 * time.Second,
		Pause:            c.Retention.Pause,
		ProcRetention:    c.Pipeline.ProcRetention,
		EventRetention:   c.Pipeline.EventRetention,
		SnapLogRetention: c.Schd.SnapLogRetention,
		ReqRetention:     c.Pipeline.ReqRetention,
		JobRetention:     c.Retention.Jobs,
		History: flightstore.HistoryPolicy{
			Retention:   c.Flight.HistoryRetention,
			QuietPeriod: c.Flight.QuietPeriod,
			Zone:        c.Airport.Zone,
		},
		HistoryBatch: 100,
	}
}

// Forgetter removes a flight's Redis projection once the flight has left the current state.
type Forgetter interface {
	Forget(ctx context.Context, flid string) error
}

// Cleaner runs the sweeps.
type Cleaner struct {
	cfg     Config
	forget  Forgetter
	clock   clock.Clock
	logger  *slog.Logger
	metrics *metrics
	jobs    []job
}

// job is one retention sweep: delete deletes up to limit rows older than now − retention.
type job struct {
	name      string
	retention time.Duration
	delete    func(ctx context.Context, q db.Executor, cutoff time.Time, limit int) (int64, error)
}

// New builds the cleaner and registers its metrics.
func New(cfg Config, forget Forgetter, clk clock.Clock, logger *slog.Logger, reg prometheus.Registerer) *Cleaner {
	for name, d := range map[string]time.Duration{"proc-retention": cfg.ProcRetention, "event-retention": cfg.EventRetention,
		"snap-log-retention": cfg.SnapLogRetention, "req-retention": cfg.ReqRetention, "job-retention": cfg.JobRetention,
		"history-retention": cfg.History.Retention, "quiet-period": cfg.History.QuietPeriod} {
		if d <= 0 {
			panic(fmt.Sprintf("maintenance: %s must be positive", name)) // config validation guarantees it
		}
	}
	if cfg.History.Zone == nil || forget == nil {
		panic("maintenance: History.Zone and a Forgetter are required")
	}
	c := &Cleaner{cfg: cfg, forget: forget, clock: clk, logger: logger, metrics: newMetrics(reg)}
	c.jobs = []job{
		{name: "proc_state", retention: cfg.ProcRetention, delete: queue.DeleteFinished},
		{name: "msg_event", retention: cfg.EventRetention, delete: outbox.DeleteSent},
		{name: "schd_snap_log", retention: cfg.SnapLogRetention, delete: flightstore.DeleteSnapLog},
		{name: "req_track", retention: cfg.ReqRetention, delete: request.DeleteClosed},
		{name: "schd_republish", retention: cfg.JobRetention, delete: jobs.Republishes.DeleteFinished},
		{name: "projection_rebuild", retention: cfg.JobRetention, delete: jobs.Rebuilds.DeleteFinished},
	}
	for _, j := range append(c.jobs, job{name: historyJob}) {
		c.metrics.deleted.WithLabelValues(j.name)
		c.metrics.lastDeleted.WithLabelValues(j.name)
	}
	return c
}

const historyJob = "flight_history"

// Run sweeps after a short random stagger and then every period until ctx ends.
func (c *Cleaner) Run(ctx context.Context, sess Session) error {
	if !clock.Sleep(ctx, rand.N(time.Second)) {
		return ctx.Err()
	}
	t := time.NewTicker(c.cfg.Period)
	defer t.Stop()
	for {
		c.RunOnce(ctx, sess)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// RunOnce runs every sweep once. A failing sweep is logged and does not stop the others; its
// rows wait for the next round.
func (c *Cleaner) RunOnce(ctx context.Context, sess Session) {
	for _, j := range c.jobs {
		c.runJob(ctx, j.name, func() (int64, bool, error) {
			n, err := c.batch(ctx, sess, j)
			return n, n == int64(c.cfg.Batch), err
		})
	}
	c.runJob(ctx, historyJob, func() (int64, bool, error) { return c.historyRound(ctx, sess) })
}

// runJob repeats one sweep's batch while it reports more, records its metrics and logs at info
// only when it deleted something.
func (c *Cleaner) runJob(ctx context.Context, name string, batch func() (n int64, more bool, err error)) {
	start := c.clock.Now()
	var total int64
	for {
		n, more, err := batch()
		total += n
		if err != nil {
			if ctx.Err() == nil {
				c.logger.ErrorContext(ctx, "maintenance sweep failed", "job", name, "deleted", total, "err", err)
			}
			break
		}
		if !more {
			break
		}
		if c.cfg.Pause > 0 && !clock.Sleep(ctx, c.cfg.Pause/20+rand.N(c.cfg.Pause-c.cfg.Pause/20)) {
			break
		}
	}
	c.metrics.duration.WithLabelValues(name).Observe(c.clock.Now().Sub(start).Seconds())
	c.metrics.deleted.WithLabelValues(name).Add(float64(total))
	c.metrics.lastDeleted.WithLabelValues(name).Set(float64(total))
	if total > 0 {
		c.logger.InfoContext(ctx, "maintenance sweep deleted rows", "job", name, "deleted", total)
	}
}

// batch runs one deleting transaction of a retention job.
func (c *Cleaner) batch(ctx context.Context, sess Session, j job) (int64, error) {
	cutoff := c.clock.Now().Add(-j.retention)
	n, err := db.TxV(ctx, sess, func(tx pgx.Tx) (int64, error) {
		if err := c.bound(ctx, tx); err != nil {
			return 0, err
		}
		return j.delete(ctx, tx, cutoff, c.cfg.Batch)
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", j.name, err)
	}
	return n, nil
}

// bound gives the transaction a statement and lock timeout, so a batch never keeps the lock
// connection (and the rows or locks it holds) longer than a few seconds.
func (c *Cleaner) bound(ctx context.Context, tx pgx.Tx) error {
	ms := fmt.Sprint(c.cfg.Statement.Milliseconds())
	if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true)`, ms); err != nil {
		return fmt.Errorf("bound maintenance transaction: %w", err)
	}
	return nil
}

type metrics struct {
	deleted     *prometheus.CounterVec
	lastDeleted *prometheus.GaugeVec
	duration    *prometheus.HistogramVec
	failed      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_maintenance_deleted_total",
			Help: "Rows deleted by the retention sweeps, by sweep (flight_history counts flights moved to history)."}, []string{"job"}),
		lastDeleted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgx_maintenance_last_sweep_deleted",
			Help: "Rows deleted by the last run of each sweep."}, []string{"job"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "msgx_maintenance_sweep_duration_seconds",
			Help: "Duration of one run of each sweep.", Buckets: telemetry.Buckets(0.005, 1000)}, []string{"job"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_maintenance_history_failed_total",
			Help: "Flights the history sweep could not move (nothing of them was deleted), by step."}, []string{"step"}),
	}
	reg.MustRegister(m.deleted, m.lastDeleted, m.duration, m.failed)
	return m
}
