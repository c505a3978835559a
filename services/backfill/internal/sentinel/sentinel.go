// Package sentinel checks that the Redis projection still matches PostgreSQL, the authority,
// and repairs what drifted (docs/redis.md, "Consistency sentinel"): keys deleted or flushed,
// documents corrupted, version entries lowered or raised, keys of flights PostgreSQL does not
// have.
//
// It runs in the backfill role, beside the history sweep, the other writer of the projection
// besides the pump: a process of its own, so the pump's critical path carries none of it. Each
// page of flights is compared and repaired inside one short transaction holding the pipeline
// lock, which the pump holds across its own projection writes; so a repair never races a newer
// write of the pump, and the pump waits for at most one page. The on-demand checks and rebuilds
// the control API requests (projection_rebuild) go through the same pages (rebuild.go).
package sentinel

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/services/backfill/internal/jobrun"
)

// Session runs transactions on the backfill role's lock connection (leader.Session).
type Session = db.Txer

// Projection is what the sentinel reads and repairs in Redis (projection.Projection).
type Projection interface {
	Observe(ctx context.Context, flids []string) ([]projection.Observed, error)
	Sentinel(ctx context.Context) (value string, ok bool, err error)
	SetSentinel(ctx context.Context, value string) error
	ServerID(ctx context.Context) (string, error)
	Repair(ctx context.Context, flights []flight.Flight, gone []string) error
	ScanDocs(ctx context.Context, cursor uint64, count int64) ([]string, uint64, error)
	ScanVersions(ctx context.Context, cursor uint64, count int64) ([]string, uint64, error)
}

// Config is what the sentinel needs; FromConfig fills it from the registry.
type Config struct {
	// OnStartup runs a check when the role is taken (consistency-check.on-startup).
	OnStartup bool
	// SampleRatio is the share of flights a periodic check compares
	// (consistency-check.daily-sample-ratio).
	SampleRatio float64
	// FullBelow: a start-up check compares every flight while the current state holds fewer
	// than this many, SampleRatio of them otherwise (consistency-check.full-below).
	FullBelow int
	// Period between periodic checks (consistency-check.period).
	Period time.Duration
	// Page is how many flights one locked transaction compares.
	Page int
	// JobPoll is how often the role looks for a requested rebuild (pipeline.poll-interval),
	// and for the projection's sentinel key.
	JobPoll time.Duration
	// RebuildOnLoss starts a rebuild of the whole projection when Redis lost the sentinel key
	// (consistency-check.rebuild-on-loss; loss.go).
	RebuildOnLoss bool
}

// page is Config.Page in production: a hundred flights' comparison keeps one locked
// transaction short beside the other backfill sweeps on the lock connection.
const page = 100

// FromConfig is the sentinel's configuration from the service's (pkg/config's registry).
func FromConfig(c config.Config) Config {
	return Config{
		OnStartup:     c.Consistency.OnStartup,
		SampleRatio:   c.Consistency.SampleRatio,
		FullBelow:     c.Consistency.FullBelow,
		Period:        c.Consistency.Period,
		Page:          page,
		JobPoll:       c.Pipeline.PollInterval,
		RebuildOnLoss: c.Consistency.RebuildOnLoss,
	}
}

// Result is what one check found and repaired.
type Result struct {
	Checked  int
	Drift    map[projection.Drift]int
	Repaired int
	// CodeShare counts the active code-share children under a deleted master
	// (flightstore.CodeShareViolations), a state the rules never leave: not repaired, reported.
	CodeShare int
}

// Found is the number of drifted flights.
func (r Result) Found() int {
	n := 0
	for _, v := range r.Drift {
		n += v
	}
	return n
}

// Sentinel runs the checks.
type Sentinel struct {
	cfg     Config
	proj    Projection
	clock   clock.Clock
	logger  *slog.Logger
	metrics *metrics
	// rebuilds executes the rebuilds the control API requests (rebuild.go).
	rebuilds *jobrun.Runner[jobs.RebuildJob]
	// streak counts the consecutive checks that found drift, for the alert: a periodic check
	// with drift raises it, a clean one and a full repair reset it, a dry run leaves it.
	streak int
	// lossFailing is set while looking for the sentinel key fails, so that a Redis outage is
	// logged once, not at every poll.
	lossFailing bool
	// server is the run_id of the Redis server CheckLoss last found the key on; "" until the
	// first look.
	server string
}

// Mode is what kind of run counted a drift (the mode label of msgx_projection_drift_total).
type Mode string

// The modes: the periodic or start-up check (which repairs what it finds), a rebuild job
// that repairs, and a dry run that only counts.
const (
	ModeCheck  Mode = "check"
	ModeRepair Mode = "repair"
	ModeDryRun Mode = "dry_run"
)

func (m Mode) dryRun() bool { return m == ModeDryRun }

// New builds a sentinel and registers its metrics.
func New(cfg Config, proj Projection, clk clock.Clock, logger *slog.Logger, reg prometheus.Registerer) *Sentinel {
	s := &Sentinel{cfg: cfg, proj: proj, clock: clk, logger: logger, metrics: newMetrics(reg)}
	s.rebuilds = s.newRebuilds()
	return s
}

// Run checks at start-up (when configured) and then every period, and executes the rebuilds
// the control API requests, until ctx ends. A failed check (Redis or PostgreSQL not answering)
// is logged and tried again at the next period: it decides nothing; a failed step of a rebuild
// is recorded on the job and tried again at the next poll. One goroutine does all of it, so a
// periodic check and a rebuild never overlap.
func (s *Sentinel) Run(ctx context.Context, sess Session) error {
	// A projection found lost is rebuilt whole at once: the start-up check would compare the
	// same flights before it.
	if !(s.cfg.RebuildOnLoss && s.checkLoss(ctx, sess) != 0) && s.cfg.OnStartup {
		s.runOnce(ctx, sess, s.startupRatio(ctx, sess))
	}
	s.rebuilds.Poll(ctx, sess)
	t := time.NewTicker(s.cfg.Period)
	defer t.Stop()
	jobTick := time.NewTicker(s.cfg.JobPoll)
	defer jobTick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			s.runOnce(ctx, sess, s.cfg.SampleRatio)
		case <-jobTick.C:
			if s.cfg.RebuildOnLoss {
				s.checkLoss(ctx, sess)
			}
			s.rebuilds.Poll(ctx, sess)
		}
	}
}

// checkLoss is CheckLoss with its failure logged once per streak.
func (s *Sentinel) checkLoss(ctx context.Context, sess Session) int64 {
	id, err := s.CheckLoss(ctx, sess)
	switch {
	case err != nil && ctx.Err() == nil && !s.lossFailing:
		s.lossFailing = true
		s.logger.WarnContext(ctx, "could not look for the projection's sentinel key; tried again at every poll", "err", err)
	case err == nil && s.lossFailing:
		s.lossFailing = false
		s.logger.InfoContext(ctx, "the projection's sentinel key can be read again")
	}
	return id
}

func (s *Sentinel) runOnce(ctx context.Context, sess Session, ratio float64) {
	res, err := s.Check(ctx, sess, ratio)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "projection consistency check failed; tried again at the next period", "err", err)
		}
		return
	}
	level := slog.LevelInfo
	if res.Found() > 0 {
		level = slog.LevelWarn
	}
	s.logger.Log(ctx, level, "projection consistency check done", "ratio", ratio, "checked", res.Checked,
		"missing", res.Drift[projection.Missing], "stale", res.Drift[projection.Stale],
		"content", res.Drift[projection.Content], "extra", res.Drift[projection.Extra], "repaired", res.Repaired,
		"codeshare_violations", res.CodeShare)
}

// startupRatio is 1 for a current state small enough to compare whole, the sample ratio
// otherwise.
func (s *Sentinel) startupRatio(ctx context.Context, sess Session) float64 {
	var n int
	err := sess.Tx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT count(*) FROM flight_schd`).Scan(&n)
	})
	if err != nil || n >= s.cfg.FullBelow {
		return s.cfg.SampleRatio
	}
	return 1
}

// Check compares ratio of the current state's flights (all of them at 1) with Redis, then looks
// for keys of FLIDs PostgreSQL does not have, and repairs every drift it finds.
func (s *Sentinel) Check(ctx context.Context, sess Session, ratio float64) (Result, error) {
	res := Result{Drift: map[projection.Drift]int{}}
	after := ""
	for {
		page, err := db.TxV(ctx, sess, func(tx pgx.Tx) ([]string, error) {
			page, err := flightstore.SampleFLIDs(ctx, tx, after, ratio, s.cfg.Page)
			if err != nil || len(page) == 0 {
				return page, err
			}
			return page, s.comparePage(ctx, tx, page, &res, pageOpts{mode: ModeCheck})
		})
		if err != nil {
			return res, err
		}
		if len(page) < s.cfg.Page {
			break
		}
		after = page[len(page)-1]
	}
	if err := s.extras(ctx, sess, &res); err != nil {
		return res, err
	}
	if err := s.codeShare(ctx, sess, &res); err != nil {
		return res, err
	}
	s.observe(res, ModeCheck)
	return res, nil
}

// codeShare counts the active children under a deleted master (R-CODESHARE-4, R-CODESHARE-5).
// The rules never leave one, so one found is a defect or a hand-made change: it is logged at
// ERROR with the first of them and exported, never repaired on a guess.
func (s *Sentinel) codeShare(ctx context.Context, sess Session, res *Result) error {
	var flids []string
	err := sess.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		res.CodeShare, flids, err = flightstore.CodeShareViolations(ctx, tx, 20)
		return err
	})
	if err != nil {
		return err
	}
	if res.CodeShare > 0 {
		s.logger.ErrorContext(ctx, "active code-share children name a deleted master", "children", res.CodeShare, "flids", flids)
	}
	return nil
}

// pageOpts are how comparePage treats a page: mode is the kind of run (a dry run repairs
// nothing); lost is a rebuild after Redis lost the projection, where every flight is missing:
// those are counted, not logged one by one (the job's start and end are), and any other kind
// still is.
type pageOpts struct {
	mode Mode
	lost bool
}

// comparePage compares and repairs (unless a dry run) one page under the pipeline lock, in tx.
func (s *Sentinel) comparePage(ctx context.Context, tx pgx.Tx, flids []string, res *Result, o pageOpts) error {
	mode := o.mode
	if err := leader.LockPipelineTx(ctx, tx); err != nil {
		return err
	}
	// A FLID archived since the page was read is absent: the sweep removed its projection.
	want, err := flightstore.LoadPublishedMany(ctx, tx, flids)
	if err != nil {
		return err
	}
	got, err := s.proj.Observe(ctx, flightIDs(want))
	if err != nil {
		return err
	}
	var fix []flight.Flight
	for i, f := range want {
		if d := projection.Compare(f, got[i]); d != "" {
			res.Drift[d]++
			s.metrics.drift.WithLabelValues(string(d), string(mode)).Inc()
			if o.lost && d == projection.Missing {
				fix = append(fix, f)
				continue
			}
			s.logger.WarnContext(ctx, "projection drifted from PostgreSQL; "+fate(mode), "flid", f.FLID, "kind", d, "mode", mode,
				"version", f.Version, "redis_version", got[i].Version)
			fix = append(fix, f)
		}
	}
	res.Checked += len(want)
	if mode.dryRun() {
		return nil
	}
	if err := s.proj.Repair(ctx, fix, nil); err != nil {
		return err
	}
	res.Repaired += len(fix)
	s.metrics.repaired.Add(float64(len(fix)))
	return nil
}

// extras scans Redis for documents and version entries of FLIDs that PostgreSQL does not have
// and removes them, re-checking each page under the pipeline lock.
func (s *Sentinel) extras(ctx context.Context, sess Session, res *Result) error {
	seen := map[string]bool{}
	for _, scan := range []func(context.Context, uint64, int64) ([]string, uint64, error){s.proj.ScanDocs, s.proj.ScanVersions} {
		var cursor uint64
		for {
			flids, next, err := scan(ctx, cursor, int64(s.cfg.Page))
			if err != nil {
				return err
			}
			var fresh []string
			for _, f := range flids {
				if !seen[f] {
					seen[f] = true
					fresh = append(fresh, f)
				}
			}
			if len(fresh) > 0 {
				if err := sess.Tx(ctx, func(tx pgx.Tx) error { return s.removeUnknown(ctx, tx, fresh, res, ModeCheck) }); err != nil {
					return err
				}
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return nil
}

// removeUnknown removes (unless a dry run) the keys of those of flids that PostgreSQL does not
// have, in tx.
func (s *Sentinel) removeUnknown(ctx context.Context, tx pgx.Tx, flids []string, res *Result, mode Mode) error {
	unknown, err := flightstore.Unknown(ctx, tx, flids)
	if err != nil || len(unknown) == 0 {
		return err
	}
	// Under the lock, so a flight the pump is creating right now is not taken for an extra.
	if err := leader.LockPipelineTx(ctx, tx); err != nil {
		return err
	}
	if unknown, err = flightstore.Unknown(ctx, tx, unknown); err != nil || len(unknown) == 0 {
		return err
	}
	for _, flid := range unknown {
		s.logger.WarnContext(ctx, "projection has keys of a flight PostgreSQL does not have; "+fate(mode), "flid", flid, "kind", projection.Extra, "mode", mode)
	}
	res.Drift[projection.Extra] += len(unknown)
	s.metrics.drift.WithLabelValues(string(projection.Extra), string(mode)).Add(float64(len(unknown)))
	if mode.dryRun() {
		return nil
	}
	if err := s.proj.Repair(ctx, nil, unknown); err != nil {
		return err
	}
	res.Repaired += len(unknown)
	s.metrics.repaired.Add(float64(len(unknown)))
	return nil
}

// observe records a finished run. The streak is what MsgxProjectionDrift fires on, so it
// follows what the projection is left like: a periodic check found drift (and repaired it) or
// not; a repair of every flight that repaired all it found leaves the projection equal to
// PostgreSQL, so the runbook's repair clears the alert instead of raising it. A dry run changes
// nothing in Redis and so neither raises nor resets it; a repair of some FLIDs only is not
// observed at all (it did not look at the rest). Both leave the last-check gauges to the checks.
func (s *Sentinel) observe(res Result, mode Mode) {
	switch {
	case mode == ModeCheck && res.Found() > 0:
		s.streak++
	case mode == ModeCheck, mode == ModeRepair && res.Repaired >= res.Found():
		s.streak = 0
	default:
		return
	}
	s.metrics.lastRun.Set(float64(s.clock.Now().Unix()))
	s.metrics.lastChecked.Set(float64(res.Checked))
	s.metrics.lastFound.Set(float64(res.Found()))
	s.metrics.streak.Set(float64(s.streak))
	if mode == ModeCheck { // a rebuild does not count the code-share children
		s.metrics.codeShare.Set(float64(res.CodeShare))
	}
}

func fate(mode Mode) string {
	if mode.dryRun() {
		return "left as it is (dry run)"
	}
	return "repaired from PostgreSQL"
}

func flightIDs(fs []flight.Flight) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.FLID
	}
	return out
}

type metrics struct {
	drift       *prometheus.CounterVec
	repaired    prometheus.Counter
	lastRun     prometheus.Gauge
	lastChecked prometheus.Gauge
	lastFound   prometheus.Gauge
	streak      prometheus.Gauge
	codeShare   prometheus.Gauge
	lost        prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_projection_drift_total",
			Help: "Flights whose Redis projection differed from PostgreSQL, by kind (missing, stale, content, extra) and mode (check, repair, dry_run)."}, []string{"kind", "mode"}),
		repaired: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_projection_repaired_total",
			Help: "Projection entries rewritten from PostgreSQL or removed by the consistency sentinel."}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_projection_check_last_run_timestamp_seconds",
			Help: "When the last consistency check ended (Unix time)."}),
		lastChecked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_projection_check_last_checked",
			Help: "Flights the last consistency check compared."}),
		lastFound: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_projection_check_last_drift",
			Help: "Drifted flights the last consistency check found (and repaired)."}),
		streak: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_projection_check_drift_streak",
			Help: "Consecutive consistency checks that found drift; alert at 2."}),
		codeShare: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_projection_check_codeshare_violations",
			Help: "Active code-share children whose master is deleted, as the last consistency check found them (should be 0)."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_projection_lost_total",
			Help: "Rebuilds of the whole projection the backfill started because Redis had lost the projection's sentinel key."}),
	}
	for _, k := range projection.Kinds() {
		for _, mode := range []Mode{ModeCheck, ModeRepair, ModeDryRun} {
			m.drift.WithLabelValues(string(k), string(mode))
		}
	}
	reg.MustRegister(m.drift, m.repaired, m.lastRun, m.lastChecked, m.lastFound, m.streak, m.codeShare, m.lost)
	return m
}
