package pump_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// start is the test clock's origin: a fixed instant, so backoff times are exact.
var start = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

var zone = func() *time.Location {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		return time.FixedZone("CST", 8*3600)
	}
	return loc
}()

// env is one test's real PostgreSQL, MariaDB and Redis, with the pump's collaborators built on
// them exactly as msgx-pump builds them.
type env struct {
	pg    *pgtest.DB
	my    *mysqltest.DB
	rd    *redistest.Redis
	inbox *aodb.Inbox
	proj  *projection.Projection
	clk   *testclock.Clock
	cfg   config.Config
	seq   int64
	// real makes the pump and the test data use the real clock (tests that run the pump on its
	// own under an elector).
	real bool
}

// clkReal switches the env to the real clock.
func (e *env) clkReal() { e.real = true }

func (e *env) now() time.Time {
	if e.real {
		return time.Now()
	}
	return e.clk.Now()
}

func (e *env) clock() clock.Clock {
	if e.real {
		return clock.Real{}
	}
	return e.clk
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{pg: pgtest.New(t), my: mysqltest.New(t), rd: redistest.New(t), clk: testclock.New(start), cfg: config.Default()}
	var err error
	e.inbox, err = aodb.Open(e.my.ServiceDSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.inbox.Close() })
	e.proj = projection.New(e.rd.Client, e.rd.Prefix, 3*time.Second)
	return e
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// options change what newPump builds.
type options struct {
	raw   pump.RawReader
	proj  pump.Projector
	route pump.Router
	reg   prometheus.Registerer
	quiet bool
}

func (e *env) newPump(t testing.TB, o options) *pump.Pump {
	t.Helper()
	tel, err := telemetry.New(context.Background(), "pump-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	if o.raw == nil {
		o.raw = pump.NewReadAhead(e.inbox, slog.New(slog.DiscardHandler)) // as msgx-pump wires it
	}
	if o.proj == nil {
		o.proj = e.proj
	}
	if o.route == nil {
		o.route = processor.Route(flight.DayRule{Zone: zone})
	}
	if o.reg == nil {
		o.reg = prometheus.NewRegistry()
	}
	logger := testLogger(t)
	if o.quiet {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := pump.FromConfig(e.cfg)
	cfg.Codec.Zone = zone
	return pump.New(cfg, o.raw, o.proj, o.route, e.clock(), logger, tel, o.reg)
}

// session is the term the tests run the pump on, without an election (pgtest.Session).
func (e *env) session(t testing.TB) *pgtest.Session {
	t.Helper()
	return e.pg.Session(t)
}

// tracedSession is session with a tracer on its connection (nil for none).
func (e *env) tracedSession(t testing.TB, tracer pgx.QueryTracer) *pgtest.Session {
	t.Helper()
	return e.pg.TracedSession(t, tracer)
}

// add writes a message into the inbox as upstream would, enqueues it as ingest would, and
// moves the watermark over it. It returns the msg_id.
func (e *env) add(t testing.TB, xml string) int64 {
	t.Helper()
	received := e.now()
	id := e.my.InsertInbox(t, xml, &received)
	e.enqueue(t, id)
	return id
}

// enqueue registers msg_id as discovered (proc_state row, W at least id).
func (e *env) enqueue(t testing.TB, ids ...int64) {
	t.Helper()
	rows := make([]queue.NewMessage, len(ids))
	var top int64
	for i, id := range ids {
		rows[i] = queue.NewMessage{MsgID: id}
		top = max(top, id)
	}
	if _, err := queue.Enqueue(t.Context(), e.pg.Pool, rows, e.now()); err != nil {
		t.Fatal(err)
	}
	e.pg.Exec(t, `UPDATE inbox_cursor SET w = greatest(w, $1)`, top)
}

func (e *env) nextSeq() int64 { e.seq++; return e.seq }

// testFlight is the flight every test message is about.
func testFlight(flid string) traffic.Flight {
	return traffic.Flight{FLID: flid, ALCD: "3U", FLNO: "3U8881", MVIN: "D",
		SODT: time.Date(2026, 3, 1, 10, 30, 0, 0, zone), FLTY: "W/Z", FLIN: "D", ACFT: "320",
		Route: []string{"CTU", "PEK"}}
}

// adft is a schedule message creating (or updating) the flight.
func (e *env) adft(flid string) string {
	return traffic.ADFT(e.nextSeq(), e.now(), testFlight(flid))
}

// remark is a FLOP REMC changing the flight's remark.
func (e *env) remark(flid, text string) string {
	f := testFlight(flid)
	return traffic.FLOP(e.nextSeq(), e.now(), flid, f.FFID(), "REMC", "    <REMC>"+text+"</REMC>\n")
}

// unsupported is a legal FLOP this system does not handle.
func (e *env) unsupported(flid string) string {
	f := testFlight(flid)
	return traffic.FLOP(e.nextSeq(), e.now(), flid, f.FFID(), "EOBT",
		"    <EOBT>"+traffic.FormatTime(f.SODT)+"</EOBT>\n")
}

// codecError is well formed but carries an element this codec does not know (CODEC_ERROR).
func (e *env) codecError(flid string) string {
	return strings.Replace(e.remark(flid, "x"), "</MSG>", "<XTRA>1</XTRA></MSG>", 1)
}

const malformed = "<MSG><META><SNDR>AODB</SNDR>" // cut off: not well-formed

func (e *env) get(t testing.TB, id int64) queue.Message {
	t.Helper()
	m, err := queue.Get(context.Background(), e.pg.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tick runs one Tick and fails the test on error.
func tick(t testing.TB, p *pump.Pump, s pump.Session) time.Duration {
	t.Helper()
	wait, err := p.Tick(t.Context(), s)
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	return wait
}

// drain ticks until the queue has no executable head; it fails if a head waits for a retry.
func drain(t testing.TB, p *pump.Pump, s pump.Session, e *env) {
	t.Helper()
	for range 10000 {
		var n int
		if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED')
			AND msg_id <= (SELECT w FROM inbox_cursor)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if wait := tick(t, p, s); wait > 0 {
			t.Fatalf("drain: the head waits %s for a retry", wait)
		}
	}
	t.Fatal("drain: the queue did not drain")
}

func wantState(t testing.TB, m queue.Message, state queue.State, class queue.ErrorClass) {
	t.Helper()
	var got queue.ErrorClass
	if m.ErrorClass != nil {
		got = *m.ErrorClass
	}
	if m.State != state || got != class {
		t.Fatalf("message %d is %s(%s), want %s(%s); last error %q", m.MsgID, m.State, got, state, class, deref(m.LastError))
	}
}

// wantBlocked checks that a message waits out an outage: still unfinished, nothing charged.
func wantBlocked(t testing.TB, m queue.Message) {
	t.Helper()
	if m.State != queue.Pending || m.Attempts != 0 || m.ErrorClass != nil {
		t.Fatalf("message %d is %s(%v) with %d attempts, want PENDING and uncharged while blocked; last error %q",
			m.MsgID, m.State, deref((*string)(m.ErrorClass)), m.Attempts, deref(m.LastError))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// flightVersion returns the flight's version (0 if absent).
func (e *env) flightVersion(t testing.TB, flid string) int64 {
	t.Helper()
	var v int64
	err := e.pg.Pool.QueryRow(t.Context(), `SELECT state_version FROM flight_schd WHERE flid = $1`, flid).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// events counts the message's KAFKA:msg events (KAFKA:schd keeps one row per flight, which
// the next message's event replaces).
func (e *env) events(t testing.TB, msgID int64) int {
	t.Helper()
	var n int
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM msg_event WHERE msg_id = $1 AND target = 'KAFKA:msg'`, msgID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// projected returns the Redis document of the flight ("" if none).
func (e *env) projected(t testing.TB, flid string) string {
	t.Helper()
	v, err := e.rd.Client.Get(t.Context(), projection.FlightKey(e.rd.Prefix, flid)).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// wantProjectionCurrent checks that Redis holds the flight's current PostgreSQL version.
func (e *env) wantProjectionCurrent(t testing.TB, flid string) {
	t.Helper()
	var doc struct {
		Version int64 `json:"STATE_VERSION"`
	}
	raw := e.projected(t, flid)
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("projection of %s: %v (%q)", flid, err, raw)
	}
	if v := e.flightVersion(t, flid); doc.Version != v {
		t.Errorf("projection of %s is version %d, PostgreSQL has %d", flid, doc.Version, v)
	}
}

// pipelineLockFree reports whether another session can take the pipeline lock at once.
func (e *env) pipelineLockFree(t testing.TB) bool {
	t.Helper()
	var free bool
	err := e.pg.Pool.QueryRow(t.Context(), `SELECT NOT EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`,
		uint32(0x6d736778), uint32(1)).Scan(&free)
	if err != nil {
		t.Fatal(err)
	}
	return free
}
