package pump_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// countingFlights is the real flight processor, counting how often each step runs.
type countingFlights struct {
	*processor.Flights
	applies, reprojects atomic.Int32
}

func (c *countingFlights) Apply(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
	c.applies.Add(1)
	return c.Flights.Apply(ctx, tx, in)
}

func (c *countingFlights) Reproject(ctx context.Context, tx pgx.Tx, in pump.Input) ([]flight.Flight, error) {
	c.reprojects.Add(1)
	return c.Flights.Reproject(ctx, tx, in)
}

func counting() (*countingFlights, pump.Router) {
	c := &countingFlights{Flights: processor.NewFlights(flight.DayRule{Zone: zone})}
	return c, func(*sis.Message) (pump.Processor, string) { return c, "" }
}

// The runbook's action after a projection that kept failing: M1's ① committed but Redis refused
// its projection until it went DEAD(EXHAUSTED) (an outage never gets there); M2 changed the same field afterwards; the operator replays M1. The
// replay must not apply M1 over M2 (rewinding the field, bumping the version, publishing M1's
// events twice): it re-projects the current state and finishes.
// Guards R-INV-7.
func TestReplayOfAppliedMessageOnlyReprojects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	sw := &switchProjector{}
	sw.set(e.proj)
	p := e.newPump(t, options{proj: sw})
	e.add(t, e.adft("7001"))
	tick(t, p, s)
	sw.set(e.refusing(t))
	old := e.add(t, e.remark("7001", "OLD"))
	for range 20 {
		e.clk.Advance(2 * time.Minute)
		tick(t, p, s)
		if e.get(t, old).State == queue.Dead {
			break
		}
	}
	m := e.get(t, old)
	wantState(t, m, queue.Dead, queue.Exhausted)
	if m.AppliedAt == nil {
		t.Fatal("applied_at not recorded with step ①")
	}
	sw.set(e.proj)
	newer := e.add(t, e.remark("7001", "NEWER"))
	tick(t, p, s)
	wantState(t, e.get(t, newer), queue.Succeeded, "")
	v := e.flightVersion(t, "7001")

	res, err := queue.Replay(t.Context(), e.pg.Pool, queue.ReplayRequest{Class: queue.Exhausted, FromID: old, ToID: old}, e.now())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Replayed) != 1 || !res.Replayed[0].Applied {
		t.Fatalf("replay result %+v: want the message flagged as applied", res.Replayed)
	}
	if e.get(t, old).AppliedAt == nil {
		t.Fatal("replay cleared applied_at")
	}
	tick(t, p, s)
	wantState(t, e.get(t, old), queue.Succeeded, "")
	var remc string
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(remc, '') FROM flight_schd WHERE flid = '7001'`).Scan(&remc); err != nil {
		t.Fatal(err)
	}
	if remc != "NEWER" || e.flightVersion(t, "7001") != v {
		t.Errorf("after the replay: REMC %q version %d, want NEWER and %d (the replay applied the old change again)",
			remc, e.flightVersion(t, "7001"), v)
	}
	if n := e.events(t, old); n != 1 {
		t.Errorf("the replayed message has %d KAFKA:msg events, want its original 1", n)
	}
	if doc := e.projected(t, "7001"); !strings.Contains(doc, "NEWER") || strings.Contains(doc, "OLD") {
		t.Errorf("projection %s", doc)
	}
	e.wantProjectionCurrent(t, "7001")
}

// A message whose ① committed is never applied again, whatever the rules would decide on the
// second look: its re-run only re-projects (the crash-or-Redis-failure path of R-PUMP-9
// does not depend on the rules finding "no change").
// Guards R-INV-7.
func TestRerunOfAppliedMessageDoesNotApply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	sw := &switchProjector{}
	sw.set(e.proj)
	c, route := counting()
	p := e.newPump(t, options{proj: sw, route: route})
	e.add(t, e.adft("7004"))
	tick(t, p, s)
	sw.set(down(t))
	id := e.add(t, e.remark("7004", "ONCE"))
	tick(t, p, s)
	wantBlocked(t, e.get(t, id))
	if c.applies.Load() != 2 || c.reprojects.Load() != 0 {
		t.Fatalf("applies %d reprojects %d after the first attempt", c.applies.Load(), c.reprojects.Load())
	}
	// A later change the re-run must not undo even if the rules were asked again.
	e.pg.Exec(t, `UPDATE flight_schd SET remc = 'OPERATOR' WHERE flid = '7004'`)
	sw.set(e.proj)
	e.clk.Advance(time.Minute)
	tick(t, p, s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
	if c.applies.Load() != 2 || c.reprojects.Load() != 1 {
		t.Errorf("the re-run applied again: applies %d reprojects %d", c.applies.Load(), c.reprojects.Load())
	}
	if e.flightVersion(t, "7004") != 2 || e.events(t, id) != 1 {
		t.Errorf("version %d, events %d; want 2 and 1", e.flightVersion(t, "7004"), e.events(t, id))
	}
	if doc := e.projected(t, "7004"); !strings.Contains(doc, "OPERATOR") {
		t.Errorf("the re-run did not project the current state: %s", doc)
	}
}

// A code-share child moving from one master to another changes both masters' MAFL; a re-run
// after the projection failed re-projects all three, the former master included.
func TestRerunReprojectsEveryFlightTheMessageChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	sw := &switchProjector{}
	sw.set(e.proj)
	p := e.newPump(t, options{proj: sw})
	schd := func(fltr string) string {
		return fmt.Sprintf(`<MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20260301080000</DTTM><TYPE>SCHD</TYPE>`+
			`<STYP>ADFT</STYP></META><SCHD><RECS>1</RECS><FLTR>%s</FLTR></SCHD></MSG>`, e.nextSeq(), fltr)
	}
	e.add(t, e.adft("MA"))
	e.add(t, e.adft("MB"))
	e.add(t, schd(`<FLID>CH</FLID><FLNO>ZH100</FLNO><MAID>MA</MAID>`))
	drain(t, p, s, e)
	if !strings.Contains(e.projected(t, "MA"), `"CH"`) {
		t.Fatalf("MA's projection has no MAFL entry for CH: %s", e.projected(t, "MA"))
	}
	sw.set(down(t))
	id := e.add(t, schd(`<FLID>CH</FLID><MAID>MB</MAID>`))
	tick(t, p, s)
	wantBlocked(t, e.get(t, id))
	sw.set(e.proj)
	e.clk.Advance(time.Minute)
	tick(t, p, s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
	for _, flid := range []string{"MA", "MB", "CH"} {
		e.wantProjectionCurrent(t, flid)
	}
	if strings.Contains(e.projected(t, "MA"), `"CH"`) || !strings.Contains(e.projected(t, "MB"), `"CH"`) {
		t.Errorf("MAFL projections: MA %s, MB %s", e.projected(t, "MA"), e.projected(t, "MB"))
	}
}

// sweep moves the flight to history as the maintenance sweep does (under the pipeline lock,
// with its tombstones), and returns what moved.
func (e *env) sweep(t *testing.T, flid string) []flight.Flight {
	t.Helper()
	pol := flightstore.HistoryPolicy{Retention: 24 * time.Hour, QuietPeriod: 24 * time.Hour, Zone: zone}
	tx, err := e.pg.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := leader.LockPipelineTx(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	g, err := flightstore.Archive(t.Context(), tx, pol, flid, e.now())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range g {
		if f.State != flight.Deleted {
			ev := []outbox.NewEvent{{Target: outbox.TargetSchd, PartitionKey: f.FLID, Type: flight.Tombstone, Version: f.Version + 1}}
			if err := outbox.Add(t.Context(), tx, ev, e.now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return g
}

// The history sweep must not archive a flight between ① and ③ of the message that changed
// it (the pipeline lock is released when the step stops there); once the message is terminal
// the flight may go. A FLID that comes back after that starts above the sweep's tombstone, and
// can be archived a second time.
// Guards R-INV-17.
func TestSweepWaitsForUnfinishedMessageAndFLIDComesBackAboveTombstone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	sw := &switchProjector{}
	sw.set(e.proj)
	p := e.newPump(t, options{proj: sw})
	e.add(t, e.adft("7002"))
	f := testFlight("7002")
	e.add(t, traffic.FLOP(e.nextSeq(), e.now(), "7002", f.FFID(), "CNCL", "    <CNCL>"+traffic.FormatTime(f.SODT)+"</CNCL>\n"))
	drain(t, p, s, e)
	e.clk.Advance(5 * 24 * time.Hour)
	sw.set(down(t))
	f.ACFT = "333"
	id := e.add(t, traffic.ADFT(e.nextSeq(), e.now(), f))
	tick(t, p, s)
	wantBlocked(t, e.get(t, id))
	v := e.flightVersion(t, "7002")
	if g := e.sweep(t, "7002"); len(g) != 0 {
		t.Fatalf("the sweep archived flight 7002 between ① and ③ of message %d", id)
	}
	sw.set(e.proj)
	e.clk.Advance(time.Minute)
	tick(t, p, s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
	if e.flightVersion(t, "7002") != v || e.events(t, id) != 1 {
		t.Fatalf("re-run: version %d events %d, want %d and 1", e.flightVersion(t, "7002"), e.events(t, id), v)
	}
	e.wantProjectionCurrent(t, "7002")

	// Terminal now: the sweep may take it.
	g := e.sweep(t, "7002")
	if len(g) != 1 || g[0].Version != v {
		t.Fatalf("sweep after the message finished moved %+v", g)
	}
	back := e.add(t, traffic.ADFT(e.nextSeq(), e.now(), f))
	tick(t, p, s)
	wantState(t, e.get(t, back), queue.Succeeded, "")
	tomb := v + 1
	if got := e.flightVersion(t, "7002"); got != tomb+1 {
		t.Fatalf("the FLID came back at version %d, want %d (above the tombstone %d)", got, tomb+1, tomb)
	}
	var typ string
	var sv int64
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT event_type, state_version FROM msg_event
		WHERE target = 'KAFKA:schd' AND partition_key = '7002'`).Scan(&typ, &sv); err != nil {
		t.Fatal(err)
	}
	if typ != flight.Upsert || sv != tomb+1 {
		t.Errorf("KAFKA:schd row of 7002 is %s v%d, want UPSERT v%d (hidden behind the tombstone)", typ, sv, tomb+1)
	}
	e.wantProjectionCurrent(t, "7002")

	// Archived again: no collision on flight_history's key.
	e.pg.Exec(t, `UPDATE flight_schd SET updated_at = $1 WHERE flid = '7002'`, e.now().Add(-72*time.Hour))
	e.clk.Advance(5 * 24 * time.Hour)
	if g := e.sweep(t, "7002"); len(g) != 1 {
		t.Fatalf("second archive moved %+v", g)
	}
	var n int
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM flight_history WHERE flid = '7002'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d history rows of 7002, want 2", n)
	}
}

// An outcome that cannot be written while the session stays up (a read-only server) leaves
// the message the head; the pump waits the poll interval instead of spinning.
func TestRecordFailureWaitsThePollInterval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{})
	id := e.add(t, e.adft("7005"))
	if err := s.Do(t.Context(), func(conn *pgx.Conn) error {
		_, err := conn.Exec(t.Context(), `SET default_transaction_read_only = on`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if wait := tick(t, p, s); wait != e.cfg.Pipeline.PollInterval {
		t.Fatalf("tick after a failed outcome write waits %s, want the poll interval %s", wait, e.cfg.Pipeline.PollInterval)
	}
	if m := e.get(t, id); m.State != queue.Pending || m.Attempts != 0 {
		t.Fatalf("message %s attempts %d", m.State, m.Attempts)
	}
	if err := s.Do(t.Context(), func(conn *pgx.Conn) error {
		_, err := conn.Exec(t.Context(), `SET default_transaction_read_only = off`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tick(t, p, s)
	wantState(t, e.get(t, id), queue.Succeeded, "")
}
