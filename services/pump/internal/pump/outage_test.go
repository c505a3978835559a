package pump_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// shortBudget makes the whole retry budget a fraction of a second, so that an outage of a few
// seconds outlasts it many times over.
func (e *env) shortBudget() {
	e.cfg.Pipeline.MaxAttempts = 2
	e.cfg.Pipeline.Backoff = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}
	e.cfg.Pipeline.BackoffCap = 200 * time.Millisecond
}

// outageRun is the common shape of the real-outage tests: a flight, then messages that arrive
// while the dependency does not answer. It checks that the pump keeps the head uncharged and
// reports the outage, and that after it every message is applied once, in order.
type outageRun struct {
	e          *env
	reg        *prometheus.Registry
	dependency string
	ids        []int64
}

func (r *outageRun) duringOutage(t *testing.T) {
	t.Helper()
	e := r.e
	testwait.For(t, 30*time.Second, "the pump to report the outage", func() bool {
		return gauge(t, r.reg, "msgx_pump_blocked_seconds", "dependency", r.dependency) > 0 && r.holderBlocked(t) != nil
	})
	b := r.holderBlocked(t)
	if b.Dependency != r.dependency || b.MsgID != r.ids[0] || b.LastError == "" {
		t.Errorf("GetStatus's blocked state: %+v, want %s at message %d with the error", b, r.dependency, r.ids[0])
	}
	// Far longer than the whole retry budget: nothing is charged, nothing overtakes the head.
	time.Sleep(time.Second)
	for _, id := range r.ids {
		wantBlocked(t, e.get(t, id))
	}
}

func (r *outageRun) afterOutage(t *testing.T, flid, remark string) {
	t.Helper()
	e := r.e
	r.noneCharged(t)
	if v := e.flightVersion(t, flid); v != int64(1+len(r.ids)) {
		t.Errorf("flight %s at version %d, want %d: each message applied once", flid, v, 1+len(r.ids))
	}
	var remc string
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(remc, '') FROM flight_schd WHERE flid = $1`, flid).Scan(&remc); err != nil {
		t.Fatal(err)
	}
	if remc != remark {
		t.Errorf("REMC %q, want %q (the last message in ID order)", remc, remark)
	}
	r.blockedCleared(t)
}

// noneCharged waits for every message of the run to succeed and checks that the outage cost
// none of them an attempt, an extra event or a DEAD.
func (r *outageRun) noneCharged(t *testing.T) {
	t.Helper()
	e := r.e
	for _, id := range r.ids {
		m := e.waitState(t, id, queue.Succeeded)
		if m.Attempts != 0 {
			t.Errorf("message %d: %d attempts charged for an outage", id, m.Attempts)
		}
		if n := e.events(t, id); n != 1 {
			t.Errorf("message %d has %d KAFKA:msg events, want 1", id, n)
		}
	}
	var dead int
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_state WHERE state = 'DEAD'`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead != 0 {
		t.Errorf("%d DEAD messages after an outage", dead)
	}
}

// blockedCleared waits for the pump to report the outage over.
func (r *outageRun) blockedCleared(t *testing.T) {
	t.Helper()
	testwait.For(t, 10*time.Second, "the blocked state to clear", func() bool {
		return gauge(t, r.reg, "msgx_pump_blocked_seconds", "dependency", r.dependency) == 0 && r.holderBlocked(t) == nil
	})
}

func (r *outageRun) holderBlocked(t *testing.T) *leader.Blocked {
	t.Helper()
	hs, err := leader.Holders(t.Context(), r.e.pg.Pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.Role == "pump" && h.Active {
			return h.Blocked
		}
	}
	return nil
}

// Redis stops answering (CLIENT PAUSE ALL) for far longer than the retry budget, as during a
// Redis restart: the head waits uncharged and every message is applied once when it is back.
// Guards R-INV-6.
func TestRedisPausedLongerThanRetryBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clkReal()
	e.shortBudget()
	own := redistest.Own(t)
	// The client as msgx-pump builds it (service.Base.Redis): context deadlines honoured.
	opts, err := redis.ParseURL(own.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true
	opts.ReadTimeout, opts.WriteTimeout, opts.DialTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	proj := projection.New(client, own.Prefix, 300*time.Millisecond)
	r := &outageRun{e: e, reg: prometheus.NewRegistry(), dependency: "redis"}
	e.start(t, "a", e.newPump(t, options{proj: proj, reg: r.reg}), nil)
	first := e.add(t, e.adft("8001"))
	e.waitState(t, first, queue.Succeeded)

	if err := own.Client.Do(t.Context(), "CLIENT", "PAUSE", "4000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	r.ids = []int64{e.add(t, e.remark("8001", "DURING")), e.add(t, e.remark("8001", "AFTER"))}
	r.duringOutage(t)
	if time.Since(paused) > 4*time.Second {
		t.Fatal("the pause ended before the outage was observed; the test proves nothing")
	}
	r.afterOutage(t, "8001", "AFTER")
	doc, err := own.Client.Get(t.Context(), projection.FlightKey(own.Prefix, "8001")).Result()
	if err != nil || !strings.Contains(doc, "AFTER") {
		t.Errorf("projection after the outage: %q %v", doc, err)
	}
}

// The inbox table stops answering (another session holds LOCK TABLES … WRITE, as during a
// database team's maintenance) for far longer than the retry budget.
// Guards R-INV-6.
func TestInboxLockedLongerThanRetryBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clkReal()
	e.shortBudget()
	in, err := aodb.Open(e.my.ServiceDSN, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	r := &outageRun{e: e, reg: prometheus.NewRegistry(), dependency: "inbox"}
	e.start(t, "a", e.newPump(t, options{raw: in, reg: r.reg}), nil)
	first := e.add(t, e.adft("8002"))
	e.waitState(t, first, queue.Succeeded)
	r.ids = []int64{e.add(t, e.remark("8002", "DURING")), e.add(t, e.remark("8002", "AFTER"))}

	locker := lockInbox(t, e.my.AdminDSN)
	r.duringOutage(t)
	locker.unlock(t)
	r.afterOutage(t, "8002", "AFTER")
}

// tableLock is a session holding the inbox table locked.
type tableLock struct {
	conn *sql.Conn
	db   *sql.DB
}

func lockInbox(t *testing.T, dsn string) *tableLock {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "LOCK TABLES cminmsgs WRITE"); err != nil {
		t.Fatal(err)
	}
	l := &tableLock{conn: conn, db: db}
	t.Cleanup(func() { l.unlock(t) })
	return l
}

func (l *tableLock) unlock(t *testing.T) {
	if l.conn == nil {
		return
	}
	if _, err := l.conn.ExecContext(context.Background(), "UNLOCK TABLES"); err != nil {
		t.Error(err)
	}
	_ = l.conn.Close()
	_ = l.db.Close()
	l.conn = nil
}

// The database team purges a marked inbox row; a later replay of the message still has its
// text: the one the pump kept when it first read it.
func TestReplayAfterInboxRowPurgedUsesKeptText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.shortBudget()
	s := e.session(t)
	real := processor.Route(flight.DayRule{Zone: zone})
	failing := e.newPump(t, options{route: func(m *sis.Message) (pump.Processor, string) {
		proc, why := real(m)
		if proc == nil {
			return nil, why
		}
		return failAfter{proc}, ""
	}})
	id := e.add(t, e.adft("8003"))
	for range 10 {
		tick(t, failing, s)
		e.clk.Advance(time.Minute)
		if e.get(t, id).State == queue.Dead {
			break
		}
	}
	wantState(t, e.get(t, id), queue.Dead, queue.Exhausted)
	if _, err := e.my.Admin.Exec(`DELETE FROM cminmsgs WHERE CMINMSGS_ID = ?`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Replay(t.Context(), e.pg.Pool, queue.ReplayRequest{MsgIDs: []int64{id}}, e.now()); err != nil {
		t.Fatal(err)
	}
	tick(t, e.newPump(t, options{}), s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
	if v := e.flightVersion(t, "8003"); v != 1 {
		t.Errorf("flight version %d after the replay, want 1", v)
	}
	// Without a kept text a missing row is still raw-missing.
	gone := e.add(t, e.adft("8004"))
	if _, err := e.my.Admin.Exec(`DELETE FROM cminmsgs WHERE CMINMSGS_ID = ?`, gone); err != nil {
		t.Fatal(err)
	}
	tick(t, e.newPump(t, options{}), s)
	if m := e.get(t, gone); m.State != queue.Dead || deref(m.LastError) != "raw-missing" {
		t.Errorf("purged row never read: %s %q, want DEAD raw-missing", m.State, deref(m.LastError))
	}
}
