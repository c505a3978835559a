package flightstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/testkit/flights"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// A load through a DetailCache returns what the tables hold, whatever wrote them since: random
// runs of the pump's writes through the cache (a FLOP's, or a schedule snapshot's whole writes
// or rows alone; committed or rolled back) mixed with another writer's (a whole write, a row
// rewritten alone, a flight moved out and created again, a child moved to another master), each
// followed by loads of every flight through the cache, one at a time (LoadLocked) and in bulk
// (LoadMany, LoadDays, ChildrenOfMany), that must equal loads that read every detail. The
// states written carry what the tables do not keep (an empty field, a field no column holds, a
// sequence where the table has none), so the details the cache keeps for a write are checked
// against those read back.
func TestLoadsThroughTheCacheReadWhatTheTablesHold(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	flids := []string{"A", "B", "C", "X"}
	start := func() []flight.Flight {
		a, b, c, x := rich("A"), rich("B"), rich("C"), rich("X")
		b.Scalars["MAID"], c.Scalars["MAID"] = "A", "A"
		return []flight.Flight{a, b, c, x}
	}
	if err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error { return flightstore.SaveMany(ctx, tx, nil, start()) }); err != nil {
		t.Fatal(err)
	}
	cache := flightstore.NewDetailCache(0)
	r := rand.New(rand.NewPCG(7, 31))
	// through is the pump's write: the target loaded through the cache, changed, written
	// through it with a child changed too now and then.
	through := func(flid string, commit bool) error {
		tx, err := d.Pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		cur, children, err := flightstore.LoadLocked(ctx, tx, cache, flid)
		if err != nil || cur == nil {
			return fmt.Errorf("load %s: %v %v", flid, cur, err)
		}
		stored := map[string]*flight.Flight{flid: cur}
		next := []flight.Flight{changed(r, *cur)}
		if len(children) > 0 && r.IntN(2) == 0 {
			c := children[r.IntN(len(children))]
			stored[c.FLID] = &c
			next = append(next, changed(r, c))
		}
		b := &pgx.Batch{}
		flightstore.AddUpdates(b, cache, stored, next, nil)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if !commit {
			return nil
		}
		return tx.Commit(ctx)
	}
	// snapshot is a schedule snapshot's batch: some flights loaded in bulk through the cache,
	// then written through it whole, or their rows alone with the details they have.
	snapshot := func(rowsAlone, commit bool) error {
		tx, err := d.Pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var some []string
		for _, id := range flids {
			if r.IntN(2) == 0 {
				some = append(some, id)
			}
		}
		loaded, err := flightstore.LoadMany(ctx, tx, cache, some)
		if err != nil {
			return err
		}
		next := make([]flight.Flight, len(loaded))
		for i, f := range loaded {
			if rowsAlone {
				next[i] = f.Clone()
				next[i].Version++
			} else {
				next[i] = changed(r, f)
			}
		}
		if rowsAlone {
			b := &pgx.Batch{}
			flightstore.AddRows(b, cache, next, nil)
			err = tx.SendBatch(ctx, b).Close()
		} else {
			err = flightstore.SaveMany(ctx, tx, cache, next)
		}
		if err != nil || !commit {
			return err
		}
		return tx.Commit(ctx)
	}
	// elsewhere is another writer's: none of its writes goes through the cache.
	elsewhere := func(flid string, kind int) error {
		return db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
			cur, err := flightstore.Load(ctx, tx, flid, true)
			if err != nil || cur == nil {
				return fmt.Errorf("load %s: %v %v", flid, cur, err)
			}
			switch kind {
			case 0: // a whole write
				return flightstore.SaveMany(ctx, tx, nil, []flight.Flight{changed(r, *cur)})
			case 1: // the row alone (a version floor)
				_, err := tx.Exec(ctx, `UPDATE flight_schd SET state_version = state_version + 1 WHERE flid = $1`, flid)
				return err
			case 2: // moved out, and created again with other details
				if _, err := tx.Exec(ctx, `DELETE FROM flight_schd WHERE flid = $1`, flid); err != nil {
					return err
				}
				return flightstore.SaveMany(ctx, tx, nil, []flight.Flight{changed(r, *cur)})
			default: // a child moved to another master, or back
				next := changed(r, *cur)
				if next.Scalars["MAID"] == "A" {
					next.Scalars["MAID"] = "X"
				} else if flid != "A" {
					next.Scalars["MAID"] = "A"
				}
				return flightstore.SaveMany(ctx, tx, nil, []flight.Flight{next})
			}
		})
	}
	for step := range 300 {
		flid := flids[r.IntN(len(flids))]
		var err error
		what := ""
		switch n := r.IntN(13); {
		case n < 5:
			what = "written through the cache"
			err = through(flid, true)
		case n < 6:
			what = "written through the cache, rolled back"
			err = through(flid, false)
		case n < 9:
			rowsAlone, commit := r.IntN(2) == 0, n < 8
			what = fmt.Sprintf("a snapshot's batch through the cache (rows alone %t, committed %t)", rowsAlone, commit)
			err = snapshot(rowsAlone, commit)
		default:
			what = fmt.Sprintf("written elsewhere (%d)", n-9)
			err = elsewhere(flid, n-9)
		}
		if err != nil {
			t.Fatalf("step %d, %s %s: %v", step, flid, what, err)
		}
		err = db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
			for _, id := range flids {
				want, wantChildren, err := flightstore.LoadLocked(ctx, tx, nil, id)
				if err != nil {
					return err
				}
				got, gotChildren, err := flightstore.LoadLocked(ctx, tx, cache, id)
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotChildren, wantChildren) {
					return fmt.Errorf("%s through the cache\n got %+v %+v\nwant %+v %+v", id, got, gotChildren, want, wantChildren)
				}
				scribble(got)
			}
			day := []time.Time{*rich("A").OperationDay}
			for _, bulk := range []func(*flightstore.DetailCache) ([]flight.Flight, error){
				func(c *flightstore.DetailCache) ([]flight.Flight, error) {
					return flightstore.LoadMany(ctx, tx, c, flids)
				},
				func(c *flightstore.DetailCache) ([]flight.Flight, error) {
					return flightstore.LoadDays(ctx, tx, c, day)
				},
				func(c *flightstore.DetailCache) ([]flight.Flight, error) {
					return flightstore.ChildrenOfMany(ctx, tx, c, flids)
				},
			} {
				want, err := bulk(nil)
				if err != nil {
					return err
				}
				got, err := bulk(cache)
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(got, want) {
					return fmt.Errorf("in bulk through the cache\n got %+v\nwant %+v", got, want)
				}
				for i := range got {
					scribble(&got[i])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("step %d, after %s %s: %v", step, flid, what, err)
		}
	}
}

// scribble changes a state a caller loaded, which must stay out of the cache.
func scribble(f *flight.Flight) {
	for tag := range f.Collections {
		for i := range f.Collections[tag] {
			f.Collections[tag][i].Fields["GATE"] = "scribbled"
		}
	}
}

// changed is f with random changes of the kind a message makes, some of them to values the
// detail tables do not keep as given.
func changed(r *rand.Rand, f flight.Flight) flight.Flight {
	next := f.Clone()
	next.Version++
	next.LastMsgID++
	switch r.IntN(7) {
	case 0:
		next.Collections["GTDT"] = []flight.Item{item(fmt.Sprint(r.IntN(9)), "GATE", fmt.Sprintf("G%d", r.IntN(99)))}
	case 1:
		delete(next.Collections, "CHDT")
	case 2:
		next.Collections["CKDT"] = append(next.Collections["CKDT"], item("K", "CHKC", fmt.Sprint(r.IntN(99)), "CCLS", ""))
	case 3:
		next.Raw["VIPF"] = []string{fmt.Sprintf("<VIP>%d</VIP>", r.IntN(99)), ""}
	case 4:
		next.Collections["DELY"] = []flight.Item{item("3", "CODE", fmt.Sprint(r.IntN(99)), "NOTCOLUMN", "x")}
	case 5:
		next.Collections["ERUT"] = nil
	default:
		next.Scalars["REMC"] = fmt.Sprint(r.IntN(999))
	}
	return next
}

// Once the pump wrote a flight through the cache, its next load leaves the detail read out;
// once another writer rewrote the flight, the load reads the details again, in a round trip
// of its own, and returns the other writer's; after Reset (a new term) it reads them with the
// rows, as a flight never seen.
func TestLoadLockedThroughTheCacheLeavesTheDetailReadOut(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	flights.Write(t, d.Pool, rich("A"))
	trips := pgtest.NewRoundTrips()
	s := d.TracedSession(t, trips)
	cache := flightstore.NewDetailCache(0)
	load := func() (*flight.Flight, int64, int64) {
		t.Helper()
		var cur *flight.Flight
		t0, s0 := trips.Counts()
		if err := s.Tx(ctx, func(tx pgx.Tx) error {
			var err error
			cur, _, err = flightstore.LoadLocked(ctx, tx, cache, "A")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t1, s1 := trips.Counts()
		return cur, t1 - t0, s1 - s0 // BEGIN and COMMIT included
	}
	if _, _, statements := load(); statements != 5 {
		t.Errorf("first load: %d statements, want 5 (the rows, the details)", statements)
	}
	next := rich("A")
	next.Version, next.LastMsgID = 5, 43
	next.Collections["GTDT"] = []flight.Item{item("2", "GATE", "B7")}
	if err := s.Tx(ctx, func(tx pgx.Tx) error {
		cur, _, err := flightstore.LoadLocked(ctx, tx, cache, "A")
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		flightstore.AddUpdates(b, cache, map[string]*flight.Flight{"A": cur}, []flight.Flight{next}, nil)
		return tx.SendBatch(ctx, b).Close()
	}); err != nil {
		t.Fatal(err)
	}
	cur, _, statements := load()
	if statements != 4 {
		t.Errorf("load after a write through the cache: %d statements, want 4 (the rows only)", statements)
	}
	if cur == nil || !reflect.DeepEqual(cur.Collections["GTDT"], next.Collections["GTDT"]) {
		t.Fatalf("GTDT after the write: %+v", cur)
	}
	other := next.Clone()
	other.Collections["GTDT"] = []flight.Item{item("3", "GATE", "C1")}
	flights.Write(t, d.Pool, other)
	cur, trips2, statements := load()
	if statements != 5 || trips2 != 4 {
		t.Errorf("load after another writer: %d statements in %d round trips, want 5 in 4 (the details in one of their own)", statements, trips2)
	}
	if cur == nil || !reflect.DeepEqual(cur.Collections["GTDT"], other.Collections["GTDT"]) {
		t.Fatalf("GTDT after another writer: %+v", cur)
	}
	if _, _, statements := load(); statements != 4 {
		t.Errorf("load after the details were read again: %d statements, want 4", statements)
	}
	cache.Reset()
	if _, _, statements := load(); statements != 5 {
		t.Errorf("load after Reset: %d statements, want 5 (the rows, the details)", statements)
	}
}

// A schedule snapshot's bulk load leaves the detail read out for the flights the pump wrote
// (SaveMany, AddRows through the cache), and reads, in one statement, only those another writer
// wrote since.
func TestLoadManyThroughTheCacheLeavesTheDetailReadOut(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	trips := pgtest.NewRoundTrips()
	s := d.TracedSession(t, trips)
	cache := flightstore.NewDetailCache(0)
	flids := []string{"A", "B", "C"}
	load := func() ([]flight.Flight, int64) {
		t.Helper()
		var got []flight.Flight
		_, s0 := trips.Counts()
		if err := s.Tx(ctx, func(tx pgx.Tx) error {
			var err error
			got, err = flightstore.LoadMany(ctx, tx, cache, flids)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_, s1 := trips.Counts()
		return got, s1 - s0 - 2 // BEGIN and COMMIT left out
	}
	if err := s.Tx(ctx, func(tx pgx.Tx) error {
		return flightstore.SaveMany(ctx, tx, cache, []flight.Flight{rich("A"), rich("B")})
	}); err != nil {
		t.Fatal(err)
	}
	flights.Write(t, d.Pool, rich("C"))
	if _, statements := load(); statements != 2 {
		t.Errorf("load after a write of A and B through the cache and C elsewhere: %d statements, want 2 (the rows, C's details)", statements)
	}
	if _, statements := load(); statements != 1 {
		t.Errorf("load once C was read: %d statements, want 1 (the rows)", statements)
	}
	rows := []flight.Flight{rich("A"), rich("B"), rich("C")}
	for i := range rows {
		rows[i].Version++
	}
	if err := s.Tx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		flightstore.AddRows(b, cache, rows, nil)
		return tx.SendBatch(ctx, b).Close()
	}); err != nil {
		t.Fatal(err)
	}
	other := rich("B")
	other.Version += 2
	other.Collections["GTDT"] = []flight.Item{item("3", "GATE", "C1")}
	flights.Write(t, d.Pool, other)
	got, statements := load()
	if statements != 2 {
		t.Errorf("load after the rows alone through the cache and B elsewhere: %d statements, want 2 (the rows, B's details)", statements)
	}
	if len(got) != 3 || !reflect.DeepEqual(got[1].Collections["GTDT"], other.Collections["GTDT"]) || got[0].Version != rows[0].Version {
		t.Fatalf("after the rows alone and B elsewhere: %+v", got)
	}
}
