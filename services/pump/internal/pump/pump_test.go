package pump_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
)

func TestBusinessSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{})
	create := e.add(t, e.adft("1001"))
	change := e.add(t, e.remark("1001", "GATE CHANGE"))
	drain(t, p, s, e)

	for _, id := range []int64{create, change} {
		m := e.get(t, id)
		wantState(t, m, queue.Succeeded, "")
		if m.FinishedAt == nil || m.BackfillNextAt == nil || m.BackfillAt != nil {
			t.Errorf("message %d: finished %v backfill_next_at %v backfill_at %v, want the terminal state with its backfill intent",
				id, m.FinishedAt, m.BackfillNextAt, m.BackfillAt)
		}
		if m.ProcessingStartedAt == nil || m.IdentityKey == nil || m.MsgType == nil {
			t.Errorf("message %d: started %v identity %v type %v, want all recorded", id, m.ProcessingStartedAt, m.IdentityKey, m.MsgType)
		}
		if m.Attempts != 0 {
			t.Errorf("message %d: attempts %d, want 0", id, m.Attempts)
		}
		if n := e.events(t, id); n == 0 {
			t.Errorf("message %d wrote no events", id)
		}
	}
	if v := e.flightVersion(t, "1001"); v != 2 {
		t.Errorf("flight version %d, want 2", v)
	}
	if doc := e.projected(t, "1001"); !strings.Contains(doc, "GATE CHANGE") {
		t.Errorf("projection %q does not carry the remark", doc)
	}
	if !e.pipelineLockFree(t) {
		t.Error("the pipeline lock is still held after the step")
	}
}

// A FAILED head blocks everything behind it: the next message is never processed while the
// head is unfinished, the retry waits for its backoff (the configured table), and the head
// ends DEAD(EXHAUSTED) by attempts only; then the queue moves on.
// Guards R-INV-5.
func TestHeadOfLineBlockingBackoffAndExhaustion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{})
	e.add(t, e.adft("1002"))
	head := e.add(t, e.codecError("1002"))
	behind := e.add(t, e.remark("1002", "BEHIND"))
	tick(t, p, s) // the schedule

	for attempt := 1; attempt <= e.cfg.Pipeline.MaxAttempts; attempt++ {
		if wait := tick(t, p, s); wait != 0 {
			t.Fatalf("attempt %d: the due head waited %s", attempt, wait)
		}
		m := e.get(t, head)
		wantState(t, m, queue.Failed, queue.CodecError)
		if m.Attempts != attempt {
			t.Fatalf("attempts = %d, want %d", m.Attempts, attempt)
		}
		backoff := e.cfg.Pipeline.Retry().After(attempt)
		if want := e.clk.Now().Add(backoff); m.NextAttemptAt == nil || !m.NextAttemptAt.Equal(want) {
			t.Fatalf("attempt %d: next_attempt_at %v, want %v (backoff %s)", attempt, m.NextAttemptAt, want, backoff)
		}
		if m.ProcessingStartedAt == nil || !m.ProcessingStartedAt.Equal(start) {
			t.Fatalf("processing_started_at %v, want the first attempt's start %v", m.ProcessingStartedAt, start)
		}
		// Not due: the pump waits exactly until the retry and touches nothing behind.
		e.clk.Advance(backoff - time.Millisecond)
		if wait := tick(t, p, s); wait != time.Millisecond {
			t.Fatalf("attempt %d: wait %s before the retry, want 1ms", attempt, wait)
		}
		if got := e.get(t, behind); got.State != queue.Pending || got.ProcessingStartedAt != nil {
			t.Fatalf("message %d behind the FAILED head was touched: %s", behind, got.State)
		}
		e.clk.Advance(time.Millisecond)
	}
	lastError := deref(e.get(t, head).LastError)
	tick(t, p, s) // exhaustion
	m := e.get(t, head)
	wantState(t, m, queue.Dead, queue.Exhausted)
	if deref(m.LastError) != lastError || lastError == "" {
		t.Errorf("last_error %q, want the last failure kept: %q", deref(m.LastError), lastError)
	}
	if m.BackfillNextAt == nil || m.FinishedAt == nil || m.NextAttemptAt != nil {
		t.Errorf("exhausted row: backfill_next_at %v finished_at %v next_attempt_at %v", m.BackfillNextAt, m.FinishedAt, m.NextAttemptAt)
	}
	if got := e.get(t, behind); got.State != queue.Pending {
		t.Fatalf("message behind was processed before the head ended: %s", got.State)
	}
	tick(t, p, s)
	wantState(t, e.get(t, behind), queue.Succeeded, "")

	// The attempt history: each counted failure with its error, none for exhaustion (not an
	// attempt), none for a message that succeeded at once; the FLOPs are bound to their flight.
	hist, err := queue.Attempts(t.Context(), e.pg.Pool, head)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != e.cfg.Pipeline.MaxAttempts {
		t.Fatalf("history of the head = %+v, want %d attempts", hist, e.cfg.Pipeline.MaxAttempts)
	}
	for i, a := range hist {
		if a.No != i+1 || a.Outcome != queue.Failed || a.ErrorClass == nil || *a.ErrorClass != queue.CodecError ||
			deref(a.Error) != lastError || a.Ended.Before(a.Started) {
			t.Errorf("attempt %d = %+v", i+1, a)
		}
	}
	if hist, err := queue.Attempts(t.Context(), e.pg.Pool, behind); err != nil || len(hist) != 0 {
		t.Errorf("history of a first-time success = %+v, %v; want none", hist, err)
	}
	if got := e.get(t, behind); deref(got.FLID) != "1002" {
		t.Errorf("flid of the FLOP = %q, want 1002", deref(got.FLID))
	}
}

// Only discovered rows are claimed (R-PUMP-1, R-INV-4): a PENDING row above W waits.
func TestHeadStaysAtOrBelowWatermark(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{})
	id := e.add(t, e.adft("1003"))
	e.pg.Exec(t, `UPDATE inbox_cursor SET w = $1`, id-1)
	if wait := tick(t, p, s); wait != e.cfg.Pipeline.PollInterval {
		t.Fatalf("wait %s with no head at or below W, want the poll interval", wait)
	}
	wantState(t, e.get(t, id), queue.Pending, "")
	e.pg.Exec(t, `UPDATE inbox_cursor SET w = $1`, id)
	tick(t, p, s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
}

// TestNonBusinessTerminalStates guards R-INV-3, R-INV-9.
func TestNonBusinessTerminalStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	reg := prometheus.NewRegistry()
	p := e.newPump(t, options{reg: reg})
	first := e.add(t, e.adft("1004"))
	dupText := e.remark("1004", "ONCE")
	original := e.add(t, dupText)
	duplicate := e.add(t, dupText)
	bad := e.add(t, malformed)
	unsupported := e.add(t, e.unsupported("1004"))
	missing := e.my.InsertInbox(t, e.adft("1005"), nil) + 100
	e.enqueue(t, missing)
	drain(t, p, s, e)

	wantState(t, e.get(t, first), queue.Succeeded, "")
	wantState(t, e.get(t, original), queue.Succeeded, "")
	d := e.get(t, duplicate)
	wantState(t, d, queue.Skipped, "")
	if want := "duplicate-of:" + itoa(original); deref(d.LastError) != want {
		t.Errorf("duplicate's reason %q, want %q", deref(d.LastError), want)
	}
	if e.events(t, duplicate) != 0 {
		t.Error("the duplicate wrote events")
	}
	wantState(t, e.get(t, bad), queue.Dead, queue.Malformed)
	u := e.get(t, unsupported)
	wantState(t, u, queue.Skipped, queue.Unsupported)
	if !strings.HasPrefix(deref(u.LastError), "unsupported") {
		t.Errorf("unsupported reason %q", deref(u.LastError))
	}
	r := e.get(t, missing)
	wantState(t, r, queue.Dead, queue.Malformed)
	if deref(r.LastError) != "raw-missing" {
		t.Errorf("missing row's reason %q, want raw-missing", deref(r.LastError))
	}
	for _, id := range []int64{duplicate, bad, unsupported, missing} {
		m := e.get(t, id)
		if m.Attempts != 0 || m.FinishedAt == nil || m.BackfillNextAt == nil {
			t.Errorf("message %d: attempts %d finished %v backfill intent %v, want a terminal state with its intent and no attempt",
				id, m.Attempts, m.FinishedAt, m.BackfillNextAt)
		}
	}
	// The DEAD gauge is read from proc_state: it says 2 for as long as the rows stay DEAD, and
	// every other class reads 0 (a series that resolves rather than vanishes).
	for range 2 {
		if _, err := p.ReportBacklog(t.Context(), e.pg.Pool); err != nil {
			t.Fatal(err)
		}
		if got := gauge(t, reg, "msgx_pipeline_messages_dead", "error_class", "MALFORMED"); got != 2 {
			t.Errorf("msgx_pipeline_messages_dead{MALFORMED} = %v, want 2", got)
		}
		if got := gauge(t, reg, "msgx_pipeline_messages_dead", "error_class", "EXHAUSTED"); got != 0 {
			t.Errorf("msgx_pipeline_messages_dead{EXHAUSTED} = %v, want 0", got)
		}
	}
	// An operator's acknowledgement moves a row from the DEAD gauge to the acknowledged one.
	if _, err := queue.AcknowledgeDead(t.Context(), e.pg.Pool, queue.AckRequest{MsgIDs: []int64{missing}, By: "op",
		Reason: "purged upstream"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReportBacklog(t.Context(), e.pg.Pool); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, reg, "msgx_pipeline_messages_dead", "error_class", "MALFORMED"); got != 1 {
		t.Errorf("after the acknowledgement msgx_pipeline_messages_dead{MALFORMED} = %v, want 1", got)
	}
	if got := gauge(t, reg, "msgx_pipeline_messages_dead_acknowledged", "error_class", "MALFORMED"); got != 1 {
		t.Errorf("msgx_pipeline_messages_dead_acknowledged{MALFORMED} = %v, want 1", got)
	}
}

// A message's own retry is not a duplicate of itself: the identity bound on the first attempt
// is kept.
// Guards R-INV-3.
func TestRetryKeepsOwnIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	sw := &switchProjector{}
	sw.set(down(t))
	p := e.newPump(t, options{proj: sw})
	id := e.add(t, e.adft("1006"))
	tick(t, p, s)
	wantBlocked(t, e.get(t, id))
	if e.get(t, id).IdentityKey == nil {
		t.Fatal("identity not bound on the first attempt")
	}
	sw.set(e.proj)
	e.clk.Advance(time.Minute)
	tick(t, p, s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
}

// The inbox unreachable is an outage, never "missing" and never the message's attempt: the
// head is kept uncharged and runs as soon as the inbox answers.
// Guards R-INV-6.
func TestInboxUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	dead, err := aodb.Open("svc:pw@tcp(127.0.0.1:1)/none?parseTime=true", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dead.Close() })
	sw := &switchReader{}
	sw.set(dead)
	reg := prometheus.NewRegistry()
	p := e.newPump(t, options{raw: sw, reg: reg})
	id := e.add(t, e.adft("1007"))
	if wait := tick(t, p, s); wait <= 0 {
		t.Fatalf("blocked tick waits %s, want a backoff", wait)
	}
	wantBlocked(t, e.get(t, id))
	if v := gauge(t, reg, "msgx_pump_blocked_seconds", "dependency", "inbox"); v < 0 {
		t.Fatalf("blocked gauge %v", v)
	}
	e.clk.Advance(3 * time.Second)
	if v := gauge(t, reg, "msgx_pump_blocked_seconds", "dependency", "inbox"); v < 3 {
		t.Fatalf("blocked gauge %v after 3s, want ≥ 3", v)
	}
	// Still down: probed, still uncharged, however often.
	for range 3 {
		e.clk.Advance(time.Minute)
		tick(t, p, s)
	}
	wantBlocked(t, e.get(t, id))
	sw.set(e.inbox)
	tick(t, p, s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
	if v := gauge(t, reg, "msgx_pump_blocked_seconds", "dependency", "inbox"); v != 0 {
		t.Fatalf("blocked gauge %v after recovery, want 0", v)
	}
}

// Redis unreachable after ① committed: an outage, not an attempt. The message stays the head,
// uncharged and not terminal; when Redis is back its re-run rewrites the projection from the
// current state and adds no second set of events.
// Guards R-INV-6.
func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	sw := &switchProjector{}
	sw.set(e.proj)
	p := e.newPump(t, options{proj: sw})
	e.add(t, e.adft("1008"))
	tick(t, p, s)
	sw.set(down(t))
	id := e.add(t, e.remark("1008", "REDIS DOWN"))
	tick(t, p, s)
	m := e.get(t, id)
	wantBlocked(t, m)
	if m.FinishedAt != nil || m.BackfillNextAt != nil || m.AppliedAt == nil {
		t.Fatalf("a message whose projection failed after ①: %+v", m)
	}
	if e.flightVersion(t, "1008") != 2 || e.events(t, id) != 1 {
		t.Fatalf("step ① should stay committed: version %d, events %d", e.flightVersion(t, "1008"), e.events(t, id))
	}
	if strings.Contains(e.projected(t, "1008"), "REDIS DOWN") {
		t.Fatal("the projection has the change although Redis was down")
	}
	e.clk.Advance(time.Minute)
	tick(t, p, s)
	wantBlocked(t, e.get(t, id))
	sw.set(e.proj)
	e.clk.Advance(time.Minute)
	tick(t, p, s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
	if !strings.Contains(e.projected(t, "1008"), "REDIS DOWN") {
		t.Error("the projection was not rewritten when Redis came back")
	}
	if e.flightVersion(t, "1008") != 2 || e.events(t, id) != 1 {
		t.Fatalf("the re-run applied again: version %d, events %d", e.flightVersion(t, "1008"), e.events(t, id))
	}
	e.wantProjectionCurrent(t, "1008")
}

// A PostgreSQL failure inside ① rolls back everything the processor wrote.
// Guards R-INV-8.
func TestBusinessTransactionRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	real := processor.Route(flight.DayRule{Zone: zone})
	route := func(m *sis.Message) (pump.Processor, string) {
		proc, why := real(m)
		if proc == nil {
			return nil, why
		}
		return failAfter{proc}, ""
	}
	p := e.newPump(t, options{route: route})
	id := e.add(t, e.adft("1009"))
	tick(t, p, s)
	m := e.get(t, id)
	wantState(t, m, queue.Failed, queue.Infra)
	if e.flightVersion(t, "1009") != 0 || e.events(t, id) != 0 {
		t.Fatalf("the failed transaction left writes: version %d, events %d", e.flightVersion(t, "1009"), e.events(t, id))
	}
	if !e.pipelineLockFree(t) {
		t.Error("the pipeline lock is still held after a failed step")
	}
}

// failAfter writes through the real processor, then fails as a PostgreSQL statement would.
type failAfter struct{ pump.Processor }

func (f failAfter) Apply(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
	if _, err := f.Processor.Apply(ctx, tx, in); err != nil {
		return pump.Result{}, err
	}
	_, err := tx.Exec(ctx, `SELECT 1/0`)
	return pump.Result{}, err
}

type routeTo struct{ proc pump.Processor }

func (r routeTo) route(*sis.Message) (pump.Processor, string) { return r.proc, "" }

type procFunc func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error)

func (f procFunc) Apply(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
	return f(ctx, tx, in)
}

// A panic inside a processor is a recorded failure, not a dead pump, and leaves neither a
// transaction nor the pipeline lock behind.
func TestPanicIsRecordedFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	boom := procFunc(func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO flight_schd (flid, updated_at, created_at) VALUES ('PANIC', now(), now())`); err != nil {
			return pump.Result{}, err
		}
		panic("processor bug")
	})
	p := e.newPump(t, options{route: routeTo{boom}.route})
	id := e.add(t, e.adft("1010"))
	tick(t, p, s)
	m := e.get(t, id)
	wantState(t, m, queue.Failed, queue.Infra)
	if !strings.Contains(deref(m.LastError), "panic: processor bug") || m.Attempts != 1 {
		t.Fatalf("last error %q attempts %d", deref(m.LastError), m.Attempts)
	}
	if !e.pipelineLockFree(t) {
		t.Error("the pipeline lock is still held after a panic")
	}
	if e.flightVersion(t, "PANIC") != 0 {
		t.Error("the panicking transaction committed")
	}
	// The session is usable: the next attempt runs normally.
	var inTx bool
	if err := s.Do(t.Context(), func(conn *pgx.Conn) error {
		inTx = conn.PgConn().TxStatus() != 'I'
		return nil
	}); err != nil || inTx {
		t.Fatalf("session after the panic: err %v, in transaction %v", err, inTx)
	}
}

// TestProtocolRejection guards R-INV-8.
func TestProtocolRejection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	real := processor.NewFlights(flight.DayRule{Zone: zone})
	reject := procFunc(func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
		// Half the message applied, then rejected as a whole: nothing may stay.
		if _, err := real.Apply(ctx, tx, in); err != nil {
			return pump.Result{}, err
		}
		return pump.Result{}, pump.Reject("RECS does not match the records")
	})
	p := e.newPump(t, options{route: routeTo{reject}.route})
	id := e.add(t, e.adft("1011"))
	tick(t, p, s)
	m := e.get(t, id)
	wantState(t, m, queue.Dead, queue.Protocol)
	if m.BackfillNextAt == nil || m.Attempts != 0 {
		t.Errorf("DEAD(PROTOCOL): backfill intent %v attempts %d", m.BackfillNextAt, m.Attempts)
	}
	if v, n := e.flightVersion(t, "1011"), e.events(t, id); v != 0 || n != 0 {
		t.Errorf("a rejected message left writes: version %d, events %d", v, n)
	}
}

// Stopping the service mid-step is not an attempt of the message.
func TestShutdownIsNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	entered := make(chan struct{})
	block := procFunc(func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
		close(entered)
		<-ctx.Done()
		return pump.Result{}, ctx.Err()
	})
	p := e.newPump(t, options{route: routeTo{block}.route})
	id := e.add(t, e.adft("1012"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, s, nil) }()
	<-entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	m := e.get(t, id)
	if m.State != queue.Pending || m.Attempts != 0 {
		t.Fatalf("after a shutdown mid-step: %s attempts %d, want PENDING with no attempt", m.State, m.Attempts)
	}
}

// Losing the lock connection mid-step is not an attempt either, and nothing of the
// interrupted transaction stays.
func TestLostLeadershipIsNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	real := processor.NewFlights(flight.DayRule{Zone: zone})
	cut := procFunc(func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
		res, err := real.Apply(ctx, tx, in)
		if err != nil {
			return res, err
		}
		e.pg.Exec(t, `SELECT pg_terminate_backend($1)`, s.PID())
		// The next statement finds the connection gone, as a crash of the session would.
		_, err = tx.Exec(ctx, `SELECT 1`)
		return res, err
	})
	p := e.newPump(t, options{route: routeTo{cut}.route})
	id := e.add(t, e.adft("1013"))
	_, err := p.Tick(t.Context(), s)
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	m := e.get(t, id)
	if m.State != queue.Pending || m.Attempts != 0 {
		t.Fatalf("after losing the session: %s attempts %d, want PENDING, not counted", m.State, m.Attempts)
	}
	if e.flightVersion(t, "1013") != 0 || e.events(t, id) != 0 {
		t.Fatal("the interrupted transaction left writes")
	}
}

// The head's ages and the backlog figures are exported.
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	reg := prometheus.NewRegistry()
	e.cfg.Pipeline.Backoff = []time.Duration{time.Minute, time.Minute, time.Minute, time.Minute, time.Minute}
	p := e.newPump(t, options{reg: reg})
	e.add(t, e.adft("1014"))
	e.add(t, e.adft("1015"))
	stuck := e.add(t, e.codecError("1014"))
	e.clk.Advance(90 * time.Second)
	tick(t, p, s)
	tick(t, p, s)
	tick(t, p, s) // first failed attempt of the codec error
	e.clk.Advance(30 * time.Second)
	tick(t, p, s) // not due: observes the head
	gauge := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("metric %s not registered", name)
		return 0
	}
	if got := gauge("msgx_pump_head_age_seconds"); got != 120 {
		t.Errorf("head age %v, want 120 (since enqueued)", got)
	}
	if got := gauge("msgx_pump_head_stuck_seconds"); got != 30 {
		t.Errorf("head stuck %v, want 30 (since the first attempt)", got)
	}
	if got := gauge("msgx_pump_head_age_alert_seconds"); got != e.cfg.Pipeline.HeadAgeAlert.Seconds() {
		t.Errorf("alert threshold %v", got)
	}
	st, err := p.ReportBacklog(t.Context(), e.pg.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unfinished != 1 || gauge("msgx_pipeline_backlog_unfinished") != 1 {
		t.Errorf("unfinished %d / %v, want 1", st.Unfinished, gauge("msgx_pipeline_backlog_unfinished"))
	}
	if got := gauge("msgx_pipeline_backlog_oldest_unprocessed_seconds"); got != 120 {
		t.Errorf("oldest unprocessed %v, want 120", got)
	}
	// Two finished within the window: 2/300 per second, 1 unfinished → 150 s.
	if got := gauge("msgx_pipeline_backlog_rate_per_second"); got != 2.0/300 {
		t.Errorf("rate %v, want %v", got, 2.0/300)
	}
	if got := gauge("msgx_pipeline_backlog_estimated_drain_seconds"); got != 150 {
		t.Errorf("drain %v, want 150", got)
	}
	if got := outcome(t, reg, "FAILED", "CODEC_ERROR"); got != 1 {
		t.Errorf("counted failures %v, want 1", got)
	}
	if got := outcome(t, reg, "SUCCEEDED", ""); got != 2 {
		t.Errorf("successes %v, want 2", got)
	}
	wantState(t, e.get(t, stuck), queue.Failed, queue.CodecError)
}

// gauge returns the value of the gauge series with the given label (it fails if there is none).
func gauge(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// outcome returns the value of the outcome counter for state and class (0 if never counted).
func outcome(t *testing.T, reg *prometheus.Registry, state, class string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "msgx_pump_outcomes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["state"] == state && labels["error_class"] == class {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// switchProjector lets a test point the projection at another Redis while the pump runs.
type switchProjector struct {
	cur atomic.Pointer[projection.Projection]
}

func (s *switchProjector) set(p *projection.Projection) { s.cur.Store(p) }
func (s *switchProjector) Write(ctx context.Context, f []flight.Projected) (int, error) {
	return s.cur.Load().Write(ctx, f)
}
func (s *switchProjector) Probe(ctx context.Context) error { return s.cur.Load().Probe(ctx) }

// down is a projection on a closed port.
func down(t testing.TB) *projection.Projection {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return projection.New(c, "msgxt:down:", time.Second)
}

// refusing is a projection whose writes Redis refuses with an error reply (WRONGTYPE on the
// version hash): a failure of the command, so the message's attempt, while Redis answers.
func (e *env) refusing(t testing.TB) *projection.Projection {
	t.Helper()
	prefix := e.rd.Prefix + "refusing:"
	if err := e.rd.Client.Set(t.Context(), projection.VersionKey(prefix), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	return projection.New(e.rd.Client, prefix, time.Second)
}

type switchReader struct{ cur atomic.Pointer[aodb.Inbox] }

func (s *switchReader) set(i *aodb.Inbox) { s.cur.Store(i) }
func (s *switchReader) Raw(ctx context.Context, id int64) (string, error) {
	return s.cur.Load().Raw(ctx, id)
}
func (s *switchReader) Probe(ctx context.Context) error { return s.cur.Load().Probe(ctx) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
