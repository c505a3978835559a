package discovery

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// (a) A row whose transaction is still open stops the watermark: nothing after it is enqueued
// until it commits, and then both go in ID order.
// Guards R-INV-1.
func TestUncommittedRowHoldsBackLaterRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.poller()
	a, idA := e.hold()
	idB := e.insert(e.my.Admin)
	if idB != idA+1 {
		t.Fatalf("ids %d, %d: want consecutive", idA, idB)
	}

	e.round(p)
	e.wantW(idA - 1)
	e.wantQueued()
	if c := e.cursor(); c.HoleSince == nil || !c.HoleSince.Equal(t0) {
		t.Fatalf("hole_since = %v, want %v", c.HoleSince, t0)
	}

	e.clk.Advance(time.Minute) // within max-commit-delay
	e.round(p)
	e.wantQueued()
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	e.round(p)
	e.wantW(idB)
	e.wantQueued(idA, idB)
	if c := e.cursor(); c.HoleSince != nil {
		t.Errorf("hole_since = %v after the hole filled, want NULL", c.HoleSince)
	}
	if got := testutil.ToFloat64(p.metrics.permanentHoles); got != 0 {
		t.Errorf("permanent holes = %v, want 0", got)
	}
}

// (b) A rolled-back insert is a hole that never fills: after max-commit-delay, counted from its
// first observation and kept across a restart, it is released and the next row enqueued.
// Guards R-INV-1.
func TestRolledBackRowIsReleasedAfterTheDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gap := e.gap()
	idB := e.insert(e.my.Admin)

	e.round(e.poller())
	e.wantQueued()
	first := e.cursor().HoleSince
	if first == nil || !first.Equal(t0) {
		t.Fatalf("hole_since = %v, want %v", first, t0)
	}

	// A restart: a new process resumes the persisted clock, it does not start a new one.
	e.clk.Advance(3 * time.Minute)
	p := e.poller()
	e.round(p)
	if c := e.cursor(); c.HoleSince == nil || !c.HoleSince.Equal(t0) {
		t.Fatalf("hole_since after restart = %v, want %v", c.HoleSince, t0)
	}
	e.wantQueued()

	e.clk.Advance(2*time.Minute - time.Second)
	e.round(p)
	e.wantQueued()

	e.clk.Advance(time.Second) // 5m since the first observation
	e.round(p)
	e.wantW(idB)
	e.wantQueued(idB)
	if c := e.cursor(); c.HoleSince != nil {
		t.Errorf("hole_since = %v after the release, want NULL", c.HoleSince)
	}
	holes, err := cursor.WatchedHoles(t.Context(), e.pg.Pool, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(holes) != 1 || holes[0].First != gap || holes[0].Last != gap {
		t.Errorf("released holes = %+v, want [%d,%d]", holes, gap, gap)
	}
	if got := testutil.ToFloat64(p.metrics.permanentHoles); got != 1 {
		t.Errorf("permanent holes = %v, want 1", got)
	}
}

// (c) A row committed after its ID was released is found by the reconciliation, enqueued
// once, recorded and counted, and logged at ERROR with its ID.
// Guards R-INV-20.
func TestLateArrivalIsReconciled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.poller()
	a, idA := e.hold()
	idB := e.insert(e.my.Admin)
	e.round(p)
	e.clk.Advance(5 * time.Minute)
	e.round(p)
	e.wantW(idB)
	e.wantQueued(idB)

	if n, err := p.Reconcile(t.Context(), e.tx); err != nil || n != 0 {
		t.Fatalf("reconcile before the late commit = %d, %v; want 0", n, err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	n, err := p.Reconcile(t.Context(), e.tx)
	if err != nil || n != 1 {
		t.Fatalf("reconcile = %d, %v; want 1", n, err)
	}
	e.wantQueued(idA, idB)
	e.wantW(idB) // the watermark does not move back
	if got := testutil.ToFloat64(p.metrics.lateDetected); got != 1 {
		t.Errorf("late detected = %v, want 1", got)
	}
	if got := testutil.ToFloat64(p.metrics.lateEnqueued); got != 1 {
		t.Errorf("late enqueued = %v, want 1", got)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, fmt.Sprintf("msg_id=%d", idA)) {
		t.Errorf("no ERROR log naming msg_id=%d:\n%s", idA, logs)
	}
	// The late row is the queue head: the smallest unfinished ID at or below W.
	head, ok, err := queue.Head(t.Context(), e.pg.Pool)
	if err != nil || !ok || head.MsgID != idA {
		t.Errorf("head = %d (%v, %v), want %d", head.MsgID, ok, err, idA)
	}

	// Found again at the next period (and by a restarted process): not counted twice.
	p2 := e.poller()
	if n, err := p2.Reconcile(t.Context(), e.tx); err != nil || n != 0 {
		t.Fatalf("second reconcile = %d, %v; want 0", n, err)
	}
	if got := testutil.ToFloat64(p2.metrics.lateDetected); got != 0 {
		t.Errorf("late detected after restart = %v, want 0", got)
	}
	s, err := cursor.Holes(t.Context(), e.pg.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if s.LateDetected != 1 || s.LateEnqueued != 1 {
		t.Errorf("persisted late arrivals = %+v, want 1 detected and enqueued", s)
	}
}

// Holes older than the watch retention are no longer looked up.
func TestLateWatchEndsAfterTheRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.LateWatchRetention = time.Hour
	p := e.poller()
	a, _ := e.hold()
	idB := e.insert(e.my.Admin)
	e.round(p)
	e.clk.Advance(5 * time.Minute)
	e.round(p)
	e.wantQueued(idB)
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour + time.Second)
	if n, err := p.Reconcile(t.Context(), e.tx); err != nil || n != 0 {
		t.Fatalf("reconcile = %d, %v; want 0 (the hole is past the retention)", n, err)
	}
	e.wantQueued(idB)
	if got := testutil.ToFloat64(p.metrics.watchedHoles); got != 0 {
		t.Errorf("watched holes = %v, want 0", got)
	}
}

// (d) An unreachable inbox is an error, counted, and changes nothing; discovery resumes when
// the network returns.
// Guards R-INV-2.
func TestUnreachableInboxLeavesTheWatermark(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.poller()
	first := e.insert(e.my.Admin)
	e.round(p)
	e.wantW(first)

	second := e.insert(e.my.Admin)
	e.proxy.Down()
	if _, err := p.Round(t.Context(), e.tx); err == nil {
		t.Fatal("round on an unreachable inbox succeeded")
	}
	if _, err := p.Reconcile(t.Context(), e.tx); err != nil {
		t.Fatalf("reconcile without holes must not touch the inbox: %v", err)
	}
	e.wantW(first)
	e.wantQueued(first)
	if got := testutil.ToFloat64(p.metrics.readErrors); got != 1 {
		t.Errorf("read errors = %v, want 1", got)
	}

	e.proxy.Up()
	e.round(p)
	e.wantW(second)
	e.wantQueued(first, second)
}

// An inbox that stays unreachable is an outage of the inbox, not a failure per round: Run logs
// it once when it begins and once when it ends (not once per poll), reports it for GetStatus,
// probes it at the poll interval, and resumes from the watermark when it answers.
// Guards R-INV-2.
func TestInboxOutageIsLoggedOnceAndReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.poller()
	first := e.insert(e.my.Admin)
	e.round(p)
	e.wantW(first)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	defer func() {
		cancel()
		<-done
	}()
	e.proxy.Down()
	go func() { done <- p.Run(ctx, e.tx) }()
	testwait.ForState(t, 10*time.Second, "discovery to report the inbox blocked", func() (bool, string) {
		b, _ := e.tx.Blocked()
		return b != nil && b.Dependency == outage.Inbox, fmt.Sprint(b)
	})
	// Some polls later the outage is still one line, and each probe was reported.
	testwait.ForState(t, 10*time.Second, "three failed probes", func() (bool, string) {
		b, _ := e.tx.Blocked()
		return b != nil && b.Probes >= 3, fmt.Sprint(b)
	})
	if n := strings.Count(e.logs.String(), "dependency does not answer"); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, e.logs)
	}
	if n := strings.Count(e.logs.String(), "discovery round failed"); n != 0 {
		t.Errorf("%d rounds were logged as failed during the outage, want none: the outage is not the round's", n)
	}

	second := e.insert(e.my.Admin)
	e.proxy.Up()
	testwait.ForState(t, 10*time.Second, "discovery to resume and enqueue the row written meanwhile", func() (bool, string) {
		b, _ := e.tx.Blocked()
		return b == nil && e.cursor().W == second, fmt.Sprintf("blocked=%v w=%d", b, e.cursor().W)
	})
	if n := strings.Count(e.logs.String(), "dependency answers again"); n != 1 {
		t.Errorf("the end of the outage was logged %d times, want once", n)
	}
	e.wantQueued(first, second)
}

// (e) Two holes seen in the same round wait once and are released together; a hole seen later
// waits its own delay from its own first sighting (D-15).
// Guards R-INV-1.
func TestHolesSeenTogetherReleaseTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.poller()
	g1 := e.gap()
	r1 := e.insert(e.my.Admin)
	g2 := e.gap()
	r2 := e.insert(e.my.Admin)

	e.round(p)
	e.wantQueued()
	e.clk.Advance(time.Minute)
	g3 := e.gap() // seen a minute later
	r3 := e.insert(e.my.Admin)
	e.round(p)
	e.wantQueued()
	e.clk.Advance(4*time.Minute - time.Second)
	e.round(p)
	e.wantQueued() // the first two are not old yet
	e.clk.Advance(time.Second)
	e.round(p)
	e.wantW(r2)
	e.wantQueued(r1, r2)
	if c := e.cursor(); c.HoleSince == nil || !c.HoleSince.Equal(t0.Add(time.Minute)) {
		t.Fatalf("the third hole's clock = %v, want its own first sighting %v", c.HoleSince, t0.Add(time.Minute))
	}
	e.clk.Advance(time.Minute - time.Second)
	p = e.poller() // a restart keeps every clock
	e.round(p)
	e.wantQueued(r1, r2)
	e.clk.Advance(time.Second)
	e.round(p)
	e.wantW(r3)
	e.wantQueued(r1, r2, r3)
	holes, err := cursor.WatchedHoles(t.Context(), e.pg.Pool, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(holes) != 3 || holes[0].First != g1 || holes[1].First != g2 || holes[2].First != g3 ||
		!holes[0].ReleasedAt.Equal(holes[1].ReleasedAt) || !holes[2].ReleasedAt.After(holes[1].ReleasedAt) {
		t.Errorf("holes = %+v, want %d and %d released together, then %d", holes, g1, g2, g3)
	}
}

// A full batch reports more, so Run goes on without waiting, and the backlog is enqueued in
// claim-batch steps.
func TestBatchesWalkTheBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.ClaimBatch = 2
	p := e.poller()
	var ids []int64
	for range 5 {
		ids = append(ids, e.insert(e.my.Admin))
	}
	for i, want := range []bool{true, true, false} {
		if more := e.round(p); more != want {
			t.Fatalf("round %d: more = %v, want %v", i, more, want)
		}
	}
	e.wantQueued(ids...)
}

// (4) A committed enqueue notifies the pump's channel.
func TestEnqueueNotifiesThePump(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	heard := e.pg.Listen(t, queue.Channel)
	e.insert(e.my.Admin)
	e.round(e.poller())
	if !heard(30 * time.Second) {
		t.Fatalf("no notification on %s", queue.Channel)
	}
}

// (6) The discovery metrics are exposed on /metrics.
func TestMetricsAreExposed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	p := New(e.cfg, e.in, e.clk, slog.New(slog.NewTextHandler(e.logs, nil)), e.tel, reg)
	e.insert(e.my.Admin)
	e.round(p)
	if _, err := p.Reconcile(t.Context(), e.tx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	for _, name := range []string{"msgx_ingest_watermark 1", "msgx_ingest_watermark_lag 0", "msgx_ingest_hole_age_seconds 0",
		"msgx_ingest_permanent_holes_total 0", "msgx_ingest_late_arrival_detected_total 0",
		"msgx_ingest_late_arrival_enqueued_total 0", "msgx_ingest_rows_enqueued_total 1",
		"msgx_ingest_inbox_read_errors_total 0", "msgx_ingest_round_duration_seconds_count 1", "msgx_ingest_watched_holes 0"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}
