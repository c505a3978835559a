package queue

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// StatsRateWindow is how far back Stats looks to measure the finishing rate (R-PUMP-13).
const StatsRateWindow = 5 * time.Minute

// Backlog is what the pump's backlog gauges read every backlog interval, in every instance
// (R-PUMP-13): each figure is an index scan of the rows it counts (unfinished, DEAD, finished
// in the window), so it costs the same on a proc_state of a week's million rows as on an empty
// one.
type Backlog struct {
	// DeadByErrorClass counts the DEAD rows no operator acknowledged, by their error class:
	// they stay DEAD until an operator replays or acknowledges them, which is what the DEAD
	// alert watches. DeadAcknowledgedByErrorClass counts the acknowledged ones.
	DeadByErrorClass             map[ErrorClass]int64
	DeadAcknowledgedByErrorClass map[ErrorClass]int64

	// Unfinished counts PENDING and FAILED rows.
	Unfinished int64
	// OldestUnfinishedEnqueuedAt is when the oldest unfinished row was enqueued (nil when there
	// is none) and OldestUnfinishedAge its age at now. Ingest's enqueued_at is used, not the
	// inbox's received_at: it is our clock and never NULL.
	OldestUnfinishedEnqueuedAt *time.Time
	OldestUnfinishedAge        time.Duration

	// FinishedInWindow counts rows that became terminal in (now-StatsRateWindow, now], and
	// FinishedPerSecond is that over the window's length.
	FinishedInWindow  int64
	FinishedPerSecond float64
	// EstimatedDrain is Unfinished ÷ FinishedPerSecond (R-PUMP-13). It is zero when nothing is
	// unfinished and nil when rows are unfinished but none finished in the window: the drain
	// time is then unknown, not infinite (the pump may have just started or be stalled).
	EstimatedDrain *time.Duration
}

// Statistics summarises proc_state for the status RPC: the Backlog and the breakdowns an
// operator reads on demand.
type Statistics struct {
	Backlog
	// ByState has an entry for every state, zero included, so callers can print a stable table.
	// PENDING, FAILED and DEAD are always counted; SUCCEEDED and SKIPPED, the bulk of a week's
	// rows, are counted while the planner's statistics put them under ExactCountBelow and
	// estimated from those statistics above it, as Estimated says.
	ByState map[State]int64
	// Estimated holds the states whose ByState entry is an estimate (only ever SUCCEEDED and
	// SKIPPED).
	Estimated map[State]bool
	// ByErrorClass counts the rows that carry each class, whatever their state (a FAILED row's
	// class is its last transient failure); classes that occur on no row are absent.
	ByErrorClass map[ErrorClass]int64

	// BackfillPending counts terminal rows whose marker is neither written nor abandoned: the
	// backfill's remaining work (R-BACKFILL-2).
	BackfillPending int64
	// BackfillAbandoned counts abandoned rows, in total and by backfill_abandon_reason.
	BackfillAbandoned         int64
	BackfillAbandonedByReason map[string]int64
}

// backlogColumns and backlogFrom are Backlog's part of a statement; the predicates repeat the
// partial indexes' ones verbatim (proc_state_unfinished, proc_state_finished, and
// proc_state_dead, whose columns make the DEAD counts index-only scans), so every count reads
// only the index entries of the rows it counts.
const (
	backlogColumns = `(SELECT coalesce(jsonb_object_agg(error_class, n), '{}') FROM
			(SELECT coalesce(error_class, '') AS error_class, count(*) AS n FROM proc_state
			 WHERE state = 'DEAD' AND acknowledged_at IS NULL GROUP BY 1) AS g),
		(SELECT coalesce(jsonb_object_agg(error_class, n), '{}') FROM
			(SELECT coalesce(error_class, '') AS error_class, count(*) AS n FROM proc_state
			 WHERE state = 'DEAD' AND acknowledged_at IS NOT NULL GROUP BY 1) AS g),
		u.n, u.oldest,
		(SELECT count(*) FROM proc_state WHERE finished_at IS NOT NULL AND finished_at > $1 AND finished_at <= $2)`
	backlogFrom = `FROM (SELECT count(*) AS n, min(enqueued_at) AS oldest FROM proc_state
			WHERE state IN ('PENDING', 'FAILED')) AS u`
)

// backlogScan holds what backlogColumns scan into until finish turns it into b's fields.
type backlogScan struct {
	b                  *Backlog
	deadByClass, acked map[string]int64
}

func (sc *backlogScan) dest() []any {
	return []any{&sc.deadByClass, &sc.acked, &sc.b.Unfinished, &sc.b.OldestUnfinishedEnqueuedAt, &sc.b.FinishedInWindow}
}

func (sc *backlogScan) finish(now time.Time) {
	b := sc.b
	b.DeadByErrorClass, b.DeadAcknowledgedByErrorClass = classes(sc.deadByClass), classes(sc.acked)
	if b.OldestUnfinishedEnqueuedAt != nil {
		// An enqueued_at ahead of now (another instance's clock) reads as zero, not negative.
		b.OldestUnfinishedAge = max(now.Sub(*b.OldestUnfinishedEnqueuedAt), 0)
	}
	b.FinishedPerSecond = float64(b.FinishedInWindow) / StatsRateWindow.Seconds()
	b.EstimatedDrain = estimateDrain(b.Unfinished, b.FinishedPerSecond)
}

func classes(m map[string]int64) map[ErrorClass]int64 {
	out := make(map[ErrorClass]int64, len(m))
	for k, n := range m {
		out[ErrorClass(k)] = n
	}
	return out
}

// ReadBacklog reads the backlog figures at now (the caller's clock; the rate window and the
// ages are measured from it, never from the database's now()), in one statement, so they come
// from one snapshot.
func ReadBacklog(ctx context.Context, q db.Executor, now time.Time) (Backlog, error) {
	var b Backlog
	sc := backlogScan{b: &b}
	if err := q.QueryRow(ctx, `SELECT `+backlogColumns+` `+backlogFrom, now.Add(-StatsRateWindow), now).Scan(sc.dest()...); err != nil {
		return b, fmt.Errorf("queue backlog: %w", err)
	}
	sc.finish(now)
	return b, nil
}

// ExactCountBelow is the most rows of a terminal state that Stats counts exactly. Counting
// SUCCEEDED at a week's million rows read the whole table each time an operator asked (136 ms, a
// parallel scan on both cores, docs/performance.md); an operator reads the flow from the backlog figures and
// the few non-terminal and DEAD rows, which stay exact, and a week's successes to three digits
// are as useful as to seven. Under this many rows the count is an index scan of a few
// milliseconds and stays exact, so a small or new system never shows an estimate.
const ExactCountBelow = 50_000

// bulkStates are the states Stats may estimate.
var bulkStates = []State{Succeeded, Skipped}

// Stats reads the queue's statistics at now, as ReadBacklog does, with the breakdowns.
//
// The counts come from one statement, and from one snapshot with the exact counts of the bulk
// states when q is a REPEATABLE READ transaction, as control's reads are (in READ COMMITTED
// every subquery of a statement sees the statement's snapshot). Every count reads an index's
// entries for the rows it counts, never the whole table (docs/performance.md, "Cost flat as the
// data grows"); the bulk states are estimated instead of counted once they pass ExactCountBelow.
func Stats(ctx context.Context, q db.Executor, now time.Time) (Statistics, error) {
	s := Statistics{
		ByState:                   map[State]int64{Pending: 0, Failed: 0, Succeeded: 0, Skipped: 0, Dead: 0},
		Estimated:                 map[State]bool{},
		BackfillAbandonedByReason: map[string]int64{},
	}
	sc := backlogScan{b: &s.Backlog}
	var (
		byState, counted, byClass, byReason map[string]int64
		est                                 tableEstimate
	)
	err := q.QueryRow(ctx, `SELECT `+backlogColumns+`,
		(SELECT coalesce(jsonb_object_agg(state, n), '{}') FROM
			(SELECT state, count(*) AS n FROM proc_state WHERE state IN ('PENDING', 'FAILED', 'DEAD') GROUP BY state) AS g),
		(SELECT coalesce(jsonb_object_agg(error_class, n), '{}') FROM
			(SELECT error_class, count(*) AS n FROM proc_state WHERE error_class IS NOT NULL GROUP BY error_class) AS g),
		(SELECT coalesce(jsonb_object_agg(backfill_abandon_reason, n), '{}') FROM
			(SELECT coalesce(backfill_abandon_reason, 'UNKNOWN') AS backfill_abandon_reason, count(*) AS n
			 FROM proc_state WHERE backfill_abandoned_at IS NOT NULL GROUP BY 1) AS g),
		(SELECT count(*) FROM proc_state
			WHERE backfill_at IS NULL AND backfill_abandoned_at IS NULL AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')),
		`+estimateColumns+`
		`+backlogFrom, now.Add(-StatsRateWindow), now).
		Scan(append(sc.dest(), &byState, &byClass, &byReason, &s.BackfillPending, &est.rows, &est.freqs)...)
	if err != nil {
		return s, fmt.Errorf("queue statistics: %w", err)
	}
	sc.finish(now)
	var count []string
	for _, st := range bulkStates {
		if n, ok := est.of(st); ok && n >= ExactCountBelow {
			s.ByState[st], s.Estimated[st] = n, true
		} else {
			count = append(count, string(st))
		}
	}
	if len(count) > 0 {
		// The planner's statistics put each of these under ExactCountBelow (or the table has
		// none yet, as after a restore): an index scan of their entries.
		if err := q.QueryRow(ctx, `SELECT coalesce(jsonb_object_agg(state, n), '{}') FROM
			(SELECT state, count(*) AS n FROM proc_state WHERE state = ANY($1) GROUP BY state) AS g`, count).
			Scan(&counted); err != nil {
			return s, fmt.Errorf("queue statistics: count %v: %w", count, err)
		}
	}
	for _, m := range []map[string]int64{byState, counted} {
		for k, n := range m {
			s.ByState[State(k)] = n
		}
	}
	s.ByErrorClass = classes(byClass)
	for k, n := range byReason {
		s.BackfillAbandonedByReason[k] = n
		s.BackfillAbandoned += n
	}
	return s, nil
}

// estimateColumns read what the planner knows of proc_state: its rows, scaled from the last
// VACUUM or ANALYZE to the table's pages now, the way the planner scales them (NULL before the
// table has statistics), and the frequency of each common state in ANALYZE's sample.
const estimateColumns = `(SELECT CASE WHEN c.reltuples >= 0 AND c.relpages > 0
			THEN c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8) END
			FROM pg_class c WHERE c.oid = 'proc_state'::regclass),
		(SELECT coalesce(jsonb_object_agg(m.v, m.f), '{}') FROM pg_class c
			JOIN pg_namespace n ON n.oid = c.relnamespace
			JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = 'state',
			unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS m(v, f)
			WHERE c.oid = 'proc_state'::regclass)`

// tableEstimate is what estimateColumns read.
type tableEstimate struct {
	rows  *float64
	freqs map[string]float64
}

// of is the estimated rows in state st; false when the table has no statistics yet. A state
// missing from the common values is rarer than ANALYZE's sample can see: its estimate is zero,
// so Stats counts it.
func (e tableEstimate) of(st State) (int64, bool) {
	if e.rows == nil {
		return 0, false
	}
	return int64(math.Round(*e.rows * e.freqs[string(st)])), true
}

// estimateDrain is unfinished ÷ rate, rounded up to the second: an estimate has no sub-second
// precision, and rounding up keeps a non-empty backlog from reading as "drained in 0s". A
// result too large for a Duration (a huge backlog at a trickle) is capped rather than wrapped.
func estimateDrain(unfinished int64, perSecond float64) *time.Duration {
	var d time.Duration
	switch {
	case unfinished == 0:
	case perSecond <= 0:
		return nil
	default:
		secs := math.Ceil(float64(unfinished) / perSecond)
		if secs >= float64(math.MaxInt64/int64(time.Second)) {
			d = time.Duration(math.MaxInt64/int64(time.Second)) * time.Second
		} else {
			d = time.Duration(secs) * time.Second
		}
	}
	return &d
}
