package marker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// heldSession runs a backfill elector on the test's database and returns its session once it
// holds the role, for a test that reads what the holder records in role_holder. The term ends
// with the test.
func (b *bundle) heldSession(t *testing.T) *leader.Session {
	t.Helper()
	el := leader.New(leader.Config{DSN: b.pg.DSN, Role: leader.Backfill, Instance: "test",
		Logger: slog.New(slog.DiscardHandler), RetryInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan *leader.Session, 1)
	done := make(chan error, 1)
	go func() {
		done <- el.Run(ctx, func(ctx context.Context, s *leader.Session) error {
			held <- s
			<-ctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case s := <-held:
		return s
	case <-time.After(15 * time.Second):
		t.Fatal("the backfill role was not acquired")
		return nil
	}
}

// faultMarker is the real inbox with failures injected: every call fails while down is set,
// and calls for the IDs in failing always fail. The failures are what a real server does when
// unreachable (an error from the driver call), produced on demand.
type faultMarker struct {
	real    Marker
	mu      sync.Mutex
	down    bool
	failing map[int64]bool
	calls   []int64        // the rows of Mark's calls
	batches [][]int64      // the rows of MarkMany's calls
	during  func(id int64) // runs inside Mark and MarkMany, while the sweep holds the row lock
	probing func()         // runs inside Probe, before the real probe
}

func (f *faultMarker) Mark(ctx context.Context, id int64, at time.Time, status string) (aodb.MarkResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, id)
	down, failing, during := f.down, f.failing[id], f.during
	f.mu.Unlock()
	if during != nil {
		during(id)
	}
	if down || failing {
		return 0, fmt.Errorf("mark inbox row %d: %w", id, errors.New("dial tcp: connection refused"))
	}
	return f.real.Mark(ctx, id, at, status)
}

// MarkMany fails the whole batch when one of its rows is failing, as a batch fails on the
// server as a whole.
func (f *faultMarker) MarkMany(ctx context.Context, ids []int64, at time.Time, status string) (map[int64]aodb.MarkResult, error) {
	f.mu.Lock()
	f.batches = append(f.batches, ids)
	down, during := f.down, f.during
	failing := slices.ContainsFunc(ids, func(id int64) bool { return f.failing[id] })
	f.mu.Unlock()
	if during != nil {
		for _, id := range ids {
			during(id)
		}
	}
	if down || failing {
		return nil, fmt.Errorf("mark %d inbox rows: %w", len(ids), errors.New("dial tcp: connection refused"))
	}
	return f.real.MarkMany(ctx, ids, at, status)
}

func (f *faultMarker) Probe(ctx context.Context) error {
	f.mu.Lock()
	probing := f.probing
	f.mu.Unlock()
	if probing != nil {
		probing()
	}
	return f.real.Probe(ctx)
}

func (f *faultMarker) set(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

func (f *faultMarker) takeCalls() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// takeTried returns the rows tried by Mark or MarkMany since the last take, each once, in the
// order they were first tried.
func (f *faultMarker) takeTried() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var tried []int64
	for _, ids := range append(f.batches, f.calls) {
		for _, id := range ids {
			if !slices.Contains(tried, id) {
				tried = append(tried, id)
			}
		}
	}
	f.calls, f.batches = nil, nil
	return tried
}

type bundle struct {
	pg    *pgtest.DB
	my    *mysqltest.DB
	in    *aodb.Inbox
	clk   *testclock.Clock
	sess  *pgtest.Session
	reg   *prometheus.Registry
	logs  *testlog.Buffer
	fault *faultMarker
}

func setup(t *testing.T, cfg Config) (*Sweeper, *bundle) {
	t.Helper()
	b := &bundle{pg: pgtest.New(t), my: mysqltest.New(t), clk: testclock.New(t0), reg: prometheus.NewRegistry(), logs: &testlog.Buffer{}}
	var err error
	b.in, err = aodb.Open(b.my.ServiceDSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.in.Close() })
	b.sess = b.pg.Session(t)
	b.fault = &faultMarker{real: b.in, failing: map[int64]bool{}}
	tel, err := telemetry.New(t.Context(), "msgx-backfill-test")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Period == 0 {
		cfg.Period = 30 * time.Second
	}
	if cfg.Batch == 0 {
		cfg.Batch = 200
	}
	cfg.Retry = config.Default().Pipeline.BackfillRetry()
	if cfg.Overdue == 0 {
		cfg.Overdue = 30 * 24 * time.Hour
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 20
	}
	cfg.Status = "PROCESSED"
	logger := slog.New(slog.NewJSONHandler(b.logs, nil))
	return New(cfg, b.fault, b.clk, logger, tel, b.reg), b
}

// terminal writes msgID as enqueued at enqueued and finished as state at finished, with the
// backfill intent the pump sets with every terminal state.
func (b *bundle) terminal(t *testing.T, msgID int64, state queue.State, enqueued, finished time.Time) {
	t.Helper()
	b.pg.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, finished_at, backfill_next_at, updated_at)
		VALUES ($1, $2, $3, $4, $4, $4)`, msgID, state, enqueued, finished)
}

func (b *bundle) inboxRow(t *testing.T) int64 {
	t.Helper()
	return b.my.InsertInbox(t, "<MSG><META><SNDR>AODB</SNDR><TYPE>FLOP</TYPE><STYP>ESTT</STYP></META></MSG>", &t0)
}

type inboxMarker struct {
	processed *time.Time
	status    string
}

func (b *bundle) marker(t *testing.T, id int64) inboxMarker {
	t.Helper()
	var m inboxMarker
	var p sql.NullTime
	var st sql.NullString
	if err := b.my.Admin.QueryRowContext(t.Context(), `SELECT CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS FROM cminmsgs WHERE CMINMSGS_ID = ?`, id).Scan(&p, &st); err != nil {
		t.Fatal(err)
	}
	if p.Valid {
		m.processed = &p.Time
	}
	m.status = st.String
	return m
}

func (b *bundle) row(t *testing.T, id int64) queue.Message {
	t.Helper()
	m, err := queue.Get(t.Context(), b.pg.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sweep(t *testing.T, s *Sweeper, b *bundle) bool {
	t.Helper()
	return sweepOn(t, s, b.sess)
}

// sweepOn is sweep on sess.
func sweepOn(t *testing.T, s *Sweeper, sess Session) bool {
	t.Helper()
	more, err := s.Sweep(t.Context(), sess)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	return more
}

// TestOutcomes guards R-INV-10.
func TestOutcomes(t *testing.T) {
	s, b := setup(t, Config{})
	fresh := b.inboxRow(t)
	already := b.inboxRow(t)
	earlier := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	if _, err := b.my.Admin.ExecContext(t.Context(), `UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ?, CMINMSGS_STATUS = 'LEGACY' WHERE CMINMSGS_ID = ?`, earlier, already); err != nil {
		t.Fatal(err)
	}
	gone := already + 1000 // never in the inbox: enqueued, then the row was deleted
	unfinished := b.inboxRow(t)

	b.terminal(t, fresh, queue.Succeeded, t0, t0.Add(time.Second))
	b.terminal(t, already, queue.Skipped, t0, t0.Add(time.Second))
	b.terminal(t, gone, queue.Dead, t0, t0.Add(time.Second))
	if _, err := queue.Enqueue(t.Context(), b.pg.Pool, []queue.NewMessage{{MsgID: unfinished}}, t0); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(t0.Add(time.Minute))
	sweep(t, s, b)

	// 1 row: the marker is written and confirmed.
	if m := b.marker(t, fresh); m.processed == nil || !m.processed.Equal(t0.Add(time.Minute)) || m.status != "PROCESSED" {
		t.Errorf("fresh row marker = %+v, want processed at %s with PROCESSED", m, t0.Add(time.Minute))
	}
	if r := b.row(t, fresh); r.BackfillAt == nil || r.BackfillAbandonedAt != nil {
		t.Errorf("fresh row: backfill_at %v abandoned %v, want confirmed", r.BackfillAt, r.BackfillAbandonedAt)
	}
	// 0 rows and the row exists: success, the earlier marker untouched.
	if m := b.marker(t, already); m.processed == nil || !m.processed.Equal(earlier) || m.status != "LEGACY" {
		t.Errorf("already-marked row = %+v, want the earlier marker kept", m)
	}
	if r := b.row(t, already); r.BackfillAt == nil {
		t.Error("already-marked row not confirmed")
	}
	// 0 rows and the row is gone: abandoned at once, not marked.
	r := b.row(t, gone)
	if r.BackfillAt != nil || r.BackfillAbandonedAt == nil || r.BackfillReason == nil || *r.BackfillReason != queue.AbandonMissingRow {
		t.Errorf("missing row: backfill_at %v abandoned %v reason %v, want abandoned MISSING_ROW and unmarked", r.BackfillAt, r.BackfillAbandonedAt, r.BackfillReason)
	}
	if got := testutil.ToFloat64(s.metrics.abandoned.WithLabelValues(queue.AbandonMissingRow)); got != 1 {
		t.Errorf("abandoned{MISSING_ROW} = %v, want 1", got)
	}
	if !strings.Contains(b.logs.String(), `"level":"ERROR","msg":"inbox row is gone`) {
		t.Errorf("no ERROR log for the missing row:\n%s", b.logs)
	}
	// Not terminal: never marked.
	if m := b.marker(t, unfinished); m.processed != nil {
		t.Errorf("unfinished message was marked: %+v", m)
	}
	// Nothing is tried twice.
	b.fault.takeTried()
	b.clk.Advance(time.Hour)
	sweep(t, s, b)
	if calls := b.fault.takeTried(); len(calls) != 0 {
		t.Errorf("second sweep tried %v, want nothing", calls)
	}
	if err := s.RefreshHealth(t.Context(), b.sess); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(s.metrics.abandonedNow.WithLabelValues(queue.AbandonMissingRow)); got != 1 {
		t.Errorf("abandoned gauge = %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.metrics.unmarked); got != 0 {
		t.Errorf("unmarked gauge = %v, want 0", got)
	}
}

// An unreachable inbox (a closed port) is an outage, not the rows' failure: nothing is charged,
// the round pauses and the blocked state is reported; when the inbox answers the marker is
// written at once.
func TestUnreachableInboxIsAnOutageThenMarks(t *testing.T) {
	s, b := setup(t, Config{})
	id := b.inboxRow(t)
	b.terminal(t, id, queue.Succeeded, t0, t0)
	held := b.heldSession(t)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	down, err := aodb.Open("msgx:x@tcp("+closed+")/nowhere?parseTime=true", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	b.fault.real = down

	for range 3 {
		sweepOn(t, s, held)
		b.clk.Advance(time.Hour)
	}
	r := b.row(t, id)
	if r.BackfillAttempts != 0 || r.BackfillAt != nil || r.BackfillAbandonedAt != nil {
		t.Fatalf("during the outage: attempts %d marked %v abandoned %v; want nothing charged", r.BackfillAttempts, r.BackfillAt, r.BackfillAbandonedAt)
	}
	if got := s.blocked.BlockedFor("inbox").Seconds(); got < 3*3600 {
		t.Errorf("blocked for %vs, want at least the 3 hours of the outage", got)
	}
	var dep string
	if err := b.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(blocked_on, '') FROM role_holder WHERE role = 'backfill'`).Scan(&dep); err != nil || dep != "inbox" {
		t.Fatalf("role_holder blocked_on %q %v, want inbox", dep, err)
	}
	b.fault.real = b.in
	sweepOn(t, s, held)
	if m := b.marker(t, id); m.processed == nil {
		t.Fatal("not marked once the inbox was back")
	}
	if r := b.row(t, id); r.BackfillAt == nil || r.BackfillAttempts != 0 {
		t.Errorf("after recovery: backfill_at %v attempts %d", r.BackfillAt, r.BackfillAttempts)
	}
	if err := b.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(blocked_on, '') FROM role_holder WHERE role = 'backfill'`).Scan(&dep); err != nil || dep != "" {
		t.Fatalf("role_holder blocked_on %q %v after recovery", dep, err)
	}
}

// Transient failures never abandon before R, however many attempts (max-attempts only alerts);
// after R the next failure abandons with TRANSIENT_DEADLINE, and R overrides the backoff. R is
// measured from the local enqueued_at, not the inbox's received time.
// Guards R-INV-12.
func TestTransientDeadlineOnlyAfterR(t *testing.T) {
	const r = 10 * time.Minute // the fifth failure is at 7.5 min, its backoff ends at 15.5 min
	s, b := setup(t, Config{Overdue: r, MaxAttempts: 3})
	id := b.inboxRow(t)
	// The inbox clock says the row is ancient; only enqueued_at counts.
	if _, err := b.my.Admin.ExecContext(t.Context(), `UPDATE cminmsgs SET CMINMSGS_DATE_RECEIVED = '2000-01-01' WHERE CMINMSGS_ID = ?`, id); err != nil {
		t.Fatal(err)
	}
	b.terminal(t, id, queue.Succeeded, t0, t0)
	b.pg.Exec(t, `UPDATE proc_state SET received_at = '2000-01-01' WHERE msg_id = $1`, id)
	b.fault.set(true)
	for i := range 5 {
		sweep(t, s, b)
		sweep(t, s, b) // at once again: the backoff holds (the ancient received_at is not the overdue clock)
		row := b.row(t, id)
		if row.BackfillAbandonedAt != nil || row.BackfillAttempts != i+1 {
			t.Fatalf("failure %d at %s: attempts %d abandoned %v; want retried, not abandoned", i+1, b.clk.Now(), row.BackfillAttempts, row.BackfillAbandonedAt)
		}
		b.clk.Set(*row.BackfillNextAt)
	}
	if err := s.RefreshHealth(t.Context(), b.sess); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(s.metrics.overMax); got != 1 {
		t.Errorf("over-max-attempts gauge = %v, want 1 (alert only)", got)
	}
	// Past R, with the backoff not yet over: tried anyway, and abandoned.
	row := b.row(t, id)
	b.clk.Set(t0.Add(r + time.Second))
	if !row.BackfillNextAt.After(b.clk.Now()) {
		t.Fatalf("test needs a backoff that runs past R: next %s", row.BackfillNextAt)
	}
	sweep(t, s, b)
	row = b.row(t, id)
	if row.BackfillAbandonedAt == nil || *row.BackfillReason != queue.AbandonTransientDeadline || row.BackfillAt != nil {
		t.Fatalf("after R: abandoned %v reason %v backfill_at %v; want TRANSIENT_DEADLINE, unmarked", row.BackfillAbandonedAt, row.BackfillReason, row.BackfillAt)
	}
	if m := b.marker(t, id); m.processed != nil {
		t.Error("abandoned row carries a marker")
	}
	// Abandoned: no more automatic tries.
	b.fault.takeTried()
	b.clk.Advance(time.Hour)
	sweep(t, s, b)
	if calls := b.fault.takeTried(); len(calls) != 0 {
		t.Errorf("abandoned row retried: %v", calls)
	}
	// Reopen schedules one immediate try, which succeeds now the inbox answers.
	b.fault.set(false)
	got, err := queue.ReopenBackfill(t.Context(), b.pg.Pool, queue.ReopenRequest{MsgIDs: []int64{id}}, b.clk.Now())
	if err != nil || len(got) != 1 || got[0].Reason != queue.AbandonTransientDeadline {
		t.Fatalf("reopen = %+v, %v", got, err)
	}
	sweep(t, s, b)
	if m := b.marker(t, id); m.processed == nil {
		t.Fatal("reopened row not marked by the next sweep")
	}
	if row := b.row(t, id); row.BackfillAt == nil || row.BackfillAbandonedAt != nil {
		t.Errorf("reopened row: backfill_at %v abandoned %v", row.BackfillAt, row.BackfillAbandonedAt)
	}
}

// Permanently failing rows do not fill every batch: ordering by attempts puts rows never tried
// first.
func TestFairRotation(t *testing.T) {
	s, b := setup(t, Config{Batch: 3})
	var bad, good []int64
	for range 3 {
		id := b.inboxRow(t)
		bad = append(bad, id)
		b.fault.failing[id] = true
		b.terminal(t, id, queue.Dead, t0, t0)
	}
	for range 3 {
		id := b.inboxRow(t)
		good = append(good, id)
		b.terminal(t, id, queue.Succeeded, t0, t0)
	}
	sweep(t, s, b) // the three failing rows have the lowest IDs: they go first
	if calls := b.fault.takeTried(); fmt.Sprint(calls) != fmt.Sprint(bad) {
		t.Fatalf("first sweep tried %v, want %v", calls, bad)
	}
	b.clk.Advance(time.Hour) // every backoff is over: all six rows are due
	sweep(t, s, b)
	if calls := b.fault.takeTried(); fmt.Sprint(calls) != fmt.Sprint(good) {
		t.Fatalf("second sweep tried %v, want the never-tried rows %v", calls, good)
	}
	for _, id := range good {
		if m := b.marker(t, id); m.processed == nil {
			t.Errorf("row %d not marked", id)
		}
	}
}

// Shadow mode writes nothing to the shared MySQL and says so in the log and a metric.
// Guards R-INV-10.
func TestShadowWritesNothing(t *testing.T) {
	s, b := setup(t, Config{Shadow: true})
	id := b.inboxRow(t)
	b.terminal(t, id, queue.Succeeded, t0, t0)
	before := b.marker(t, id)
	b.clk.Advance(time.Hour)
	sweep(t, s, b)
	if calls := b.fault.takeTried(); len(calls) != 0 {
		t.Errorf("shadow sweep called the inbox for %v", calls)
	}
	if m := b.marker(t, id); m.processed != nil || m.status != before.status {
		t.Errorf("shadow mode changed the inbox row: %+v (was %+v)", m, before)
	}
	var out int
	if err := b.my.Admin.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM coutmsgs`).Scan(&out); err != nil || out != 0 {
		t.Errorf("coutmsgs rows = %d (%v), want 0", out, err)
	}
	if r := b.row(t, id); r.BackfillAt != nil || r.BackfillAttempts != 0 {
		t.Errorf("shadow mode recorded a marker: %+v", r)
	}
	if got := testutil.ToFloat64(s.metrics.shadow); got != 1 {
		t.Errorf("msgx_shadow_mode = %v, want 1", got)
	}
	if !strings.Contains(b.logs.String(), "SHADOW MODE") {
		t.Errorf("no start-up notice of shadow mode:\n%s", b.logs)
	}
}

// The marker is written while the sweep holds the row lock (the per-message gate): a replay
// that tries to move the row back to PENDING meanwhile must wait, and then sees it marked.
func TestMarkerHoldsTheGate(t *testing.T) {
	s, b := setup(t, Config{})
	id := b.inboxRow(t)
	b.terminal(t, id, queue.Dead, t0, t0)
	var replayErr error
	b.fault.during = func(int64) { replayErr = b.replayGated(id) }
	sweep(t, s, b)
	var pgErr *pgconn.PgError
	if !errors.As(replayErr, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("replay during the marker write: %v; want a lock timeout (the row is gated)", replayErr)
	}
	if r := b.row(t, id); r.State != queue.Dead || r.BackfillAt == nil {
		t.Errorf("row after the sweep: %s backfill_at %v", r.State, r.BackfillAt)
	}
}

// replayGated tries a replay's write of id as replay does it, under the row lock, giving up
// after 300 ms: a lock timeout (55P03) means the row was gated.
func (b *bundle) replayGated(id int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return db.WithTx(ctx, b.pg.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '300ms'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE proc_state SET state = 'PENDING', finished_at = NULL, backfill_next_at = NULL
			WHERE msg_id = $1 AND backfill_at IS NULL`, id)
		return err
	})
}

// A batch holds every row's gate while its markers are written (R-BACKFILL-12, R-GATE-1): a
// replay of any of its rows waits.
// Guards R-INV-11.
func TestBatchHoldsEveryGate(t *testing.T) {
	s, b := setup(t, Config{})
	ids := []int64{b.inboxRow(t), b.inboxRow(t), b.inboxRow(t)}
	for _, id := range ids {
		b.terminal(t, id, queue.Dead, t0, t0)
	}
	replayErrs := map[int64]error{}
	b.fault.during = func(id int64) { replayErrs[id] = b.replayGated(id) }
	sweep(t, s, b)
	if len(b.fault.batches) != 1 {
		t.Fatalf("batches %v; want the three rows in one", b.fault.batches)
	}
	for _, id := range ids {
		var pgErr *pgconn.PgError
		if !errors.As(replayErrs[id], &pgErr) || pgErr.Code != "55P03" {
			t.Errorf("replay of %d during the batch: %v; want a lock timeout (the row is gated)", id, replayErrs[id])
		}
		if r := b.row(t, id); r.State != queue.Dead || r.BackfillAt == nil {
			t.Errorf("row %d after the sweep: %s backfill_at %v", id, r.State, r.BackfillAt)
		}
	}
}

// The batch loop goes on at once only while batches are full and succeed.
func TestSweepReportsMore(t *testing.T) {
	s, b := setup(t, Config{Batch: 2})
	for range 3 {
		id := b.inboxRow(t)
		b.terminal(t, id, queue.Succeeded, t0, t0)
	}
	if !sweep(t, s, b) {
		t.Error("full batch: want more")
	}
	if sweep(t, s, b) {
		t.Error("short batch: want no more")
	}
	// The inbox down: the batch ends early after breakAfter failures and reports no more.
	s2, b2 := setup(t, Config{Batch: 10})
	for range 5 {
		id := b2.inboxRow(t)
		b2.terminal(t, id, queue.Succeeded, t0, t0)
	}
	b2.fault.set(true)
	if sweep(t, s2, b2) {
		t.Error("failing batch: want no more")
	}
	if n := len(b2.fault.batches); n != 1 {
		t.Errorf("batch tries with the inbox down = %d, want 1 before the rows are tried one by one", n)
	}
	if calls := b2.fault.takeCalls(); len(calls) != breakAfter {
		t.Errorf("tries with the inbox down = %d, want %d", len(calls), breakAfter)
	}
}
