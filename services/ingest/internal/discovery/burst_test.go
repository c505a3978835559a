package discovery

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/msgexchange/msgexchange/pkg/cursor"
)

// The scenario of a burst of holes, on real concurrent MariaDB transactions: 603 inserts at about 200 rows/s
// from four writers, every 75th rolled back (8 holes), and one insert whose transaction stays
// open past max-commit-delay. Rounds run on the injected clock, 100 ms apart while the burst
// lasts and on the poll interval after it. Every committed row is enqueued within
// max-commit-delay plus two poll intervals of the last hole's first sighting (one wait per
// burst, not per hole), and the open insert is released as a hole and then found as a late
// arrival, never skipped. The batch (100) is smaller than the burst, so the holes beyond it are
// seen by the scan of the hole window.
// Guards R-INV-1.
func TestBurstOfHolesWaitsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.PollInterval = time.Second
	// A batch smaller than the burst: the holes past it are seen by the window scan (D-15).
	e.cfg.ClaimBatch = 100
	p := e.poller()
	const total, writers, rollbackEvery = 603, 4, 75

	open, openID := e.hold() // in flight for the whole scenario
	var (
		mu        sync.Mutex
		committed = []int64{openID + 0} // filled below; openID is not committed yet
		holes     []int64
	)
	committed = committed[:0]
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	next := make(chan int, total)
	for i := range total {
		next <- i
	}
	close(next)
	// The writers' own pool: upstream's sessions, apart from the harness's small admin pool.
	up, err := sql.Open("mysql", e.my.AdminDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	conns := make([]*sql.Conn, writers)
	for w := range writers {
		if conns[w], err = up.Conn(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conns[w].Close() })
	}
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func(c *sql.Conn) {
			defer wg.Done()
			for i := range next {
				// 200 rows/s overall: each writer paces its own share.
				if d := time.Until(start.Add(time.Duration(i) * 5 * time.Millisecond)); d > 0 {
					time.Sleep(d)
				}
				tx, err := c.BeginTx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				id := e.insert(tx)
				if i%rollbackEvery == rollbackEvery-1 {
					_ = tx.Rollback()
					mu.Lock()
					holes = append(holes, id)
					mu.Unlock()
					continue
				}
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				committed = append(committed, id)
				mu.Unlock()
			}
		}(conns[w])
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// seen records each missing ID's first sighting as the rounds report it.
	seen := map[int64]time.Time{}
	record := func() {
		hs, err := cursor.OpenHoles(t.Context(), e.pg.Pool, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			for id := h.First; id <= h.Last; id++ {
				if _, ok := seen[id]; !ok {
					seen[id] = h.SeenAt
				}
			}
		}
	}
	for burst := true; burst; {
		select {
		case <-done:
			burst = false
		case <-time.After(100 * time.Millisecond):
		}
		e.clk.Advance(100 * time.Millisecond)
		for e.round(p) { // a full page: the next round at once, as Run does (R-INGEST-13)
		}
		record()
	}
	if len(holes) != total/rollbackEvery {
		t.Fatalf("%d rolled-back inserts, want %d", len(holes), total/rollbackEvery)
	}
	var lastSighting time.Time
	for _, h := range append(slices.Clone(holes), openID) {
		at, ok := seen[h]
		if !ok {
			t.Fatalf("hole %d was never seen by a round (holes %v)", h, holes)
		}
		lastSighting = maxTime(lastSighting, at)
	}
	waiting := testutil.ToFloat64(p.metrics.waitingRows)
	if waiting == 0 || testutil.ToFloat64(p.metrics.openHoles) == 0 {
		t.Errorf("after the burst: waiting rows %v, open holes %v; want both above 0", waiting, testutil.ToFloat64(p.metrics.openHoles))
	}
	// After the burst, rounds on the poll interval until every committed row is enqueued.
	slices.Sort(committed)
	deadline := lastSighting.Add(e.cfg.MaxCommitDelay + 2*e.cfg.PollInterval)
	for !slices.Equal(e.queued(), committed) {
		if e.clk.Now().After(deadline) {
			t.Fatalf("at %s (%s after the last hole's first sighting) %d of %d rows are enqueued",
				e.clk.Now().Sub(t0), e.clk.Now().Sub(lastSighting), len(e.queued()), len(committed))
		}
		e.clk.Advance(e.cfg.PollInterval)
		for e.round(p) { // a full batch: the next round at once (R-INGEST-13)
		}
	}
	t.Logf("%d rows, %d rolled back, 1 open: all enqueued %s after the first round, %s after the last hole's first sighting; %v rows waited at the burst's end",
		len(committed), len(holes), e.clk.Now().Sub(t0), e.clk.Now().Sub(lastSighting), waiting)
	released, err := cursor.WatchedHoles(t.Context(), e.pg.Pool, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Each hole waited once, from its own first sighting: released at its delay, within a poll.
	for _, h := range released {
		if w := h.ReleasedAt.Sub(seen[h.First]); w < e.cfg.MaxCommitDelay || w > e.cfg.MaxCommitDelay+e.cfg.PollInterval {
			t.Errorf("hole %d-%d released %s after its first sighting, want %s to %s", h.First, h.Last, w,
				e.cfg.MaxCommitDelay, e.cfg.MaxCommitDelay+e.cfg.PollInterval)
		}
	}
	if len(released) != len(holes)+1 {
		t.Errorf("%d holes released, want the %d rolled back and the open one", len(released), len(holes))
	}

	// The insert still open past the delay was released as a hole; once it commits it is a
	// late arrival, enqueued, not lost.
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Reconcile(t.Context(), e.tx); err != nil || n != 1 {
		t.Fatalf("reconcile = %d, %v; want the open insert %d as one late arrival", n, err, openID)
	}
	if q := e.queued(); !slices.Contains(q, openID) {
		t.Errorf("the late insert %d is not enqueued", openID)
	}
	s, err := cursor.Holes(t.Context(), e.pg.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if s.LateEnqueued != 1 {
		t.Errorf("late arrivals enqueued = %d, want 1", s.LateEnqueued)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
