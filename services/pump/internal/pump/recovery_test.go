package pump_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/notify"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// instance is one pump "process": a pump under a real elector holding the pump role's
// advisory lock, so its writes are fenced exactly as in msgx-pump.
type instance struct {
	cancel context.CancelFunc
	done   chan error
	pid    atomic.Uint32 // the lock connection's backend, once the role is held
}

func (e *env) start(t *testing.T, name string, p *pump.Pump, wake <-chan struct{}) *instance {
	t.Helper()
	el := leader.New(leader.Config{DSN: e.pg.DSN, Role: "pump", Instance: name, Logger: testLogger(t).With("instance", name),
		RetryInterval: 50 * time.Millisecond, CheckInterval: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{cancel: cancel, done: make(chan error, 1)}
	go func() {
		in.done <- el.Run(ctx, func(ctx context.Context, s *leader.Session) error {
			in.pid.Store(s.PID())
			return p.Run(ctx, s, wake)
		})
	}()
	t.Cleanup(func() { in.stop(t) })
	return in
}

// stop ends the instance as a shutdown would and waits for it.
func (in *instance) stop(t *testing.T) {
	t.Helper()
	in.cancel()
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("elector: %v", err)
		}
		in.done <- nil // stop is idempotent
	case <-time.After(30 * time.Second):
		t.Error("the pump did not stop within 30s")
	}
}

// crash ends the instance's PostgreSQL session the way a killed process or a cut network
// does: the server terminates the backend, rolls back its open transaction and releases its
// session locks.
func (e *env) crash(t *testing.T, in *instance) {
	t.Helper()
	testwait.For(t, 30*time.Second, "the role to be held", func() bool { return in.pid.Load() != 0 })
	e.pg.Exec(t, `SELECT pg_terminate_backend($1)`, int32(in.pid.Load()))
}

// hook blocks a step at one point until the test releases it, after telling the test the
// point was reached.
type hook struct {
	reached chan struct{}
	release chan struct{}
	armed   atomic.Bool
}

func newHook() *hook {
	h := &hook{reached: make(chan struct{}), release: make(chan struct{})}
	h.armed.Store(true)
	return h
}

// at blocks the first caller only; it reports whether it blocked.
func (h *hook) at() bool {
	if !h.armed.CompareAndSwap(true, false) {
		return false
	}
	close(h.reached)
	<-h.release
	return true
}

func (h *hook) wait(t *testing.T) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(60 * time.Second):
		t.Fatal("the step never reached the hook")
	}
}

func (e *env) waitState(t *testing.T, id int64, state queue.State) queue.Message {
	t.Helper()
	var m queue.Message
	testwait.For(t, 60*time.Second, "message to become "+string(state), func() bool {
		m = e.get(t, id)
		return m.State == state
	})
	return m
}

// R-INV-8 (a crash inside the business transaction): the process dies inside step ①. The transaction rolls back as a
// whole, the message is still PENDING (the interruption is not an attempt) and the restarted
// pump processes it once.
func TestRecoveryCrashInsideBusinessTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clkReal()
	h := newHook()
	real := processor.NewFlights(flight.DayRule{Zone: zone})
	inside := procFunc(func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
		res, err := real.Apply(ctx, tx, in)
		if err != nil {
			return res, err
		}
		h.at() // written, not committed
		return res, err
	})
	id := e.add(t, e.adft("2001"))
	a := e.start(t, "a", e.newPump(t, options{route: routeTo{inside}.route}), nil)
	h.wait(t)
	if v := e.flightVersion(t, "2001"); v != 0 {
		t.Fatalf("uncommitted flight visible: version %d", v)
	}
	e.crash(t, a)
	close(h.release)
	a.stop(t)
	if m := e.get(t, id); m.State != queue.Pending || m.Attempts != 0 || e.flightVersion(t, "2001") != 0 || e.events(t, id) != 0 {
		t.Fatalf("after the crash: %s attempts %d version %d events %d, want PENDING, nothing written",
			m.State, m.Attempts, e.flightVersion(t, "2001"), e.events(t, id))
	}

	e.start(t, "b", e.newPump(t, options{}), nil)
	m := e.waitState(t, id, queue.Succeeded)
	if m.Attempts != 0 {
		t.Errorf("attempts %d, want 0: a crash is not an attempt", m.Attempts)
	}
	if v := e.flightVersion(t, "2001"); v != 1 {
		t.Errorf("flight version %d, want 1: one application", v)
	}
	e.wantProjectionCurrent(t, "2001")
}

// R-PUMP-9 (① committed, the Redis write or the terminal state not): the process dies after ① committed,
// before the terminal transaction. The message has no terminal state and is still the head;
// the restarted pump reprocesses the whole message and rewrites the projection from the
// current state.
// Guards R-INV-7.
func TestRecoveryCrashBetweenDomainAndTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clkReal()
	create := e.add(t, e.adft("2002"))
	b0 := e.newPump(t, options{})
	s := e.session(t)
	drain(t, b0, s, e)
	wantState(t, e.get(t, create), queue.Succeeded, "")

	h := newHook()
	crashing := &hookProjector{h: h, next: e.proj}
	id := e.add(t, e.remark("2002", "AFTER CRASH"))
	a := e.start(t, "a", e.newPump(t, options{proj: crashing}), nil)
	h.wait(t)
	committed := e.flightVersion(t, "2002")
	if committed != 2 || e.events(t, id) == 0 {
		t.Fatalf("step ① not committed before ②: version %d events %d", committed, e.events(t, id))
	}
	if m := e.get(t, id); m.State != queue.Pending {
		t.Fatalf("message %s before ③, want PENDING", m.State)
	}
	e.crash(t, a)
	close(h.release)
	a.stop(t)
	if m := e.get(t, id); m.State != queue.Pending || m.Attempts != 0 {
		t.Fatalf("after the crash: %s attempts %d, want PENDING, not counted", m.State, m.Attempts)
	}
	if m := e.get(t, id); m.AppliedAt == nil {
		t.Fatal("after the crash: applied_at not committed with step ①; the re-run would apply again")
	}

	e.start(t, "b", e.newPump(t, options{}), nil)
	m := e.waitState(t, id, queue.Succeeded)
	if m.Attempts != 0 || m.BackfillNextAt == nil {
		t.Errorf("after the re-run: attempts %d backfill intent %v", m.Attempts, m.BackfillNextAt)
	}
	if v, n := e.flightVersion(t, "2002"), e.events(t, id); v != committed || n != 1 {
		t.Errorf("after the re-run: version %d events %d, want %d and 1", v, n, committed)
	}
	e.wantProjectionCurrent(t, "2002")
	if !e.pipelineLockFree(t) {
		t.Error("the pipeline lock outlived the crashed session")
	}
}

// R-INV-9 (the terminal state committed, the marker not written): the process dies after the terminal transaction. The
// row keeps its backfill intent; the restarted pump leaves it alone (the marker is the
// backfill's) and goes on with the next message.
func TestRecoveryCrashAfterTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clkReal()
	id := e.add(t, e.adft("2003"))
	a := e.start(t, "a", e.newPump(t, options{}), nil)
	before := e.waitState(t, id, queue.Succeeded)
	version, events := e.flightVersion(t, "2003"), e.events(t, id)
	e.crash(t, a)
	a.stop(t)

	e.start(t, "b", e.newPump(t, options{}), nil)
	next := e.add(t, e.remark("2003", "NEXT"))
	e.waitState(t, next, queue.Succeeded)
	after := e.get(t, id)
	if after.State != queue.Succeeded || !after.UpdatedAt.Equal(before.UpdatedAt) || after.BackfillNextAt == nil || after.BackfillAt != nil {
		t.Errorf("terminal row changed by the restart: %+v", after)
	}
	if e.events(t, id) != events || e.flightVersion(t, "2003") != version+1 {
		t.Errorf("the restart reprocessed a terminal message: events %d→%d", events, e.events(t, id))
	}
}

// A replay wakes a pump that waits for its head's retry: the pump would otherwise sleep until
// next_attempt_at (an hour here).
func TestReplayWakesPump(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clkReal()
	e.cfg.Pipeline.Backoff = []time.Duration{time.Hour, time.Hour, time.Hour, time.Hour, time.Hour}
	e.cfg.Pipeline.BackoffCap = time.Hour
	sw := &switchProjector{}
	sw.set(e.refusing(t))
	id := e.add(t, e.adft("2004"))
	listener := notify.New(e.pg.DSN, testLogger(t), queue.Channel)
	lctx, lcancel := context.WithCancel(context.Background())
	ldone := make(chan error, 1)
	go func() { ldone <- listener.Run(lctx) }()
	t.Cleanup(func() { lcancel(); <-ldone })
	e.start(t, "a", e.newPump(t, options{proj: sw}), listener.C())
	m := e.waitState(t, id, queue.Failed)
	if m.NextAttemptAt == nil || time.Until(*m.NextAttemptAt) < 50*time.Minute {
		t.Fatalf("next attempt %v, want about an hour away", m.NextAttemptAt)
	}
	sw.set(e.proj)
	res, err := queue.Replay(t.Context(), e.pg.Pool, queue.ReplayRequest{MsgIDs: []int64{id}}, time.Now())
	if err != nil || len(res.Replayed) != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	m = e.waitState(t, id, queue.Succeeded)
	if m.Attempts != 0 {
		t.Errorf("attempts %d after the replayed run, want 0", m.Attempts)
	}
}

// hookProjector stops at ② (after ① committed): it blocks at the hook, then fails as the
// crashed process would never write.
type hookProjector struct {
	h    *hook
	next pump.Projector
}

func (p *hookProjector) Write(ctx context.Context, f []flight.Projected) (int, error) {
	if p.h.at() {
		return 0, errors.New("process crashed before the projection")
	}
	return p.next.Write(ctx, f)
}

func (p *hookProjector) Probe(ctx context.Context) error { return p.next.Probe(ctx) }
