// Package republisher executes the republish jobs the control API requests (jobs.Republishes;
// docs/runbooks.md, "Kafka topic lost / consumer needs a full reload"): it writes the current
// state of every flight of a job's scope into the flight's KAFKA:schd outbox row, which the
// dispatcher then sends like every other state (same payload, key and headers).
//
// Order: each page is one transaction on the backfill role's lock connection that takes the
// pipeline lock, reads the flights and writes their outbox rows. The pump holds the same lock
// across its business transaction, so a page never reads a state the pump is changing, and
// the outbox row's version rule (R-OUTBOX-4: a row is replaced only by a state not older) keeps
// a republished version from replacing a newer one. A consumer keeping the newest
// (FLID, STATE_VERSION) therefore sees the republished state as a duplicate of what it had, or
// as the newest, never as a step back.
//
// A crash or a failover loses at most the page in flight, which the next holder of the role
// writes again; a job run twice writes the same versions again: duplicates, which consumers
// tolerate.
package republisher

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
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/services/backfill/internal/jobrun"
)

// Config is what the republisher needs; FromConfig fills it from the registry.
type Config struct {
	// Page is how many flights one locked transaction writes: the longest the pump waits for a
	// page.
	Page int
	// Poll is how often the role looks for a requested job (pipeline.poll-interval).
	Poll time.Duration
}

// page is Config.Page in production: a hundred flights' states keep the pump's wait for one
// locked transaction short.
const page = 100

// FromConfig is the republisher's configuration from the service's (pkg/config's registry).
func FromConfig(c config.Config) Config {
	return Config{Page: page, Poll: c.Pipeline.PollInterval}
}

// Republisher runs the jobs.
type Republisher struct {
	cfg     Config
	clock   clock.Clock
	logger  *slog.Logger
	written prometheus.Counter
	runner  *jobrun.Runner[jobs.RepublishJob]
}

// New builds a republisher and registers its metric.
func New(cfg Config, clk clock.Clock, logger *slog.Logger, reg prometheus.Registerer) *Republisher {
	r := &Republisher{cfg: cfg, clock: clk, logger: logger,
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_republish_flights_total",
			Help: "Flight states a republish job wrote to the KAFKA:schd outbox."})}
	r.runner = jobrun.New(jobs.Republishes, jobrun.Work[jobs.RepublishJob]{Step: r.step}, clk, logger)
	reg.MustRegister(r.written)
	return r
}

// Run executes the requested jobs until ctx ends. A failed step is recorded on its job and
// tried again at the next poll.
func (r *Republisher) Run(ctx context.Context, sess db.Txer) error {
	return r.runner.Run(ctx, sess, r.cfg.Poll)
}

// step writes one page of a running job.
func (r *Republisher) step(ctx context.Context, tx pgx.Tx, job *jobs.RepublishJob) (bool, error) {
	now := r.clock.Now()
	var page []string
	if job.All() {
		var err error
		if page, err = flightstore.SampleFLIDs(ctx, tx, job.Cursor, 1, r.cfg.Page); err != nil {
			return false, err
		}
	} else {
		page = job.NextFLIDs(r.cfg.Page)
	}
	next := jobs.RepublishProgress{Cursor: job.Cursor}
	if len(page) > 0 {
		next.Cursor = page[len(page)-1]
		written, err := r.writePage(ctx, tx, page, now)
		if err != nil {
			return false, err
		}
		next.Done, next.Unknown = int64(written), int64(len(page)-written)
	}
	if err := jobs.AdvanceRepublish(ctx, tx, job.ID, next, now); err != nil {
		return false, err
	}
	r.written.Add(float64(next.Done))
	if len(page) == r.cfg.Page {
		return true, nil
	}
	r.logger.Info("republish done", "republish_id", job.ID, "written", job.Done+next.Done, "unknown", job.Unknown+next.Unknown)
	return false, jobs.Republishes.Finish(ctx, tx, job.ID, jobs.StateDone, now)
}

// writePage writes the outbox rows of one page under the pipeline lock and returns how many of
// its FLIDs had a state (a FLID the current state does not hold, or no longer holds since the
// page was read, has nothing to send).
func (r *Republisher) writePage(ctx context.Context, tx pgx.Tx, flids []string, now time.Time) (int, error) {
	if err := leader.LockPipelineTx(ctx, tx); err != nil {
		return 0, err
	}
	flights, err := published(ctx, tx, flids)
	if err != nil {
		return 0, err
	}
	events := make([]outbox.NewEvent, 0, len(flights))
	for _, f := range flights {
		events = append(events, event(f))
	}
	if err := outbox.Add(ctx, tx, events, now); err != nil {
		return 0, err
	}
	return len(events), nil
}

// published reads the flights of a page as they are published (as flightstore.ReadPublished
// reads one: a master with the MAFL of its children) in a few round trips for the whole page,
// so the pump waits for the page's statements, not for a dozen per flight. No row locks: the
// pipeline lock the caller holds already keeps every writer of the flight state out.
func published(ctx context.Context, tx pgx.Tx, flids []string) ([]flight.Flight, error) {
	flights, err := flightstore.LoadMany(ctx, tx, nil, flids)
	if err != nil {
		return nil, err
	}
	var masters []string
	for _, f := range flights {
		if !flight.IsChild(f) {
			masters = append(masters, f.FLID)
		}
	}
	children, err := flightstore.ChildrenOfMany(ctx, tx, nil, masters)
	if err != nil {
		return nil, err
	}
	kids := map[string][]flight.Flight{}
	for _, c := range children {
		kids[c.Scalars["MAID"]] = append(kids[c.Scalars["MAID"]], c)
	}
	for i, f := range flights {
		if !flight.IsChild(f) {
			flights[i] = flight.Published(f, kids[f.FLID])
		}
	}
	return flights, nil
}

// event is the KAFKA:schd event of a flight's current state, as the pump writes it for the
// change that made the state (flight.Events): the document at the flight's own version, or a
// null-value tombstone for a deleted flight. No inbox message caused it, so it names none
// (msg_id 0), which also keeps it out of the messages' delivery latency.
func event(f flight.Flight) outbox.NewEvent {
	if f.State == flight.Deleted {
		return outbox.NewEvent{Target: outbox.TargetSchd, PartitionKey: f.FLID, Type: outbox.TypeTombstone, Version: f.Version}
	}
	return outbox.NewEvent{Target: outbox.TargetSchd, PartitionKey: f.FLID, Type: outbox.TypeUpsert, Version: f.Version,
		Payload: flight.Document(f)}
}
