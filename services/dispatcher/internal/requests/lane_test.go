package requests

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/pkg/retry"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

var t0 = time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)

// switchable is the shared MySQL the lane sees, pointed at a working server or at one that
// refuses connections: an outage a running server cannot be made to produce on demand.
type switchable struct {
	up, down Outbound
	isDown   atomic.Bool
}

func (s *switchable) cur() Outbound {
	if s.isDown.Load() {
		return s.down
	}
	return s.up
}
func (s *switchable) InsertOutbound(ctx context.Context, routingID, text string, now time.Time) (int64, error) {
	return s.cur().InsertOutbound(ctx, routingID, text, now)
}
func (s *switchable) FindOutbound(ctx context.Context, routingID, text string, since time.Time) (int64, bool, error) {
	return s.cur().FindOutbound(ctx, routingID, text, since)
}
func (s *switchable) Probe(ctx context.Context) error { return s.cur().Probe(ctx) }

type fixture struct {
	pg    *pgtest.DB
	my    *mysqltest.DB
	out   *switchable
	clock *testclock.Clock
	s     Session
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{pg: pgtest.New(t), my: mysqltest.New(t), clock: testclock.New(t0)}
	up, err := aodb.Open(f.my.ServiceDSN, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	down, err := aodb.Open("root@tcp(127.0.0.1:1)/none?parseTime=true", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close(); _ = down.Close() })
	f.out = &switchable{up: up, down: down}
	f.s = f.pg.Session(t)
	return f
}

func (f *fixture) lane(t *testing.T, shadow bool) (*Lane, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.NewJSONHandler(t.Output(), nil))
	return New(Config{Period: 50 * time.Millisecond, Timeout: 30 * time.Minute, Shadow: shadow,
		Retry: retry.Policy{Backoff: []time.Duration{time.Second}, Cap: time.Second}}, f.out, f.clock, logger, reg), reg
}

func (f *fixture) register(t *testing.T, spec request.Spec) request.Request {
	t.Helper()
	var r request.Registered
	err := pgx.BeginFunc(t.Context(), f.pg.Pool, func(tx pgx.Tx) error {
		var err error
		r, err = request.Register(t.Context(), tx, spec, request.Outbound{
			Encoder: sis.Encoder{Sender: "OMMS", Zone: sis.DefaultZone()}, RoutingID: "AODB"}, f.clock.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r.Request
}

// get reads request id as control lists it (request.List, one row from id on).
func (f *fixture) get(t *testing.T, id int64) request.Request {
	t.Helper()
	rs, err := request.List(t.Context(), f.pg.Pool, request.Filter{After: id - 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].ID != id {
		t.Fatalf("request %d not found (listed %+v)", id, rs)
	}
	return rs[0]
}

// rows returns the COUTMSGS rows as id → text.
func (f *fixture) rows(t *testing.T) map[int64]string {
	t.Helper()
	rs, err := f.my.Admin.QueryContext(t.Context(), `SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG FROM coutmsgs WHERE ROUTINGID = 'AODB'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := map[int64]string{}
	for rs.Next() {
		var id int64
		var text string
		if err := rs.Scan(&id, &text); err != nil {
			t.Fatal(err)
		}
		out[id] = text
	}
	return out
}

func TestRoundWritesPendingRequestsInOrderAndExpires(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.register(t, request.ScheduleSpec(t0.AddDate(0, 0, 1), t0.AddDate(0, 0, 1)))
	b := f.register(t, request.ReferenceSpec("RSTA", "GATE"))
	l, _ := f.lane(t, false)
	sent, err := l.Round(t.Context(), f.s)
	if err != nil || sent != 2 {
		t.Fatalf("Round = %d, %v; want 2 sent", sent, err)
	}
	rows := f.rows(t)
	ga, gb := f.get(t, a.ID), f.get(t, b.ID)
	if ga.State != request.StateSent || gb.State != request.StateSent || *ga.CoutmsgsID >= *gb.CoutmsgsID ||
		rows[*ga.CoutmsgsID] != a.Payload || rows[*gb.CoutmsgsID] != b.Payload || len(rows) != 2 || !ga.SentAt.Equal(t0) {
		t.Errorf("after the round: a %+v, b %+v, rows %v", ga, gb, rows)
	}
	// Nothing is written again; past req.timeout both expire.
	if sent, err := l.Round(t.Context(), f.s); err != nil || sent != 0 || len(f.rows(t)) != 2 {
		t.Errorf("second round = %d, %v, rows %d", sent, err, len(f.rows(t)))
	}
	f.clock.Advance(30 * time.Minute)
	if _, err := l.Round(t.Context(), f.s); err != nil {
		t.Fatal(err)
	}
	if ga, gb := f.get(t, a.ID), f.get(t, b.ID); ga.State != request.StateExpired || gb.State != request.StateExpired {
		t.Errorf("past the timeout: %s, %s; want EXPIRED", ga.State, gb.State)
	}
	if n := testutil.ToFloat64(l.metrics.expired); n != 2 {
		t.Errorf("expired counter = %v", n)
	}
	if n := testutil.ToFloat64(l.metrics.sent); n != 2 {
		t.Errorf("sent counter = %v", n)
	}
}

// TestCrashBetweenInsertAndSentDoesNotWriteTwice guards R-INV-22.
func TestCrashBetweenInsertAndSentDoesNotWriteTwice(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.register(t, request.ReferenceSpec("GLST", ""))
	crashed := errors.New("the dispatcher died here")
	first, _ := f.lane(t, false)
	var inserted int64
	first.afterInsert = func(_ context.Context, _ request.Request, id int64) error { inserted = id; return crashed }
	if _, err := first.Round(t.Context(), f.s); !errors.Is(err, crashed) {
		t.Fatalf("first round = %v, want the crash", err)
	}
	if got := f.get(t, r.ID); got.State != request.StatePending || got.AttemptedAt == nil {
		t.Fatalf("after the crash: %+v, want PENDING with attempted_at", got)
	}
	if rows := f.rows(t); len(rows) != 1 || rows[inserted] != r.Payload {
		t.Fatalf("after the crash COUTMSGS holds %v", rows)
	}

	// The next term (a new lane, later) finds the row and marks it SENT with its ID.
	f.clock.Advance(time.Minute)
	restarted, _ := f.lane(t, false)
	if sent, err := restarted.Round(t.Context(), f.s); err != nil || sent != 1 {
		t.Fatalf("restarted round = %d, %v", sent, err)
	}
	got := f.get(t, r.ID)
	if got.State != request.StateSent || *got.CoutmsgsID != inserted {
		t.Errorf("after the restart: %s coutmsgs %v, want SENT with %d", got.State, got.CoutmsgsID, inserted)
	}
	if rows := f.rows(t); len(rows) != 1 {
		t.Errorf("COUTMSGS holds %d rows after the restart, want the one", len(rows))
	}
	if n := testutil.ToFloat64(restarted.metrics.recovered); n != 1 {
		t.Errorf("recovered counter = %v", n)
	}
}

func TestOutageIsNotChargedAndTheLaneWaits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.register(t, request.ReferenceSpec("AIRL", ""))
	b := f.register(t, request.ReferenceSpec("ARPT", ""))
	l, _ := f.lane(t, false)
	f.out.isDown.Store(true)
	if _, err := l.Round(t.Context(), f.s); !errors.Is(err, errOutage) {
		t.Fatalf("round in the outage = %v, want errOutage", err)
	}
	if l.blocked.Current() == nil {
		t.Fatal("lane not blocked in the outage")
	}
	// Still blocked: the next round probes, writes nothing, and leaves both requests in order.
	if _, err := l.Round(t.Context(), f.s); !errors.Is(err, errOutage) {
		t.Fatalf("second round in the outage = %v", err)
	}
	for _, id := range []int64{a.ID, b.ID} {
		if got := f.get(t, id); got.State != request.StatePending {
			t.Errorf("request %d = %s in the outage, want PENDING", id, got.State)
		}
	}
	if got := f.get(t, b.ID); got.AttemptedAt != nil {
		t.Error("the request after the failed one was tried in the outage")
	}
	if n := testutil.ToFloat64(l.metrics.failures); n != 0 {
		t.Errorf("outage counted as %v failures", n)
	}

	f.out.isDown.Store(false)
	if sent, err := l.Round(t.Context(), f.s); err != nil || sent != 2 {
		t.Fatalf("round after the outage = %d, %v", sent, err)
	}
	if l.blocked.Current() != nil {
		t.Error("still blocked after the inbox answered")
	}
	if rows := f.rows(t); len(rows) != 2 {
		t.Errorf("COUTMSGS holds %d rows, want 2", len(rows))
	}
}

func TestRefusedInsertBacksOffWithoutLosingTheRequest(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// ROUTINGID is VARCHAR(23): a longer one is refused by the server (strict mode), for the
	// statement itself, every time.
	var r request.Registered
	err := pgx.BeginFunc(t.Context(), f.pg.Pool, func(tx pgx.Tx) error {
		var err error
		r, err = request.Register(t.Context(), tx, request.ReferenceSpec("COUL", ""), request.Outbound{
			Encoder: sis.Encoder{Sender: "OMMS"}, RoutingID: strings.Repeat("R", 30)}, t0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := f.lane(t, false)
	_, err = l.Round(t.Context(), f.s)
	if err == nil || errors.Is(err, errOutage) || !aodb.Rejected(err) {
		t.Fatalf("round = %v, want the server's refusal", err)
	}
	if got := f.get(t, r.Request.ID); got.State != request.StatePending {
		t.Errorf("refused request = %s, want PENDING", got.State)
	}
	if n := testutil.ToFloat64(l.metrics.failures); n != 1 {
		t.Errorf("failures counter = %v, want 1", n)
	}
}

func TestShadowModeNeverWritesCOUTMSGS(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.register(t, request.ReferenceSpec("GLST", ""))
	l, _ := f.lane(t, true)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := l.Run(ctx, f.s); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v", err)
	}
	if rows := f.rows(t); len(rows) != 0 {
		t.Errorf("shadow mode wrote %d COUTMSGS rows", len(rows))
	}
	if got := f.get(t, r.ID); got.State != request.StatePending || got.AttemptedAt != nil {
		t.Errorf("shadow mode touched the request: %+v", got)
	}
}

func TestRequestExpiredWhileBeingWrittenStaysExpired(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.register(t, request.ReferenceSpec("TLST", ""))
	l, _ := f.lane(t, false)
	var newer request.Request
	l.afterInsert = func(context.Context, request.Request, int64) error {
		newer = f.register(t, request.ReferenceSpec("TLST", ""))
		return nil
	}
	if sent, err := l.Round(t.Context(), f.s); err != nil || sent != 0 {
		t.Fatalf("round = %d, %v; want nothing marked", sent, err)
	}
	if got := f.get(t, r.ID); got.State != request.StateExpired || got.CoutmsgsID != nil {
		t.Errorf("superseded request = %+v, want EXPIRED without a COUTMSGS id", got)
	}
	// The newer one goes out in the next round, as its own row.
	l.afterInsert = nil
	if sent, err := l.Round(t.Context(), f.s); err != nil || sent != 1 {
		t.Fatalf("next round = %d, %v", sent, err)
	}
	if got := f.get(t, newer.ID); got.State != request.StateSent || len(f.rows(t)) != 2 {
		t.Errorf("newer request = %s, rows %d", got.State, len(f.rows(t)))
	}
}

// TestDeposedDispatcherCannotMarkAndTheNextTermRecovers runs the lane under a real elector:
// the term's lock connection is terminated between the COUTMSGS insert and SENT (a crash or a
// cut network), so the deposed term cannot mark the request; the next term finds the row and
// marks it with that ID, without a second insert.
// Guards R-INV-15.
func TestDeposedDispatcherCannotMarkAndTheNextTermRecovers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.register(t, request.ReferenceSpec("SLST", ""))
	logger := slog.New(slog.NewJSONHandler(t.Output(), nil))
	run := func(name string, l *Lane) (pid chan uint32, done chan error, cancel context.CancelFunc) {
		el := leader.New(leader.Config{DSN: f.pg.DSN, Role: "dispatcher", Instance: name, Logger: logger,
			RetryInterval: 50 * time.Millisecond, CheckInterval: time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		pid, done = make(chan uint32, 1), make(chan error, 1)
		go func() {
			done <- el.Run(ctx, func(ctx context.Context, s *leader.Session) error {
				pid <- s.PID()
				return l.Run(ctx, s)
			})
		}()
		return pid, done, cancel
	}

	first, _ := f.lane(t, false)
	inserted := make(chan int64, 1)
	release := make(chan struct{})
	first.afterInsert = func(ctx context.Context, _ request.Request, id int64) error {
		inserted <- id
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	pid, done, cancel := run("dispatcher-a", first)
	defer cancel()
	backend := <-pid
	var coutID int64
	select {
	case coutID = <-inserted:
	case <-time.After(30 * time.Second):
		t.Fatal("the first term never inserted")
	}
	if _, err := f.pg.Pool.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, backend); err != nil {
		t.Fatal(err)
	}
	close(release)
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the deposed term did not stop")
	}
	if got := f.get(t, r.ID); got.State != request.StatePending {
		t.Fatalf("the deposed term marked the request %s", got.State)
	}

	second, _ := f.lane(t, false)
	_, done2, cancel2 := run("dispatcher-b", second)
	defer func() {
		cancel2()
		<-done2
	}()
	testwait.For(t, 30*time.Second, "the next term to mark the request SENT", func() bool {
		return f.get(t, r.ID).State == request.StateSent
	})
	if got := f.get(t, r.ID); *got.CoutmsgsID != coutID {
		t.Errorf("SENT with coutmsgs %d, want the first term's row %d", *got.CoutmsgsID, coutID)
	}
	if rows := f.rows(t); len(rows) != 1 {
		t.Errorf("COUTMSGS holds %d rows, want 1", len(rows))
	}
}

// TestRunBacksOffAfterARefusal: a write the server refuses is retried at the backoff, not on
// every poll.
func TestRunBacksOffAfterARefusal(t *testing.T) {
	t.Parallel()
	f := setup(t)
	err := pgx.BeginFunc(t.Context(), f.pg.Pool, func(tx pgx.Tx) error {
		_, err := request.Register(t.Context(), tx, request.ReferenceSpec("FLTL", ""), request.Outbound{
			Encoder: sis.Encoder{Sender: "OMMS"}, RoutingID: strings.Repeat("R", 30)}, t0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := f.lane(t, false) // polls every 50ms, backs off 1s
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	_ = l.Run(ctx, f.s)
	if n := testutil.ToFloat64(l.metrics.failures); n != 1 {
		t.Errorf("%v refused writes in 700ms, want 1 (the next one waits 1s)", n)
	}
}
