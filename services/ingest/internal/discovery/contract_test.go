package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// resolve is control's ResolveContractViolation without the gRPC layer: the same library
// calls, on the test pool.
func (e *env) resolve(r cursor.Resolution) (cursor.Resolved, error) {
	e.t.Helper()
	ctx := e.t.Context()
	cur := e.cursor()
	view, err := cursor.ReadResolution(ctx, e.in, cur, r)
	if err != nil {
		return cursor.Resolved{}, err
	}
	var res cursor.Resolved
	err = e.tx.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = cursor.Resolve(ctx, tx, r, view, false, e.clk.Now())
		return err
	})
	return res, err
}

func (e *env) wantViolation(p *Poller, kind string) {
	e.t.Helper()
	c := e.cursor()
	if kind == "" {
		if c.Violation != nil {
			e.t.Fatalf("violation %+v stands, want none", c.Violation)
		}
	} else if c.Violation == nil || c.Violation.Kind != kind {
		e.t.Fatalf("violation = %+v, want %s", c.Violation, kind)
	}
	for _, k := range cursor.Kinds() {
		want := 0.0
		if k == kind {
			want = 1
		}
		if got := testutil.ToFloat64(p.metrics.violation.WithLabelValues(k)); got != want {
			e.t.Errorf("msgx_ingest_contract_violation{kind=%q} = %v, want %v", k, got, want)
		}
	}
}

// mark writes the processed marker on the rows first..last as a backfill would have.
func (e *env) mark(first, last int64, at time.Time) {
	e.t.Helper()
	if _, err := e.my.Admin.ExecContext(e.t.Context(), `UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ?, CMINMSGS_STATUS = 'PROCESSED'
		WHERE CMINMSGS_ID BETWEEN ? AND ?`, at, first, last); err != nil {
		e.t.Fatal(err)
	}
}

// restore simulates PostgreSQL restored from a backup taken when W was w: the cursor and the
// queue are as they were then, so the rows above w were never enqueued in this timeline.
func (e *env) restore(w int64) {
	e.t.Helper()
	e.pg.Exec(e.t, `UPDATE inbox_cursor SET w = $1, hole_since = NULL`, w)
	e.pg.Exec(e.t, `DELETE FROM proc_state WHERE msg_id > $1`, w)
}

// The inbox truncated (AUTO_INCREMENT back to 1) behind W: discovery stops with
// inbox-behind-watermark instead of silently never seeing the new rows; it shows in the metric,
// the lag goes negative, nothing is enqueued while it stands (not even a new row above W, nor a
// late arrival), resuming is refused until the inbox is past W again, and after the fix every
// message is enqueued once.
// Guards R-INV-21.
func TestInboxBehindWatermarkStopsDiscovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.poller()
	a, ida := e.hold() // a hole that will be released and watched for late arrivals
	var old []int64
	for range 3 {
		old = append(old, e.insert(e.my.Admin))
	}
	e.round(p)
	e.clk.Advance(5 * time.Minute)
	e.round(p)
	w := old[2]
	e.wantW(w)
	e.wantQueued(old...)

	if err := a.Rollback(); err != nil { // the released hole never fills in this timeline
		t.Fatal(err)
	}
	if _, err := e.my.Admin.ExecContext(t.Context(), `TRUNCATE TABLE cminmsgs`); err != nil {
		t.Fatal(err)
	}
	reused := e.insert(e.my.Admin) // a new message under a reused ID
	if reused > w {
		t.Fatalf("after TRUNCATE the next ID is %d, want one at or below W %d", reused, w)
	}
	e.clk.Advance(time.Second)
	if more := e.round(p); more {
		t.Error("a round that found a violation reports more")
	}
	e.wantViolation(p, cursor.KindInboxBehind)
	e.wantW(w)
	e.wantQueued(old...)
	c := e.cursor()
	if !c.Violation.Since.Equal(e.clk.Now()) || !strings.Contains(c.Violation.Detail, fmt.Sprintf("largest ID %d is below W %d", reused, w)) {
		t.Errorf("violation = %+v, want since %v naming inbox max %d and W %d", c.Violation, e.clk.Now(), reused, w)
	}
	if got := testutil.ToFloat64(p.metrics.lag); got != float64(reused-w) {
		t.Errorf("msgx_ingest_watermark_lag = %v, want %d (negative: the inbox is behind W)", got, reused-w)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "kind="+cursor.KindInboxBehind) {
		t.Errorf("no ERROR log naming the violation:\n%s", logs)
	}

	// While it stands: a restarted process keeps it (persisted), rows written meanwhile are
	// not enqueued, even one above W, and the late-arrival watch does not enqueue the new row
	// that reused the released hole's ID either.
	p = e.poller()
	for e.insert(e.my.Admin) <= w {
	}
	above := w + 1
	e.clk.Advance(time.Minute)
	e.round(p)
	if n, err := p.Reconcile(t.Context(), e.tx); err != nil || n != 0 {
		t.Errorf("reconcile while the violation stands = %d, %v; want 0", n, err)
	}
	e.wantViolation(p, cursor.KindInboxBehind)
	e.wantW(w)
	e.wantQueued(old...)
	if !e.cursor().Violation.Since.Equal(c.Violation.Since) {
		t.Errorf("violation since moved to %v, want the first observation %v", e.cursor().Violation.Since, c.Violation.Since)
	}

	// The way out. The database team moves the rows written under IDs that already belong to
	// enqueued messages above W (here: deletes them and writes the messages again once the
	// counter is past W). The row in the released hole may stay: its ID never held a message,
	// so the late-arrival watch enqueues it. A resume before the inbox is past W is refused.
	if _, err := e.my.Admin.ExecContext(t.Context(), `DELETE FROM cminmsgs WHERE CMINMSGS_ID > ? OR CMINMSGS_ID <= ? AND CMINMSGS_ID <> ?`,
		w, w, ida); err != nil {
		t.Fatal(err)
	}
	if _, err := e.resolve(cursor.Resolution{Kind: cursor.KindInboxBehind, Action: cursor.ActionResume}); !errors.Is(err, cursor.ErrStillBehind) {
		t.Fatalf("resume while the inbox is behind = %v, want ErrStillBehind", err)
	}
	if _, err := e.my.Admin.ExecContext(t.Context(), fmt.Sprintf(`ALTER TABLE cminmsgs AUTO_INCREMENT = %d`, above)); err != nil {
		t.Fatal(err)
	}
	moved := []int64{e.insert(e.my.Admin), e.insert(e.my.Admin)}
	if moved[0] != above {
		t.Fatalf("after the fix the next ID is %d, want %d", moved[0], above)
	}
	if _, err := e.resolve(cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionResume}); !errors.Is(err, cursor.ErrNoViolation) {
		t.Errorf("resolving the other kind = %v, want ErrNoViolation", err)
	}
	res, err := e.resolve(cursor.Resolution{Kind: cursor.KindInboxBehind, Action: cursor.ActionResume})
	if err != nil {
		t.Fatal(err)
	}
	if res.W != w || res.InboxMax != moved[1] {
		t.Errorf("resume = %+v, want W %d kept and inbox max %d", res, w, moved[1])
	}
	e.round(p)
	e.wantViolation(p, "")
	e.wantQueued(append(append([]int64{}, old...), moved...)...)
	e.wantW(moved[1])
	if got := testutil.ToFloat64(p.metrics.lag); got != 0 {
		t.Errorf("lag after the fix = %v, want 0", got)
	}
	// The row that appeared in the released hole while it stood is found now, once.
	if n, err := p.Reconcile(t.Context(), e.tx); err != nil || n != 1 {
		t.Errorf("reconcile after the resolution = %d, %v; want the late row %d", n, err, ida)
	}
	e.round(p)
	if n, err := p.Reconcile(t.Context(), e.tx); err != nil || n != 0 {
		t.Errorf("second reconcile = %d, %v; want 0", n, err)
	}
	e.wantQueued(append(append([]int64{ida}, old...), moved...)...)
	if !strings.Contains(e.logs.String(), "contract violation resolved") {
		t.Errorf("no log of the resolution:\n%s", e.logs.String())
	}
}

// PostgreSQL restored from an older backup (simulated: W and proc_state lowered below rows
// the lost timeline processed and marked): discovery enqueues the unmarked rows before the
// first marked one and stops there with marked-above-watermark. Skipping the marked run moves
// W over it without enqueueing it (no business runs twice); the unmarked rows after it are
// enqueued as usual, and a later marked row stops W again.
// Guards R-INV-21.
func TestMarkedAboveWatermarkStopsDiscovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.poller()
	var r []int64
	for range 3 {
		r = append(r, e.insert(e.my.Admin))
	}
	e.round(p) // the backup's timeline: r0..r2 enqueued, the marker watch begins
	if c := e.cursor(); c.MarkerSince == nil || !c.MarkerSince.Equal(t0) {
		t.Fatalf("marker_since = %v, want %v (the first round outside shadow mode)", c.MarkerSince, t0)
	}
	for range 6 {
		r = append(r, e.insert(e.my.Admin))
	}
	gap := e.gap()
	r = append(r, e.insert(e.my.Admin)) // r9, after an ID that never exists
	// The lost timeline: r3..r8 enqueued, r9 once the gap was released; r4, r5, r7 and r9
	// processed and marked; r3 and r6 not (yet) marked when it ended, r8 never processed.
	e.clk.Advance(time.Second)
	e.round(p)
	e.wantQueued(r[:9]...)
	e.clk.Advance(time.Hour)
	e.mark(r[4], r[5], e.clk.Now().Add(-30*time.Minute))
	e.mark(r[7], r[7], e.clk.Now().Add(-20*time.Minute))
	e.mark(r[9], r[9], e.clk.Now().Add(-10*time.Minute))
	e.restore(r[2])
	e.wantQueued(r[:3]...)

	e.round(p)
	e.wantViolation(p, cursor.KindMarkedAbove)
	e.wantW(r[3])
	e.wantQueued(r[:4]...) // r3 carries no marker: enqueued like any new row
	c := e.cursor()
	if !strings.Contains(c.Violation.Detail, fmt.Sprintf("inbox row %d above W %d", r[4], r[3])) {
		t.Errorf("detail = %q, want it to name row %d and W %d", c.Violation.Detail, r[4], r[3])
	}
	for range 3 {
		e.clk.Advance(time.Second)
		e.round(p)
	}
	e.wantW(r[3])
	e.wantQueued(r[:4]...)
	e.wantViolation(p, cursor.KindMarkedAbove)

	res, err := e.resolve(cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionSkipMarked})
	if err != nil {
		t.Fatal(err)
	}
	if res.Before != r[3] || res.W != r[5] || res.Skipped != 2 || res.FirstUnmarked != r[6] || res.More {
		t.Errorf("skip = %+v, want W %d → %d, 2 skipped, first unmarked %d", res, r[3], r[5], r[6])
	}
	e.round(p)
	// r6 enqueued (unmarked: processed again if the lost timeline had, an accepted
	// duplicate), W stops again before the marked r7.
	e.wantViolation(p, cursor.KindMarkedAbove)
	e.wantW(r[6])
	e.wantQueued(append(append([]int64{}, r[:4]...), r[6])...)

	// through names the end of what may be skipped: a through that covers the unmarked r8 is
	// refused; one up to r7 passes r7 alone.
	if _, err := e.resolve(cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionSkipMarked, Through: r[9]}); !errors.Is(err, cursor.ErrNotMarked) {
		t.Fatalf("skip through %d over the unmarked %d = %v, want ErrNotMarked", r[9], r[8], err)
	}
	e.wantW(r[6])
	if res, err = e.resolve(cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionSkipMarked, Through: r[7]}); err != nil || res.W != r[7] {
		t.Fatalf("skip through %d = %+v, %v; want W %d", r[7], res, err, r[7])
	}
	e.round(p)
	e.wantW(r[8])
	e.wantViolation(p, cursor.KindMarkedAbove)
	// r9 comes after a gap: skipping it records the gap as a watched hole.
	if res, err = e.resolve(cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionSkipMarked}); err != nil || res.W != r[9] ||
		len(res.Holes) != 1 || res.Holes[0] != [2]int64{gap, gap} {
		t.Fatalf("skip over the gap = %+v, %v; want W %d and hole %d", res, err, r[9], gap)
	}
	holes, err := cursor.WatchedHoles(t.Context(), e.pg.Pool, t0)
	if err != nil || len(holes) != 1 || holes[0].First != gap {
		t.Errorf("watched holes = %+v, %v; want [%d,%d]", holes, err, gap, gap)
	}
	r10 := e.insert(e.my.Admin)
	e.round(p)
	e.wantViolation(p, "")
	e.wantW(r10)
	// Every row of the inbox is enqueued once, except the ones the lost timeline marked.
	e.wantQueued(r[0], r[1], r[2], r[3], r[6], r[8], r10)
}

// Resolving marked-above-watermark by resuming runs the marked rows again by the operator's
// decision: they are enqueued in order and the same markers do not stop W again.
func TestResumeMarkedAboveWatermarkProcessesAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.poller()
	var r []int64
	for range 4 {
		r = append(r, e.insert(e.my.Admin))
	}
	e.round(p)
	e.clk.Advance(time.Minute)
	e.mark(r[1], r[3], e.clk.Now())
	e.restore(r[0])
	e.round(p)
	e.wantViolation(p, cursor.KindMarkedAbove)
	e.wantW(r[0])

	e.clk.Advance(time.Minute)
	if _, err := e.resolve(cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionResume}); err != nil {
		t.Fatal(err)
	}
	if c := e.cursor(); c.MarkerSince == nil || !c.MarkerSince.Equal(e.clk.Now()) {
		t.Errorf("marker_since = %v after resume, want %v", c.MarkerSince, e.clk.Now())
	}
	e.round(p)
	e.wantViolation(p, "")
	e.wantQueued(r...)
	e.wantW(r[3])
	// A marker written after the resolution is judged again.
	r4 := e.insert(e.my.Admin)
	e.clk.Advance(time.Minute)
	e.mark(r4, r4, e.clk.Now())
	e.round(p)
	e.wantViolation(p, cursor.KindMarkedAbove)
	e.wantW(r[3])
}

// The stock a cutover re-reads carries the markers of the system being replaced, written
// before the marker watch began: it is enqueued, not a violation. In shadow mode that system
// keeps marking, so markers are never judged and the watch never starts.
func TestForeignMarkersAreNotViolations(t *testing.T) {
	t.Parallel()
	t.Run("cutover stock", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.cfg.ClaimBatch = 1 // the stock spans rounds: the later ones judge its markers
		a, b, c := e.insert(e.my.Admin), e.insert(e.my.Admin), e.insert(e.my.Admin)
		e.mark(a, c, t0.Add(-time.Hour))
		p := e.poller()
		for range 4 {
			e.round(p)
			e.clk.Advance(time.Second)
		}
		e.wantViolation(p, "")
		e.wantQueued(a, b, c)
	})
	t.Run("shadow mode", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.cfg.Shadow = true
		p := e.poller()
		a := e.insert(e.my.Admin)
		e.round(p)
		b := e.insert(e.my.Admin)
		e.mark(b, b, t0.Add(time.Second))
		e.clk.Advance(time.Minute)
		e.round(p)
		e.wantViolation(p, "")
		e.wantQueued(a, b)
		if c := e.cursor(); c.MarkerSince != nil {
			t.Errorf("marker_since = %v in shadow mode, want NULL", c.MarkerSince)
		}
	})
}

// The gauge is this term's: when the term ends (Run returns) it goes back to 0, so a former
// holder does not keep alerting after the new one's operator resolved the violation.
func TestViolationGaugeEndsWithTheTerm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.poller()
	e.insert(e.my.Admin)
	e.round(p)
	e.pg.Exec(t, `UPDATE inbox_cursor SET w = w + 5`)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, e.tx) }()
	testwait.For(t, 30*time.Second, "Run to report the violation", func() bool {
		return testutil.ToFloat64(p.metrics.violation.WithLabelValues(cursor.KindInboxBehind)) == 1
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if got := testutil.ToFloat64(p.metrics.violation.WithLabelValues(cursor.KindInboxBehind)); got != 0 {
		t.Errorf("gauge after the term = %v, want 0", got)
	}
	if c := e.cursor(); c.Violation == nil || c.Violation.Kind != cursor.KindInboxBehind {
		t.Errorf("violation = %+v after the term, want it still persisted for the next holder", c.Violation)
	}
}
