package pump_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// The operation days of the schedule tests (airport zone).
var (
	day1 = time.Date(2026, 3, 1, 0, 0, 0, 0, zone)
	day2 = time.Date(2026, 3, 2, 0, 0, 0, 0, zone)
)

// snap is a schedule record of the test flight on day at hour:00.
func snap(flid string, day time.Time, hour int) traffic.Flight {
	f := testFlight(flid)
	f.FLNO = "3U" + flid
	f.SODT = day.Add(time.Duration(hour) * time.Hour)
	return f
}

func child(f traffic.Flight, master string) traffic.Flight { f.MAID = master; return f }

func (e *env) dnld(flights ...traffic.Flight) string {
	return traffic.DNLD(e.nextSeq(), e.now(), flights)
}

func (e *env) scheduleRoute(batch int) pump.Router {
	return processor.Route(flight.DayRule{Zone: zone}, processor.WithBatchSize(batch))
}

// row is a flight_schd row as the tests read it.
type row struct {
	state   string
	version int64
	stnd    *string
	remc    *string
	lastMsg int64
}

func (e *env) row(t testing.TB, flid string) (row, bool) {
	t.Helper()
	var r row
	err := e.pg.Pool.QueryRow(t.Context(), `SELECT state, state_version, stnd, remc, last_msg_id FROM flight_schd WHERE flid = $1`,
		flid).Scan(&r.state, &r.version, &r.stnd, &r.remc, &r.lastMsg)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

func (e *env) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pg.Pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eventsOf lists the message's events as "target type flid" with the VIA of a KAFKA:msg,
// sorted, so a test sees every event and every duplicate.
func (e *env) eventsOf(t testing.TB, msgID int64) string {
	t.Helper()
	rows, err := e.pg.Pool.Query(t.Context(), `SELECT target || ' ' || event_type || ' ' || partition_key ||
			coalesce(' via ' || (payload->>'VIA'), '')
		FROM msg_event WHERE msg_id = $1 ORDER BY 1`, msgID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, "\n")
}

// duplicateEvents counts the FLIDs with more than one KAFKA:msg event of the message.
func (e *env) duplicateEvents(t testing.TB, msgID int64) int {
	t.Helper()
	return e.count(t, `SELECT count(*) FROM (SELECT partition_key FROM msg_event WHERE msg_id = $1 AND target = 'KAFKA:msg'
		GROUP BY partition_key HAVING count(*) > 1) d`, msgID)
}

// trail returns the message's schd_snap_log rows, oldest first, as
// "outcome recs applied deleted unchanged batches scope reason".
func (e *env) trail(t testing.TB, msgID int64) []string {
	t.Helper()
	rows, err := e.pg.Pool.Query(t.Context(), `SELECT concat_ws(' ', outcome, recs, coalesce(applied::text, '-'),
			coalesce(deleted::text, '-'), coalesce(unchanged::text, '-'), coalesce(batches::text, '-'),
			coalesce(array_to_string(scope_days, ','), '-'), split_part(coalesce(reason, ''), ':', 1))
		FROM schd_snap_log WHERE msg_id = $1 ORDER BY id`, msgID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func wantTrail(t testing.TB, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("trail:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A DNLD creates its flights; the next DNLD of the same day replaces it: the flight it omits
// is deleted with its tombstones and takes its code-share children with it, also one of another
// day (VIA the master); the fields a record omits are cleared, a FLOP's REMC included; another
// day's flight is left alone. The same package once more changes nothing and publishes nothing.
// Guards R-INV-18.
func TestScheduleDNLDReplacesItsDays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{})

	a := snap("A1", day1, 9)
	a.STND = "101"
	first := e.add(t, e.dnld(a, snap("B1", day1, 10), child(snap("C1", day1, 10), "B1")))
	drain(t, p, s, e)
	wantState(t, e.get(t, first), queue.Succeeded, "")
	if got, want := e.eventsOf(t, first), strings.Join([]string{
		"KAFKA:msg UPSERT A1", "KAFKA:msg UPSERT B1", "KAFKA:msg UPSERT C1",
		"KAFKA:schd UPSERT A1", "KAFKA:schd UPSERT B1", "KAFKA:schd UPSERT C1"}, "\n"); got != want {
		t.Fatalf("first DNLD's events:\n%s\nwant:\n%s", got, want)
	}
	wantTrail(t, e.trail(t, first), "APPLIED 3 3 0 0 1 2026-03-01 ")
	other := e.add(t, e.dnld(snap("E2", day2, 9), child(snap("X2", day2, 10), "B1")))
	e.add(t, e.remark("A1", "GATE CHANGE"))
	drain(t, p, s, e)
	wantState(t, e.get(t, other), queue.Succeeded, "")
	// X2 joined B1 from another day: B1's MAFL moved, its only change outside the days.
	if r, _ := e.row(t, "B1"); r.version != 2 || !strings.Contains(e.projected(t, "B1"), `"X2"`) {
		t.Fatalf("B1 version %d, projection %s; want 2 with X2 in its MAFL", r.version, e.projected(t, "B1"))
	}
	e2, _ := e.row(t, "E2")
	e2doc := e.projected(t, "E2")

	a.STND = "" // not sent: cleared
	id := e.add(t, e.dnld(a))
	drain(t, p, s, e)
	wantState(t, e.get(t, id), queue.Succeeded, "")
	if r, _ := e.row(t, "A1"); r.state != flight.Active || r.version != 3 || r.stnd != nil || r.remc != nil {
		t.Errorf("A1 = %+v, want ACTIVE v3 with STND and REMC cleared", r)
	}
	for _, flid := range []string{"B1", "C1", "X2"} {
		if r, _ := e.row(t, flid); r.state != flight.Deleted || r.lastMsg != id {
			t.Errorf("%s = %+v, want DELETED by message %d", flid, r, id)
		}
		if doc := e.projected(t, flid); doc != "" {
			t.Errorf("%s is still projected: %s", flid, doc)
		}
	}
	if got, want := e.eventsOf(t, id), strings.Join([]string{
		"KAFKA:msg TOMBSTONE B1", "KAFKA:msg TOMBSTONE C1", "KAFKA:msg TOMBSTONE X2 via B1", "KAFKA:msg UPSERT A1",
		"KAFKA:schd TOMBSTONE B1", "KAFKA:schd TOMBSTONE C1", "KAFKA:schd TOMBSTONE X2", "KAFKA:schd UPSERT A1"}, "\n"); got != want {
		t.Errorf("second DNLD's events:\n%s\nwant:\n%s", got, want)
	}
	if r, _ := e.row(t, "E2"); r.state != e2.state || r.version != e2.version || r.lastMsg != e2.lastMsg || e.projected(t, "E2") != e2doc {
		t.Errorf("E2 of the other day changed: %+v, was %+v (projection %q)", r, e2, e.projected(t, "E2"))
	}
	e.wantProjectionCurrent(t, "A1")
	wantTrail(t, e.trail(t, id), "APPLIED 1 1 3 0 1 2026-03-01 ")

	again := e.add(t, e.dnld(a))
	drain(t, p, s, e)
	wantState(t, e.get(t, again), queue.Succeeded, "")
	if n := e.events(t, again); n != 0 {
		t.Errorf("the same snapshot again published %d events", n)
	}
	if r, _ := e.row(t, "A1"); r.version != 3 {
		t.Errorf("A1 version %d after the same snapshot again, want 3", r.version)
	}
	wantTrail(t, e.trail(t, again), "APPLIED 1 0 0 4 1 2026-03-01 ")
}

// A DNLD that carries a code-share child still naming a master it omits contradicts itself:
// the child is deleted with its master in the same batch, with its tombstones VIA the master,
// so no active child ever names a deleted master (R-CODESHARE-4, R-CODESHARE-5). Then an ADFT
// of the child under the deleted master leaves it deleted too, and a schedule that brings the
// master back does not bring the child back by itself.
func TestScheduleDeletesAChildWithTheMasterItOmits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{})

	m, c := snap("M1", day1, 9), child(snap("C1", day1, 10), "M1")
	first := e.add(t, e.dnld(m, c))
	drain(t, p, s, e)
	wantState(t, e.get(t, first), queue.Succeeded, "")
	if !strings.Contains(e.projected(t, "M1"), `"C1"`) {
		t.Fatalf("the master's projection has no MAFL with its child: %s", e.projected(t, "M1"))
	}

	second := e.add(t, e.dnld(c)) // the child, still naming M1, without M1
	drain(t, p, s, e)
	wantState(t, e.get(t, second), queue.Succeeded, "")
	for _, flid := range []string{"M1", "C1"} {
		if r, _ := e.row(t, flid); r.state != flight.Deleted || r.lastMsg != second {
			t.Errorf("%s = %+v, want DELETED by message %d", flid, r, second)
		}
		if doc := e.projected(t, flid); doc != "" {
			t.Errorf("%s is still projected: %s", flid, doc)
		}
	}
	if got, want := e.eventsOf(t, second), strings.Join([]string{
		"KAFKA:msg TOMBSTONE C1 via M1", "KAFKA:msg TOMBSTONE M1", "KAFKA:schd TOMBSTONE C1", "KAFKA:schd TOMBSTONE M1"}, "\n"); got != want {
		t.Errorf("second DNLD's events:\n%s\nwant:\n%s", got, want)
	}
	if n := e.count(t, `SELECT count(*) FROM flight_schd c JOIN flight_schd m ON m.flid = c.maid
		WHERE c.state = 'ACTIVE' AND c.maid <> c.flid AND m.state = 'DELETED'`); n != 0 {
		t.Errorf("%d active children name a deleted master", n)
	}

	// An ADFT of the child under the still deleted master: deleted with it.
	c.ACFT = "359"
	adft := e.add(t, traffic.ADFT(e.nextSeq(), e.now(), c))
	drain(t, p, s, e)
	wantState(t, e.get(t, adft), queue.Succeeded, "")
	if r, _ := e.row(t, "C1"); r.state != flight.Deleted {
		t.Errorf("C1 after an ADFT under its deleted master = %+v, want DELETED", r)
	}
	// The master comes back on its own; the child needs a schedule of its own once its master
	// is active, as after an FDEL's cascade.
	back := e.add(t, traffic.ADFT(e.nextSeq(), e.now(), m))
	drain(t, p, s, e)
	wantState(t, e.get(t, back), queue.Succeeded, "")
	if r, _ := e.row(t, "M1"); r.state != flight.Active {
		t.Errorf("M1 after its ADFT = %+v, want ACTIVE", r)
	}
	if r, _ := e.row(t, "C1"); r.state != flight.Deleted {
		t.Errorf("C1 came back with its master: %+v", r)
	}
	again := e.add(t, traffic.ADFT(e.nextSeq(), e.now(), c))
	drain(t, p, s, e)
	wantState(t, e.get(t, again), queue.Succeeded, "")
	if r, _ := e.row(t, "C1"); r.state != flight.Active || !strings.Contains(e.projected(t, "M1"), `"C1"`) {
		t.Errorf("C1 after its ADFT under the active master = %+v; master's projection %s", r, e.projected(t, "M1"))
	}
}

// Every whole-package refusal makes the message DEAD with nothing written (INV-4) and the
// pump goes on with the next message. A FLTR without FLID is refused by the codec already
// (MALFORMED); the others are the snapshot rules' (PROTOCOL, with the trail of the refusal).
// Guards R-INV-8.
func TestScheduleRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{})
	e.add(t, e.dnld(snap("K1", day1, 9)))
	drain(t, p, s, e)
	two := func() string { return e.dnld(snap("N1", day1, 10), snap("N2", day1, 11)) }
	for _, c := range []struct {
		name  string
		xml   string
		class queue.ErrorClass
		code  string
		scope string
	}{
		{"recs mismatch", strings.Replace(two(), "<RECS>2</RECS>", "<RECS>3</RECS>", 1), queue.Protocol, flight.RefuseRECSMismatch, "-"},
		{"recs bomb", strings.Replace(two(), "<RECS>2</RECS>", "<RECS>999999999</RECS>", 1), queue.Protocol, flight.RefuseRECSMismatch, "-"},
		{"recs missing", strings.Replace(two(), "<RECS>2</RECS>", "", 1), queue.Protocol, flight.RefuseRECSMissing, "-"},
		{"duplicate flid", e.dnld(snap("N1", day1, 10), snap("N1", day1, 11)), queue.Protocol, flight.RefuseDuplicateFLID, "-"},
		{"missing flid", strings.Replace(two(), "<FLID>N2</FLID>", "", 1), queue.Malformed, "", ""},
		// K1 is stored on day 1: the package may not move it, and N1 is not created either.
		{"cross day", e.dnld(snap("N1", day2, 10), snap("K1", day2, 9)), queue.Protocol, flight.RefuseCrossDay, "2026-03-02"},
	} {
		t.Run(c.name, func(t *testing.T) {
			flights := e.count(t, `SELECT count(*) FROM flight_schd`)
			events := e.count(t, `SELECT count(*) FROM msg_event WHERE target = 'KAFKA:msg'`)
			bad := e.add(t, c.xml)
			next := e.add(t, e.remark("K1", "AFTER "+c.name))
			drain(t, p, s, e)
			m := e.get(t, bad)
			wantState(t, m, queue.Dead, c.class)
			if c.code != "" && !strings.HasPrefix(deref(m.LastError), c.code+": ") {
				t.Errorf("reason %q, want the refusal %s", deref(m.LastError), c.code)
			}
			if m.AppliedAt != nil || e.count(t, `SELECT count(*) FROM flight_schd`) != flights || e.events(t, bad) != 0 ||
				e.count(t, `SELECT count(*) FROM msg_event WHERE target = 'KAFKA:msg' AND msg_id IS DISTINCT FROM $1`, next) != events {
				t.Errorf("the refused package wrote something: applied %v, flights %d (was %d), events %d",
					m.AppliedAt, e.count(t, `SELECT count(*) FROM flight_schd`), flights, e.events(t, bad))
			}
			if c.code != "" {
				wantTrail(t, e.trail(t, bad), fmt.Sprintf("REFUSED 2 - - - - %s %s", c.scope, c.code))
			}
			wantState(t, e.get(t, next), queue.Succeeded, "")
		})
	}
	if r, _ := e.row(t, "K1"); r.state != flight.Active || !strings.HasPrefix(*r.remc, "AFTER ") {
		t.Errorf("K1 = %+v, want ACTIVE with the last remark", r)
	}
}

// A RESP needs the request it answers (the guard and the scope); until the request tracking
// exists it is skipped as unsupported and changes nothing.
func TestScheduleRESPIsUnsupported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{})
	id := e.add(t, strings.Replace(e.dnld(snap("R1", day1, 9)), "<STYP>DNLD</STYP>", "<STYP>RESP</STYP>", 1))
	drain(t, p, s, e)
	m := e.get(t, id)
	wantState(t, m, queue.Skipped, queue.Unsupported)
	if !strings.Contains(deref(m.LastError), "G-RESP-GUARD") {
		t.Errorf("reason %q does not name the missing guard", deref(m.LastError))
	}
	if _, ok := e.row(t, "R1"); ok {
		t.Error("a RESP wrote its flight")
	}
}

// crashAt wraps the schedule processor so the step of batch n+1 blocks at the hook inside its
// transaction, before it writes.
type crashAt struct {
	*processor.Schedule
	h *hook
}

func (c crashAt) Apply(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
	res, err := c.Schedule.Apply(ctx, tx, in)
	if err == nil && len(res.Then) > 0 {
		next := res.Then[0]
		res.Then[0] = func(ctx context.Context, tx pgx.Tx) ([]flight.Projected, error) {
			c.h.at()
			return next(ctx, tx)
		}
	}
	return res, err
}

// The process dies between two batches of a package: the first batch is committed with its
// events, the message has no applied_at and is still the head, uncharged. The restarted pump
// runs the whole package again: the first batch's flights are found at their state (no
// version, no event), the rest is written once; the code-share group is never split.
// Guards R-INV-7.
func TestScheduleCrashBetweenBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clkReal()
	h := newHook()
	inner := processor.NewSchedule(flight.DayRule{Zone: zone}, processor.WithBatchSize(2))
	pkg := []traffic.Flight{snap("P1", day1, 8), snap("P2", day1, 9), snap("M1", day1, 10),
		child(snap("M2", day1, 10), "M1"), child(snap("M3", day1, 10), "M1"), snap("P3", day1, 11), snap("P4", day1, 12)}
	id := e.add(t, e.dnld(pkg...))
	a := e.start(t, "a", e.newPump(t, options{route: routeTo{crashAt{inner, h}}.route}), nil)
	h.wait(t)
	e.crash(t, a)
	close(h.release)
	a.stop(t)
	m := e.get(t, id)
	written := e.count(t, `SELECT count(*) FROM flight_schd`)
	if m.State != queue.Pending || m.Attempts != 0 || m.AppliedAt != nil || written != 2 || e.events(t, id) != 2 {
		t.Fatalf("after the crash: %s attempts %d applied %v, %d flights and %d events; want PENDING, uncharged, not applied, the first batch (2) only",
			m.State, m.Attempts, m.AppliedAt, written, e.events(t, id))
	}

	e.start(t, "b", e.newPump(t, options{route: e.scheduleRoute(2)}), nil)
	m = e.waitState(t, id, queue.Succeeded)
	if m.Attempts != 0 || m.AppliedAt == nil {
		t.Errorf("attempts %d applied %v, want 0 and set", m.Attempts, m.AppliedAt)
	}
	for _, f := range pkg {
		if r, _ := e.row(t, f.FLID); r.state != flight.Active || r.version != 1 {
			t.Errorf("%s = %+v, want ACTIVE v1: applied once", f.FLID, r)
		}
		e.wantProjectionCurrent(t, f.FLID)
	}
	if n, d := e.events(t, id), e.duplicateEvents(t, id); n != len(pkg) || d != 0 {
		t.Errorf("%d KAFKA:msg events (%d FLIDs twice), want %d, one per flight", n, d, len(pkg))
	}
	if !strings.Contains(e.projected(t, "M1"), `"M2"`) || !strings.Contains(e.projected(t, "M1"), `"M3"`) {
		t.Errorf("M1's MAFL: %s", e.projected(t, "M1"))
	}
	// The crashed run ended before its trail; the re-run counts the first batch as unchanged.
	// P1,P2 | M1,M2,M3 (a group of 3 is a batch of its own) | P3,P4. The running pump appends
	// the trail just after the outcome is recorded, so it is awaited, not read once.
	testwait.ForState(t, 15*time.Second, "the re-run's trail", func() (bool, string) {
		got := strings.Join(e.trail(t, id), "\n")
		return got == "APPLIED 7 5 0 2 3 2026-03-01 ", got
	})
}

// flaky fails the n-th projection write (Redis unreachable: an outage) and passes the others.
type flaky struct {
	ok, bad pump.Projector
	failAt  int32
	n       atomic.Int32
}

func (f *flaky) Write(ctx context.Context, fs []flight.Projected) (int, error) {
	if f.n.Add(1) == f.failAt {
		return f.bad.Write(ctx, fs)
	}
	return f.ok.Write(ctx, fs)
}
func (f *flaky) Probe(ctx context.Context) error { return f.ok.Probe(ctx) }

// The projection of a batch fails. Before the last batch the message is not applied: its
// re-run plans the whole package again and writes only what is left (nothing, here), without
// a second event. After the last batch committed (applied_at), the re-run only re-projects the
// current state: a later change stays, the deleted flight's key goes, no event is added.
func TestScheduleProjectionFailureBetweenAndAfterBatches(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		failAt  int32
		applied bool
		trail   string
	}{
		// F1..F4 (two batches) were committed before: the re-run writes F5 and deletes F6, in
		// one batch (a batch is bounded by its changed flights).
		{"before the last batch", 2, false, "APPLIED 5 1 1 4 1 2026-03-01 "},
		{"at the last batch", 3, true, "REPROJECTED 5 - - - - 2026-03-01 "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := e.session(t)
			route := e.scheduleRoute(2)
			base := []traffic.Flight{snap("F1", day1, 8), snap("F2", day1, 9), snap("F3", day1, 10),
				snap("F4", day1, 11), snap("F5", day1, 12), snap("F6", day1, 13)}
			e.add(t, e.dnld(base...))
			drain(t, e.newPump(t, options{route: route}), s, e)
			next := make([]traffic.Flight, 5)
			for i, f := range base[:5] {
				f.ACFT = "321"
				next[i] = f
			}
			proj := &flaky{ok: e.proj, bad: down(t), failAt: c.failAt}
			p := e.newPump(t, options{route: route, proj: proj})
			id := e.add(t, e.dnld(next...))
			tick(t, p, s)
			m := e.get(t, id)
			wantBlocked(t, m)
			if (m.AppliedAt != nil) != c.applied {
				t.Fatalf("applied_at %v after projection %d failed, want set: %v", m.AppliedAt, c.failAt, c.applied)
			}
			if c.applied {
				// A later change the re-run must keep: it re-projects, it does not apply again.
				// (Before applied_at nothing can come between: the message is the head.)
				e.pg.Exec(t, `UPDATE flight_schd SET remc = 'OPERATOR' WHERE flid = 'F1'`)
			}
			for range 5 {
				if e.get(t, id).State == queue.Succeeded {
					break
				}
				e.clk.Advance(time.Minute)
				tick(t, p, s)
			}
			wantState(t, e.get(t, id), queue.Succeeded, "")
			if n, d := e.events(t, id), e.duplicateEvents(t, id); n != 6 || d != 0 {
				t.Errorf("%d KAFKA:msg events (%d FLIDs twice), want 6: five changes and one deletion", n, d)
			}
			for _, f := range next {
				if r, _ := e.row(t, f.FLID); r.version != 2 {
					t.Errorf("%s version %d, want 2", f.FLID, r.version)
				}
			}
			if r, _ := e.row(t, "F6"); r.state != flight.Deleted || e.projected(t, "F6") != "" {
				t.Errorf("F6 = %+v, projection %q; want DELETED and no key", r, e.projected(t, "F6"))
			}
			if doc := e.projected(t, "F1"); strings.Contains(doc, "OPERATOR") != c.applied || !strings.Contains(doc, `"321"`) {
				t.Errorf("F1 projection is not the current state: %s", doc)
			}
			got := e.trail(t, id)
			wantTrail(t, got, c.trail)
		})
	}
}

// failOnce wraps the schedule processor so the second batch fails once with an error of its
// own (not a driver's: the message's attempt).
type failOnce struct {
	*processor.Schedule
	failed atomic.Bool
}

func (f *failOnce) Apply(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
	res, err := f.Schedule.Apply(ctx, tx, in)
	if err == nil && len(res.Then) > 0 {
		next := res.Then[0]
		res.Then[0] = func(ctx context.Context, tx pgx.Tx) ([]flight.Projected, error) {
			if f.failed.CompareAndSwap(false, true) {
				return nil, errors.New("injected failure of the batch")
			}
			return next(ctx, tx)
		}
	}
	return res, err
}

// A batch that fails on its own is the message's attempt, as a failed ① is: FAILED(INFRA) with
// the step named, the first batch kept, and the retry finishes the package once.
func TestScheduleFailedBatchIsAnAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	proc := &failOnce{Schedule: processor.NewSchedule(flight.DayRule{Zone: zone}, processor.WithBatchSize(1))}
	p := e.newPump(t, options{route: routeTo{proc}.route})
	id := e.add(t, e.dnld(snap("G1", day1, 8), snap("G2", day1, 9), snap("G3", day1, 10)))
	tick(t, p, s)
	m := e.get(t, id)
	wantState(t, m, queue.Failed, queue.Infra)
	if m.Attempts != 1 || !strings.HasPrefix(deref(m.LastError), "step 2 of 3: ") || m.AppliedAt != nil {
		t.Fatalf("attempts %d, reason %q, applied %v; want 1, the step named, not applied", m.Attempts, deref(m.LastError), m.AppliedAt)
	}
	if n := e.count(t, `SELECT count(*) FROM flight_schd`); n != 1 || !e.pipelineLockFree(t) {
		t.Fatalf("%d flights after the failed batch, want the first batch's 1; pipeline lock free: %v", n, e.pipelineLockFree(t))
	}
	e.clk.Advance(time.Minute)
	tick(t, p, s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
	if n, d := e.events(t, id), e.duplicateEvents(t, id); n != 3 || d != 0 {
		t.Errorf("%d KAFKA:msg events (%d FLIDs twice), want 3", n, d)
	}
	for _, flid := range []string{"G1", "G2", "G3"} {
		if r, _ := e.row(t, flid); r.version != 1 {
			t.Errorf("%s version %d, want 1", flid, r.version)
		}
		e.wantProjectionCurrent(t, flid)
	}
}
