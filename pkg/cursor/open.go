package cursor

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// OpenHole is a range of missing IDs above W that a round saw with a larger ID committed
// beyond it: each waits pipeline.max-commit-delay from its own first sighting (R-INGEST-4,
// R-INGEST-6, D-15).
type OpenHole struct {
	First, Last int64
	SeenAt      time.Time
}

// IDs is how many missing IDs the range holds.
func (h OpenHole) IDs() int64 { return h.Last - h.First + 1 }

// OpenHoles returns the open holes in ID order, at most limit of them (limit ≤ 0: all). Rows at
// or below W are stale (the next round removes them); the caller skips them.
func OpenHoles(ctx context.Context, q db.Executor, limit int) ([]OpenHole, error) {
	sql := `SELECT first_id, last_id, seen_at FROM inbox_open_hole ORDER BY first_id`
	args := []any{}
	if limit > 0 {
		sql += ` LIMIT $1`
		args = append(args, limit)
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list open holes: %w", err)
	}
	defer rows.Close()
	var out []OpenHole
	for rows.Next() {
		var h OpenHole
		if err := rows.Scan(&h.First, &h.Last, &h.SeenAt); err != nil {
			return nil, fmt.Errorf("list open holes: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list open holes: %w", err)
	}
	return out, nil
}

// OpenHoleStats summarises the open holes above w for status: how many ranges and IDs, and
// the oldest first sighting among them (nil when there is none).
type OpenHoleStats struct {
	Ranges, IDs int64
	OldestSeen  *time.Time
}

// OpenHoleSummary counts the open holes above w.
func OpenHoleSummary(ctx context.Context, q db.Executor, w int64) (OpenHoleStats, error) {
	var s OpenHoleStats
	err := q.QueryRow(ctx, `SELECT count(*), coalesce(sum(last_id - first_id + 1), 0), min(seen_at)
		FROM inbox_open_hole WHERE first_id > $1`, w).Scan(&s.Ranges, &s.IDs, &s.OldestSeen)
	if err != nil {
		return s, fmt.Errorf("count open holes: %w", err)
	}
	return s, nil
}

// SaveOpenHoles replaces the open holes old (as loaded) by now (as planned), writing only the
// difference: a range that changed in any way is deleted and inserted again. Under steady
// traffic most ranges stay as they were, so a round writes a few rows, not the window.
func SaveOpenHoles(ctx context.Context, q db.Executor, old, now []OpenHole) error {
	oldBy := make(map[int64]OpenHole, len(old))
	for _, o := range old {
		oldBy[o.First] = o
	}
	nowBy := make(map[int64]OpenHole, len(now))
	for _, n := range now {
		nowBy[n.First] = n
	}
	same := func(a OpenHole, b OpenHole, ok bool) bool {
		return ok && a.Last == b.Last && a.SeenAt.Equal(b.SeenAt)
	}
	var del []int64
	for _, o := range old {
		if n, ok := nowBy[o.First]; !same(o, n, ok) {
			del = append(del, o.First)
		}
	}
	var first, last []int64
	var seen []time.Time
	for _, n := range now {
		if o, ok := oldBy[n.First]; !same(n, o, ok) {
			first, last, seen = append(first, n.First), append(last, n.Last), append(seen, n.SeenAt)
		}
	}
	if len(del) > 0 {
		if _, err := q.Exec(ctx, `DELETE FROM inbox_open_hole WHERE first_id = ANY($1)`, del); err != nil {
			return fmt.Errorf("save open holes: delete %d: %w", len(del), err)
		}
	}
	if len(first) > 0 {
		if _, err := q.Exec(ctx, `INSERT INTO inbox_open_hole (first_id, last_id, seen_at)
			SELECT f, l, s FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[]) AS h(f, l, s)`, first, last, seen); err != nil {
			return fmt.Errorf("save open holes: insert %d: %w", len(first), err)
		}
	}
	return nil
}

// Discovery is what a round leaves for status beside W (GetStatus, D-15).
type Discovery struct {
	// ScannedTo: every ID in (W, ScannedTo] was looked at; the missing ones are open holes.
	ScannedTo int64
	// WaitingRows: rows visible in (W, ScannedTo], not enqueued yet.
	WaitingRows int64
	// WaitingSince: when the oldest of them was first seen; nil when none waits.
	WaitingSince *time.Time
	// MaxCommitDelay is ingest's pipeline.max-commit-delay, for the release times.
	MaxCommitDelay time.Duration
}

// SaveDiscovery writes the round's view of what waits beyond W.
func SaveDiscovery(ctx context.Context, q db.Executor, d Discovery) error {
	_, err := q.Exec(ctx, `UPDATE inbox_cursor SET scanned_to = $1, waiting_rows = $2, waiting_since = $3,
		max_commit_delay_ms = $4 WHERE id = 1`, d.ScannedTo, d.WaitingRows, d.WaitingSince, d.MaxCommitDelay.Milliseconds())
	if err != nil {
		return fmt.Errorf("save discovery status: %w", err)
	}
	return nil
}

// LoadDiscovery reads what SaveDiscovery wrote.
func LoadDiscovery(ctx context.Context, q db.Executor) (Discovery, error) {
	var d Discovery
	var ms *int64
	err := q.QueryRow(ctx, `SELECT scanned_to, waiting_rows, waiting_since, max_commit_delay_ms FROM inbox_cursor WHERE id = 1`).
		Scan(&d.ScannedTo, &d.WaitingRows, &d.WaitingSince, &ms)
	if err != nil {
		return d, fmt.Errorf("load discovery status: %w", err)
	}
	if ms != nil {
		d.MaxCommitDelay = time.Duration(*ms) * time.Millisecond
	}
	return d, nil
}

// FillBuckets are the upper bounds (seconds) of msgx_ingest_hole_fill_seconds and of
// inbox_hole_fill: from a few milliseconds (two inserts committing in the other order) to
// well past the 5-minute default of max-commit-delay, so the tail that chooses it is resolved.
var FillBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 90, 120, 180, 240, 300, 450, 600, 1200, 1800, 3600}

// RecordFills adds measured commit delays (seconds) to the persisted histogram and its maximum.
func RecordFills(ctx context.Context, q db.Executor, fills []float64, now time.Time) error {
	if len(fills) == 0 {
		return nil
	}
	counts := map[float64]int64{}
	maxFill := 0.0
	for _, f := range fills {
		counts[bucketOf(f)]++
		maxFill = max(maxFill, f)
	}
	les := make([]float64, 0, len(counts))
	ns := make([]int64, 0, len(counts))
	for le, n := range counts {
		les, ns = append(les, le), append(ns, n)
	}
	if _, err := q.Exec(ctx, `INSERT INTO inbox_hole_fill (le_seconds, fills)
		SELECT le, n FROM unnest($1::double precision[], $2::bigint[]) AS b(le, n)
		ON CONFLICT (le_seconds) DO UPDATE SET fills = inbox_hole_fill.fills + excluded.fills`, les, ns); err != nil {
		return fmt.Errorf("record %d hole fills: %w", len(fills), err)
	}
	if _, err := q.Exec(ctx, `UPDATE inbox_cursor SET hole_fill_max_seconds = $1, hole_fill_max_at = $2
		WHERE id = 1 AND (hole_fill_max_seconds IS NULL OR hole_fill_max_seconds < $1)`, maxFill, now); err != nil {
		return fmt.Errorf("record the longest hole fill: %w", err)
	}
	return nil
}

func bucketOf(f float64) float64 {
	for _, le := range FillBuckets {
		if f <= le {
			return le
		}
	}
	return math.Inf(1)
}

// FillStats is the measured commit delay so far (docs/operations.md, "Choosing
// pipeline.max-commit-delay").
type FillStats struct {
	Count int64
	// Max is the longest fill and when it was measured; nil before the first.
	Max   *float64
	MaxAt *time.Time
	// P99 is the upper bound of the bucket that holds the 99th percentile (a bound, never an
	// underestimate; +Inf when it lies past the last bucket); nil before the first fill.
	P99 *float64
}

// Fills reads the persisted histogram.
func Fills(ctx context.Context, q db.Executor) (FillStats, error) {
	var s FillStats
	if err := q.QueryRow(ctx, `SELECT hole_fill_max_seconds, hole_fill_max_at FROM inbox_cursor WHERE id = 1`).Scan(&s.Max, &s.MaxAt); err != nil {
		return s, fmt.Errorf("read hole fills: %w", err)
	}
	rows, err := q.Query(ctx, `SELECT le_seconds, fills FROM inbox_hole_fill ORDER BY le_seconds`)
	if err != nil {
		return s, fmt.Errorf("read hole fills: %w", err)
	}
	defer rows.Close()
	type bucket struct {
		le float64
		n  int64
	}
	var bs []bucket
	for rows.Next() {
		var b bucket
		if err := rows.Scan(&b.le, &b.n); err != nil {
			return s, fmt.Errorf("read hole fills: %w", err)
		}
		bs = append(bs, b)
		s.Count += b.n
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("read hole fills: %w", err)
	}
	s.P99 = quantileBound(bs, s.Count, 0.99, func(b bucket) (float64, int64) { return b.le, b.n })
	return s, nil
}

func quantileBound[B any](bs []B, total int64, q float64, get func(B) (float64, int64)) *float64 {
	if total == 0 {
		return nil
	}
	rank := int64(math.Ceil(q * float64(total)))
	var seen int64
	for _, b := range bs {
		le, n := get(b)
		if seen += n; seen >= rank {
			return &le
		}
	}
	return nil
}

// ReleaseHoles records ranges as permanent holes, to be watched for late arrivals
// (R-INGEST-8), in one statement however many one round released.
func ReleaseHoles(ctx context.Context, q db.Executor, holes [][2]int64, now time.Time) error {
	return releaseHoles(ctx, q, holes, now)
}
