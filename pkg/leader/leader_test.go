package leader_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/testkit/leaktest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

const role = "pump"

func TestMain(m *testing.M) {
	// An elector that leaks its checker or a lock connection would hold a role in production.
	leaktest.VerifyTestMain(m)
}

// --- harness -------------------------------------------------------------------------------

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newElector(t testing.TB, db *pgtest.DB, instance string, interval time.Duration, reg prometheus.Registerer) *leader.Elector {
	return leader.New(leader.Config{
		DSN:           db.DSN,
		Role:          role,
		Instance:      instance,
		Logger:        slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("elector", instance),
		Registerer:    reg,
		RetryInterval: 50 * time.Millisecond,
		CheckInterval: interval,
	})
}

type runner struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// start runs e in the background; the test's cleanup stops it and checks that Run returned nil.
func start(t *testing.T, e *leader.Elector, work func(context.Context, *leader.Session) error) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- e.Run(ctx, work) }()
	t.Cleanup(func() {
		if err := r.stop(t); err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	})
	return r
}

func (r *runner) stop(t *testing.T) error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(15 * time.Second):
			r.err = errors.New("Run did not return within 15s of its context ending")
		}
	})
	return r.err
}

// lockPIDs lists every backend with a pg_locks row for the role's key, granted or waiting.
func lockPIDs(t *testing.T, db *pgtest.DB) (granted, waiting []uint32) {
	t.Helper()
	key := uint64(leader.Key(role))
	rows, err := db.Pool.Query(t.Context(), `SELECT pid, granted FROM pg_locks
		WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		uint32(key>>32), uint32(key))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int32
		var g bool
		if err := rows.Scan(&pid, &g); err != nil {
			t.Fatal(err)
		}
		if g {
			granted = append(granted, uint32(pid))
		} else {
			waiting = append(waiting, uint32(pid))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return granted, waiting
}

// connectedAs lists the backends of an elector's connections, found by application_name.
func connectedAs(t *testing.T, db *pgtest.DB, instance string) []uint32 {
	t.Helper()
	rows, err := db.Pool.Query(t.Context(),
		"SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
		"msgx-leader "+role+" "+instance)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint32, len(pids))
	for i, p := range pids {
		out[i] = uint32(p)
	}
	return out
}

func terminate(t *testing.T, db *pgtest.DB, pid uint32) {
	t.Helper()
	var ok bool
	if err := db.Pool.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// metric reads a msgx_leader_* value for the role from reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "role" && l.GetValue() == role {
					if m.Gauge != nil {
						return m.GetGauge().GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("metric %s{role=%q} not registered", name, role)
	return 0
}

// --- fenced writer -------------------------------------------------------------------------

// writer is a work loop that inserts a row tagged with its name through Session.Tx every 20ms
// and records what happened, on both sides of its context being cancelled.
type writer struct {
	tag string

	mu          sync.Mutex
	pid         uint32
	started     time.Time
	commits     []int64 // fence_log.seq of each successful insert
	cancelledAt time.Time
	cause       error
	afterCancel []error // results of attempts begun after the context was cancelled
}

func createFenceLog(t *testing.T, db *pgtest.DB) {
	db.Exec(t, `CREATE TABLE fence_log (
		seq bigserial PRIMARY KEY,
		tag text NOT NULL,
		at  timestamptz NOT NULL DEFAULT clock_timestamp())`)
}

// work returns the loop. With stubborn set it ignores its context until release closes, and
// writes with context.Background(): fencing must not depend on the work's cooperation.
func (w *writer) work(stubborn bool, release <-chan struct{}) func(context.Context, *leader.Session) error {
	return func(ctx context.Context, s *leader.Session) error {
		w.mu.Lock()
		w.pid, w.started = s.PID(), time.Now()
		w.mu.Unlock()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		done := ctx.Done()
		if stubborn {
			done = nil // a stubborn loop only notices its cancellation, it does not stop for it
		}
		for {
			if ctx.Err() != nil {
				w.noteCancel(ctx)
				if !stubborn {
					return nil
				}
			}
			select {
			case <-release:
				return context.Cause(ctx)
			case <-done:
				continue
			case <-tick.C:
			}
			wctx := ctx
			if stubborn {
				wctx = context.Background()
			}
			afterCancel := ctx.Err() != nil
			var seq int64
			err := s.Tx(wctx, func(tx pgx.Tx) error {
				return tx.QueryRow(wctx, "INSERT INTO fence_log (tag) VALUES ($1) RETURNING seq", w.tag).Scan(&seq)
			})
			w.mu.Lock()
			if err == nil {
				w.commits = append(w.commits, seq)
			}
			if afterCancel {
				w.afterCancel = append(w.afterCancel, err)
			}
			w.mu.Unlock()
		}
	}
}

func (w *writer) noteCancel(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancelledAt.IsZero() {
		w.cancelledAt, w.cause = time.Now(), context.Cause(ctx)
	}
}

func (w *writer) snapshot() (pid uint32, commits int, cancelled bool, afterCancel int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pid, len(w.commits), !w.cancelledAt.IsZero(), len(w.afterCancel)
}

// --- tests ---------------------------------------------------------------------------------

func TestLockKeysArePinned(t *testing.T) {
	t.Parallel()
	// Pinned: a changed key would let two versions of a service both lead during a deploy, or
	// a pump and a history sweep of two versions run at once (role.go).
	if leader.PipelineLockKey != 0x6d736778_00000001 {
		t.Errorf("pipeline lock key = %#x, pinned 0x6d73677800000001", leader.PipelineLockKey)
	}
	want := map[leader.Role]int64{
		leader.Ingest:     -543510797345967920,
		leader.Pump:       -2996536531718711702,
		leader.Dispatcher: -2160447488469695331,
		leader.Backfill:   -635748546545881054,
		leader.Control:    339881395526396733,
	}
	if len(leader.Roles()) != len(want) {
		t.Errorf("Roles() = %v: every role's key is pinned here", leader.Roles())
	}
	seen := map[int64]leader.Role{leader.PipelineLockKey: "the pipeline lock"}
	for _, r := range leader.Roles() {
		k, ok := want[r]
		if got := leader.Key(r); !ok || got != k {
			t.Errorf("Key(%q) = %d, want %d (pinned: %v)", r, got, k, ok)
		}
		if other, dup := seen[leader.Key(r)]; dup {
			t.Errorf("roles %q and %q share a key", r, other)
		}
		seen[leader.Key(r)] = r
	}
}

// A role that is not one of Roles (a misspelling) would elect on a lock of its own: New
// refuses it.
func TestNewRefusesAnUnknownRole(t *testing.T) {
	t.Parallel()
	for _, r := range []leader.Role{"", "pumps", "Pump"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New with role %q did not panic", r)
				}
			}()
			leader.New(leader.Config{DSN: "postgres://x@127.0.0.1:1/x", Role: r})
		}()
	}
}

// The session knows its role: SetBlocked marks the term's own role_holder row and clears it.
func TestSessionSetBlocked(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	e := newElector(t, db, "A", 50*time.Millisecond, nil)
	since := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	type step struct {
		b    *leader.Blocked
		done chan error
	}
	steps := make(chan step)
	held := make(chan *leader.Session, 1)
	r := start(t, e, func(ctx context.Context, s *leader.Session) error {
		held <- s
		if s.Role() != role {
			t.Errorf("session role %q, want %q", s.Role(), role)
		}
		for {
			select {
			case <-ctx.Done():
				return nil
			case st := <-steps:
				st.done <- s.SetBlocked(ctx, st.b)
			}
		}
	})
	set := func(b *leader.Blocked) {
		t.Helper()
		done := make(chan error, 1)
		steps <- step{b, done}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	blocked := func() *leader.Blocked {
		t.Helper()
		hs, err := leader.Holders(t.Context(), db.Pool)
		if err != nil || len(hs) != 1 || hs[0].Role != role {
			t.Fatalf("Holders = %+v, %v; want the pump", hs, err)
		}
		return hs[0].Blocked
	}
	set(&leader.Blocked{Dependency: "redis", Since: since, MsgID: 7, LastError: "i/o timeout", Probes: 2})
	if b := blocked(); b == nil || b.Dependency != "redis" || !b.Since.Equal(since) || b.MsgID != 7 || b.LastError != "i/o timeout" || b.Probes != 2 {
		t.Errorf("blocked = %+v, want redis since %v at 7 after 2 probes", b, since)
	}
	set(nil)
	if b := blocked(); b != nil {
		t.Errorf("blocked = %+v after clearing", b)
	}
	// A term that ended has nothing to report on: SetBlocked is a no-op that succeeds, so no
	// role's outage loop tells a lost term from a working one (its successor starts unblocked).
	s := <-held
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := s.SetBlocked(t.Context(), &leader.Blocked{Dependency: "redis", Since: since}); err != nil {
		t.Errorf("SetBlocked after the term ended = %v, want nil", err)
	}
}

// TestTerminatedHolderIsFencedAndStandbyTakesOver is the failover of issue 2 item 5: two
// instances of a role on one database; the holder's lock connection is terminated; the standby
// takes over; the old holder's work is cancelled and makes no further writes.
// Guards R-INV-15.
func TestTerminatedHolderIsFencedAndStandbyTakesOver(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	createFenceLog(t, db)
	// A longer check interval than the other tests: the assertion that A's work is cancelled
	// before B's work starts has one interval of margin (see the package documentation).
	const interval = 200 * time.Millisecond
	a, b := &writer{tag: "A"}, &writer{tag: "B"}
	release := make(chan struct{})
	releaseA := sync.OnceFunc(func() { close(release) })
	eA := newElector(t, db, "A", interval, nil)
	start(t, eA, a.work(true, release))
	t.Cleanup(releaseA) // runs before the runner's stop: a stubborn work keeps Run from returning
	testwait.For(t, 15*time.Second, "A to hold and write", func() bool { _, n, _, _ := a.snapshot(); return eA.Active() && n >= 3 })

	eB := newElector(t, db, "B", interval, nil)
	start(t, eB, b.work(false, nil))
	testwait.For(t, 15*time.Second, "B's standby connection", func() bool { return len(connectedAs(t, db, "B")) == 1 })
	aPID, _, _, _ := a.snapshot()
	granted, waiting := lockPIDs(t, db)
	if len(granted) != 1 || granted[0] != aPID || len(waiting) != 0 {
		t.Fatalf("lock rows granted=%v waiting=%v, want only A's backend %d", granted, waiting, aPID)
	}
	if _, n, _, _ := b.snapshot(); eB.Active() || n != 0 {
		t.Fatal("B is active while A holds the lock")
	}

	terminate(t, db, aPID)

	testwait.For(t, 15*time.Second, "A's work context to be cancelled", func() bool { _, _, c, _ := a.snapshot(); return c })
	testwait.For(t, 15*time.Second, "B to take over and write", func() bool { _, n, _, _ := b.snapshot(); return eB.Active() && n >= 5 })
	testwait.For(t, 15*time.Second, "A's stubborn work to try writing after its cancellation", func() bool { _, _, _, n := a.snapshot(); return n >= 3 })

	a.mu.Lock()
	if !errors.Is(a.cause, leader.ErrLost) {
		t.Errorf("A's work context cause = %v, want ErrLost", a.cause)
	}
	for i, err := range a.afterCancel {
		if !errors.Is(err, leader.ErrLost) {
			t.Errorf("A's write %d after losing the lock: err = %v, want ErrLost", i, err)
		}
	}
	aCommits := len(a.commits)
	aCancelledAt := a.cancelledAt
	a.mu.Unlock()
	b.mu.Lock()
	bStarted := b.started
	b.mu.Unlock()
	if eA.Active() {
		t.Error("A still reports Active after losing its connection")
	}
	if !aCancelledAt.Before(bStarted) {
		t.Errorf("A's work was cancelled at %v, after B's work started at %v", aCancelledAt, bStarted)
	}

	// The database's view: every A row precedes every B row, both by sequence and by time, and
	// A's rows are exactly the commits A saw succeed.
	var maxA, minB, countA int64
	var lastA, firstB time.Time
	err := db.Pool.QueryRow(t.Context(), `SELECT
			coalesce(max(seq) FILTER (WHERE tag = 'A'), 0), coalesce(min(seq) FILTER (WHERE tag = 'B'), 0),
			count(*) FILTER (WHERE tag = 'A'), max(at) FILTER (WHERE tag = 'A'), min(at) FILTER (WHERE tag = 'B')
		FROM fence_log`).Scan(&maxA, &minB, &countA, &lastA, &firstB)
	if err != nil {
		t.Fatal(err)
	}
	if maxA >= minB {
		t.Errorf("A wrote seq %d after B's first write %d", maxA, minB)
	}
	if !lastA.Before(eB.Since()) || !lastA.Before(firstB) {
		t.Errorf("A's last write at %v; B's term began %v, first write %v", lastA, eB.Since(), firstB)
	}
	if countA != int64(aCommits) {
		t.Errorf("fence_log has %d A rows, A saw %d commits", countA, aCommits)
	}

	// Once A's work returns, A stands by again on a new connection and does not take the lock.
	releaseA()
	testwait.For(t, 15*time.Second, "A to stand by again", func() bool {
		pids := connectedAs(t, db, "A")
		return len(pids) == 1 && pids[0] != aPID
	})
	bPID, _, _, _ := b.snapshot()
	if granted, _ := lockPIDs(t, db); eA.Active() || len(granted) != 1 || granted[0] != bPID {
		t.Errorf("after A stood by: A active=%v, lock held by %v, want B's %d", eA.Active(), granted, bPID)
	}
}

func TestCancelReleasesLockPromptly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	var (
		mu     sync.Mutex
		causeA error
		pidA   uint32
	)
	eA := newElector(t, db, "A", 50*time.Millisecond, nil)
	rA := start(t, eA, func(ctx context.Context, s *leader.Session) error {
		mu.Lock()
		pidA = s.PID()
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		causeA = context.Cause(ctx)
		mu.Unlock()
		return nil
	})
	testwait.For(t, 15*time.Second, "A's work to start", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return pidA != 0 && eA.Active()
	})
	eB := newElector(t, db, "B", 50*time.Millisecond, nil)
	pidB := make(chan uint32, 1)
	start(t, eB, func(ctx context.Context, s *leader.Session) error {
		pidB <- s.PID()
		<-ctx.Done()
		return nil
	})
	testwait.For(t, 15*time.Second, "B's standby connection", func() bool { return len(connectedAs(t, db, "B")) == 1 })

	stopped := time.Now()
	if err := rA.stop(t); err != nil {
		t.Fatalf("A's Run: %v", err)
	}
	// Prompt: the release is an unlock, not the server noticing a dead session, so B's next
	// poll (every 50ms) gets the lock.
	testwait.For(t, 15*time.Second, "B to take over", eB.Active)
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("takeover took %v after A's context ended", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(causeA, context.Canceled) {
		t.Errorf("A's work context cause = %v, want context.Canceled", causeA)
	}
	if eA.Active() || !eA.Since().IsZero() {
		t.Error("A reports a term after Run returned")
	}
	if pids := connectedAs(t, db, "A"); len(pids) != 0 {
		t.Errorf("A left connections %v open", pids)
	}
	b := <-pidB
	if granted, _ := lockPIDs(t, db); len(granted) != 1 || granted[0] != b || b == pidA {
		t.Errorf("lock held by %v, want B's %d", granted, b)
	}
}

func TestHolderNeverStacksLocks(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	reg := prometheus.NewRegistry()
	type term struct {
		pid     uint32
		unlocks []bool
		cause   error
	}
	terms := make(chan *term, 2)
	unlockNow := make(chan struct{})
	e := newElector(t, db, "A", 50*time.Millisecond, reg)
	first := true
	start(t, e, func(ctx context.Context, s *leader.Session) error {
		tm := &term{pid: s.PID()}
		if first {
			select {
			case <-unlockNow:
			case <-ctx.Done():
				// Lost before the test unlocked (a check that timed out on a loaded machine):
				// the next term does the unlocking, so the test never waits for a term that
				// will not end.
				return nil
			}
			// Unlock until PostgreSQL says nothing is left: one lock call per term means the
			// first unlock releases it and the second finds nothing.
			for range 2 {
				var released bool
				err := s.Do(ctx, func(conn *pgx.Conn) error {
					return conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", leader.Key(role)).Scan(&released)
				})
				if err != nil && len(tm.unlocks) == 0 {
					return nil // lost before unlocking anything: the next term unlocks
				}
				if err != nil {
					// The check ran between the two unlocks and found the lock gone: as
					// telling as a second unlock that finds nothing.
					released = false
				}
				tm.unlocks = append(tm.unlocks, released)
				if err != nil {
					break
				}
			}
			first = false
		}
		<-ctx.Done()
		tm.cause = context.Cause(ctx)
		terms <- tm
		return nil
	})
	testwait.For(t, 15*time.Second, "A to hold", e.Active)

	// Let several checks run (each refreshes heartbeat_at), then look at pg_locks.
	var firstBeat time.Time
	beats := 0
	testwait.For(t, 15*time.Second, "three heartbeats", func() bool {
		hs, err := leader.Holders(t.Context(), db.Pool)
		if err != nil || len(hs) != 1 {
			return false
		}
		if hs[0].HeartbeatAt.After(firstBeat) {
			firstBeat, beats = hs[0].HeartbeatAt, beats+1
		}
		return beats >= 4
	})
	granted, waiting := lockPIDs(t, db)
	if len(granted) != 1 || len(waiting) != 0 {
		t.Fatalf("lock rows granted=%v waiting=%v, want exactly one", granted, waiting)
	}

	close(unlockNow)
	t1 := <-terms
	if fmt.Sprint(t1.unlocks) != "[true false]" {
		t.Errorf("unlock results %v, want [true false]: the lock was taken more than once", t1.unlocks)
	}
	if !errors.Is(t1.cause, leader.ErrLost) {
		t.Errorf("after its lock vanished the term's cause = %v, want ErrLost", t1.cause)
	}
	// The elector stands by again and, alone, takes a new term on a new connection.
	testwait.For(t, 15*time.Second, "a second term", func() bool {
		granted, _ := lockPIDs(t, db)
		return e.Active() && len(granted) == 1 && granted[0] != t1.pid
	})
	if got := metric(t, reg, "msgx_leader_acquired_total"); got != 2 {
		t.Errorf("msgx_leader_acquired_total = %v, want 2", got)
	}
	if got := metric(t, reg, "msgx_leader_active"); got != 1 {
		t.Errorf("msgx_leader_active = %v, want 1", got)
	}
}

func TestHoldersReportsActiveAndDeadHolders(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	hs, err := leader.Holders(t.Context(), db.Pool)
	if err != nil || len(hs) != 0 {
		t.Fatalf("Holders on an empty database = %v, %v", hs, err)
	}

	// A row for another role whose backend holds some other advisory lock: not active.
	other, err := db.Pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if _, err := other.Exec(t.Context(), "SELECT pg_advisory_lock(42)"); err != nil {
		t.Fatal(err)
	}
	defer other.Exec(context.Background(), "SELECT pg_advisory_unlock(42)")
	if _, err := other.Exec(t.Context(), `INSERT INTO role_holder (role, instance, backend_pid, since, heartbeat_at)
		VALUES ('ingest', 'X', pg_backend_pid(), now(), now())`); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	var pid uint32
	var pidMu sync.Mutex
	e := newElector(t, db, "A", 50*time.Millisecond, nil)
	start(t, e, func(ctx context.Context, s *leader.Session) error {
		pidMu.Lock()
		pid = s.PID()
		pidMu.Unlock()
		<-release // ignores ctx, so the elector cannot re-acquire before we look
		return nil
	})
	releaseWork := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseWork) // runs before the runner's stop, which waits for the work
	var aPID uint32
	testwait.For(t, 15*time.Second, "A's work to start", func() bool {
		pidMu.Lock()
		defer pidMu.Unlock()
		aPID = pid
		return aPID != 0 && e.Active()
	})

	hs, err = leader.Holders(t.Context(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[0].Role != "ingest" || hs[1].Role != role {
		t.Fatalf("Holders = %+v, want ingest then pump", hs)
	}
	if hs[0].Active {
		t.Error("a holder without the role's lock reads as active")
	}
	h := hs[1]
	if !h.Active || h.Instance != "A" || h.PID != aPID {
		t.Errorf("holder = %+v, want active A with pid %d", h, aPID)
	}
	if d := h.Since.Sub(e.Since()); d > time.Microsecond || d < -time.Microsecond {
		t.Errorf("holder since %v, elector since %v", h.Since, e.Since())
	}
	if h.HeartbeatAt.Before(h.Since) {
		t.Errorf("heartbeat %v before since %v", h.HeartbeatAt, h.Since)
	}

	terminate(t, db, aPID)
	testwait.For(t, 15*time.Second, "the dead holder to read as not active", func() bool {
		hs, err := leader.Holders(t.Context(), db.Pool)
		return err == nil && len(hs) == 2 && !hs[1].Active
	})
	hs, err = leader.Holders(t.Context(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if hs[1].PID != aPID || hs[1].Instance != "A" {
		t.Errorf("dead holder row = %+v, want A's last term", hs[1])
	}
	releaseWork()
}

func TestWorkErrorResignsAndSessionEnds(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	reg := prometheus.NewRegistry()
	sessions := make(chan *leader.Session, 2)
	e := newElector(t, db, "A", 50*time.Millisecond, reg)
	terms := 0 // only touched by the work, which Run calls one term at a time
	r := start(t, e, func(ctx context.Context, s *leader.Session) error {
		sessions <- s
		if terms++; terms == 1 {
			return errors.New("boom")
		}
		<-ctx.Done()
		return nil
	})
	s1, s2 := <-sessions, <-sessions
	if s1.PID() == s2.PID() {
		t.Errorf("second term reused the first term's connection (pid %d)", s1.PID())
	}
	err := s1.Do(t.Context(), func(*pgx.Conn) error { return errors.New("fn ran") })
	if !errors.Is(err, leader.ErrLost) {
		t.Errorf("Do on an ended term = %v, want ErrLost", err)
	}
	if err := s2.Tx(t.Context(), func(tx pgx.Tx) error {
		_, err := tx.Exec(t.Context(), "SELECT 1")
		return err
	}); err != nil {
		t.Errorf("Tx on the held term: %v", err)
	}
	if err := e.Run(t.Context(), func(context.Context, *leader.Session) error { return nil }); err == nil {
		t.Error("a second concurrent Run on one elector was accepted")
	}
	testwait.For(t, 15*time.Second, "the second term to be active", e.Active)
	if got := metric(t, reg, "msgx_leader_acquired_total"); got != 2 {
		t.Errorf("msgx_leader_acquired_total = %v, want 2", got)
	}

	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, reg, "msgx_leader_active"); got != 0 {
		t.Errorf("msgx_leader_active = %v after Run returned, want 0", got)
	}
	if granted, _ := lockPIDs(t, db); len(granted) != 0 {
		t.Errorf("lock still held by %v after Run returned", granted)
	}
}

func TestNoWorkWithoutARecordedTerm(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, "DROP TABLE role_holder")
	reg := prometheus.NewRegistry()
	var calls sync.Map
	e := newElector(t, db, "A", 50*time.Millisecond, reg)
	start(t, e, func(ctx context.Context, s *leader.Session) error {
		calls.Store(s.PID(), true)
		<-ctx.Done()
		return nil
	})
	// Each attempt takes the lock, fails to record the term, resigns and closes its connection;
	// seeing three different lock connections means three attempts were made.
	seen := map[uint32]bool{}
	testwait.For(t, 15*time.Second, "three attempts", func() bool {
		for _, pid := range connectedAs(t, db, "A") {
			seen[pid] = true
		}
		return len(seen) >= 3
	})
	calls.Range(func(pid, _ any) bool {
		t.Errorf("work ran on pid %v without a role_holder row", pid)
		return true
	})
	if got := metric(t, reg, "msgx_leader_acquired_total"); got != 0 {
		t.Errorf("msgx_leader_acquired_total = %v, want 0", got)
	}
	if e.Active() {
		t.Error("Active without a recorded term")
	}
}
