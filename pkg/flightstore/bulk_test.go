package flightstore_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/testkit/flights"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

func flidsOf(fs []flight.Flight) string {
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.FLID
	}
	return strings.Join(ids, " ")
}

// The bulk reads give exactly what Load gives flight by flight, details included, and
// SaveMany replaces the details of every flight it is given.
func TestBulkLoadAndSaveMatchOneByOne(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	other := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a, b, c, x := rich("A"), rich("B"), rich("C"), rich("X")
	c.Scalars["MAID"] = "A"
	x.OperationDay = &other
	x.Scalars["MAID"] = "X" // a self-reference is nobody's child
	x.State = flight.Deleted
	if err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error { return flightstore.SaveMany(ctx, tx, nil, []flight.Flight{a, b, c, x}) }); err != nil {
		t.Fatal(err)
	}
	check := func(got []flight.Flight, want string) {
		t.Helper()
		if flidsOf(got) != want {
			t.Fatalf("loaded %q, want %q", flidsOf(got), want)
		}
		for _, g := range got {
			one, err := flightstore.Load(ctx, d.Pool, g.FLID, false)
			if err != nil || one == nil {
				t.Fatalf("load %s: %v", g.FLID, err)
			}
			if !reflect.DeepEqual(g, *one) {
				t.Errorf("bulk %s\n got %+v\nwant %+v", g.FLID, g, *one)
			}
		}
	}
	got, err := flightstore.LoadMany(ctx, d.Pool, nil, []string{"X", "A", "nope"})
	if err != nil {
		t.Fatal(err)
	}
	check(got, "A X")
	got, err = flightstore.LoadDays(ctx, d.Pool, nil, []time.Time{*a.OperationDay})
	if err != nil {
		t.Fatal(err)
	}
	check(got, "A B C")
	got, err = flightstore.ChildrenOfMany(ctx, d.Pool, nil, []string{"A", "B", "X"})
	if err != nil {
		t.Fatal(err)
	}
	check(got, "C")

	// A second SaveMany replaces every detail row of each flight (none is added twice).
	a.Collections["GTDT"] = []flight.Item{item("3", "GATE", "C9")}
	delete(b.Collections, "ROUT")
	b.Raw = map[string][]string{}
	if err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error { return flightstore.SaveMany(ctx, tx, nil, []flight.Flight{a, b}) }); err != nil {
		t.Fatal(err)
	}
	got, err = flightstore.LoadMany(ctx, d.Pool, nil, []string{"A", "B"})
	if err != nil {
		t.Fatal(err)
	}
	if !flight.SameContent(got[0], a) || !flight.SameContent(got[1], b) {
		t.Errorf("after the second save\n got %+v\nwant %+v %+v", got, a, b)
	}
	if err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error { return flightstore.SaveMany(ctx, tx, nil, []flight.Flight{a, a}) }); err == nil {
		t.Error("a FLID given twice was saved")
	}
}

func TestArchivedOfMany(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	d.Exec(t, `INSERT INTO flight_history (flid, state_version, state, archived_at, snapshot) VALUES
		('H', 3, 'ACTIVE', now(), '{"LastMsgID": 70}'), ('H', 5, 'DELETED', now(), '{"LastMsgID": 90}'),
		('J', 1, 'ACTIVE', now(), '{}')`)
	got, err := flightstore.ArchivedOfMany(ctx, d.Pool, []string{"H", "J", "NEVER"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]flightstore.Archived{"H": {Floor: 6, LastMsg: 90}, "J": {Floor: 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("archives %v, want %v", got, want)
	}
	for id, a := range got {
		if one, err := flightstore.ArchivedOf(ctx, d.Pool, id); err != nil || one != a {
			t.Errorf("ArchivedOf(%s) = %+v %v, bulk %+v", id, one, err, a)
		}
	}
}

// The trail row keeps the counts and the exact days; a refusal before the days were known
// has no scope at all.
func TestAppendSnapLog(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	n := func(v int) *int { return &v }
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	days := []time.Time{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)}
	if err := flightstore.AppendSnapLog(ctx, d.Pool, flightstore.SnapLog{MsgID: 7, STYP: "DNLD", Records: 3, Applied: n(2), Deleted: n(1),
		Unchanged: n(0), Batches: n(1), Scope: days, Outcome: flightstore.SnapApplied, At: at}); err != nil {
		t.Fatal(err)
	}
	if err := flightstore.AppendSnapLog(ctx, d.Pool, flightstore.SnapLog{MsgID: 8, STYP: "DNLD", Records: 2,
		Outcome: flightstore.SnapRefused, Reason: "recs-mismatch: x", At: at}); err != nil {
		t.Fatal(err)
	}
	rows, err := d.Pool.Query(ctx, `SELECT concat_ws(' ', msg_id, recs, applied, deleted, unchanged, batches, scope_start, scope_end,
		array_to_string(scope_days, ','), outcome, reason) FROM schd_snap_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := "7 3 2 1 0 1 2026-03-01 2026-03-03 2026-03-01,2026-03-03 APPLIED|8 2 REFUSED recs-mismatch: x"
	if strings.Join(got, "|") != want {
		t.Errorf("trail %q, want %q", strings.Join(got, "|"), want)
	}
}

// LoadLocked gives what Load and Children give (details included) in one round trip, and
// holds the locks: another transaction cannot take the target or a child meanwhile.
func TestLoadLockedMatchesLoadAndChildren(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	a, b, c, x := rich("A"), rich("B"), rich("C"), rich("X")
	b.Scalars["MAID"], c.Scalars["MAID"] = "A", "A"
	c.State = flight.Deleted
	if err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error { return flightstore.SaveMany(ctx, tx, nil, []flight.Flight{a, b, c, x}) }); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	cur, children, err := flightstore.LoadLocked(ctx, tx, nil, "A")
	if err != nil {
		t.Fatal(err)
	}
	one, err := flightstore.Load(ctx, d.Pool, "A", false)
	if err != nil || one == nil {
		t.Fatalf("load A: %v", err)
	}
	if cur == nil || !reflect.DeepEqual(*cur, *one) {
		t.Fatalf("LoadLocked A\n got %+v\nwant %+v", cur, *one)
	}
	want, err := flightstore.Children(ctx, d.Pool, "X") // none
	if err != nil || len(want) != 0 {
		t.Fatalf("children of X: %v %v", want, err)
	}
	want, err = flightstore.Children(ctx, tx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if flidsOf(children) != "B C" || !reflect.DeepEqual(children, want) {
		t.Fatalf("LoadLocked children\n got %+v\nwant %+v", children, want)
	}
	for _, flid := range []string{"A", "C"} {
		if !rowLocked(t, d, flid) {
			t.Errorf("%s is not locked by LoadLocked", flid)
		}
	}
	none, kids, err := flightstore.LoadLocked(ctx, tx, nil, "nope")
	if err != nil || none != nil || len(kids) != 0 {
		t.Fatalf("unknown FLID: %+v %v %v", none, kids, err)
	}
}

// LoadLocked locks the target before its children, as every other locker of a family does
// (history's archive): held up by a child another transaction holds, it already holds the
// target, and it returns once the child is let go.
func TestLoadLockedTakesTheTargetBeforeItsChildren(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	a, b := rich("A"), rich("B")
	b.Scalars["MAID"] = "A"
	flights.Write(t, d.Pool, a, b)
	holder := holdRow(t, d, "B")
	done := loadLockedInBackground(ctx, d, "A")
	testwait.For(t, 5*time.Second, "LoadLocked to hold the target while it waits for the child", func() bool { return rowLocked(t, d, "A") })
	select {
	case l := <-done:
		t.Fatalf("LoadLocked returned while the child was held: %+v", l)
	default:
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-done
	if l.err != nil || flidsOf(l.children) != "B" {
		t.Fatalf("after the child was let go: children %q, %v", flidsOf(l.children), l.err)
	}
}

// A child that the target's holder adds while LoadLocked waits for the target is loaded
// with its details: the children are read in a snapshot taken after the target's
// lock, not before its wait.
func TestLoadLockedSeesAChildAddedWhileItWaitedForTheTarget(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	flights.Write(t, d.Pool, rich("A"))
	holder := holdRow(t, d, "A")
	x := rich("X")
	x.Scalars["MAID"] = "A"
	if err := flightstore.SaveMany(ctx, holder, nil, []flight.Flight{x}); err != nil {
		t.Fatal(err)
	}
	done := loadLockedInBackground(ctx, d, "A")
	testwait.For(t, 5*time.Second, "LoadLocked to wait for the target", func() bool {
		var waiting bool
		err := d.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting)
		return err == nil && waiting
	})
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-done
	if l.err != nil || len(l.children) != 1 || !reflect.DeepEqual(l.children[0].Collections, x.Collections) {
		t.Fatalf("children %q, %v; want X with its details", flidsOf(l.children), l.err)
	}
}

type loaded struct {
	children []flight.Flight
	err      error
}

// loadLockedInBackground runs LoadLocked of flid in a transaction of its own, committed once
// it returns, and sends its children.
func loadLockedInBackground(ctx context.Context, d *pgtest.DB, flid string) <-chan loaded {
	done := make(chan loaded, 1)
	go func() {
		var l loaded
		l.err = db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
			_, l.children, l.err = flightstore.LoadLocked(ctx, tx, nil, flid)
			return l.err
		})
		done <- l
	}()
	return done
}

// holdRow locks flid's row in a transaction of its own, rolled back at the end of the test.
func holdRow(t *testing.T, d *pgtest.DB, flid string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	holder, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	if _, err := holder.Exec(ctx, `SELECT flid FROM flight_schd WHERE flid = $1 FOR UPDATE`, flid); err != nil {
		t.Fatal(err)
	}
	return holder
}

// rowLocked tells whether another transaction holds flid's row.
func rowLocked(t *testing.T, d *pgtest.DB, flid string) bool {
	t.Helper()
	rows, err := d.Pool.Query(context.Background(), `SELECT flid FROM flight_schd WHERE flid = $1 FOR UPDATE SKIP LOCKED`, flid)
	if err != nil {
		t.Fatal(err)
	}
	free, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return len(free) == 0
}

// AddUpdates writes only the detail tables whose rows changed, and leaves the same stored
// state as a whole write (SaveMany): every change of a collection (changed, cleared, added, a
// raw tag, a scalar only) read back equals the new state, and the statements sent are the row
// upsert with its history row plus a delete and an insert per changed table only; the history
// row is written.
func TestAddUpdatesEqualsSaveMany(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(f *flight.Flight)
		// statements is the batch length: 1 upsert, then a delete and/or an insert per table
		statements int
	}{
		{"scalar only", func(f *flight.Flight) { f.Scalars["REMC"] = "changed" }, 1},
		{"one collection changed", func(f *flight.Flight) { f.Collections["GTDT"] = []flight.Item{item("2", "GATE", "B7")} }, 3},
		{"one collection cleared", func(f *flight.Flight) { delete(f.Collections, "CHDT") }, 2},
		{"a collection added", func(f *flight.Flight) { f.Collections["CKDT"] = []flight.Item{item("K1", "CHKC", "A")} }, 2},
		{"one of two kinds of a table", func(f *flight.Flight) { f.Collections["ERUT"] = nil }, 3},
		{"raw content", func(f *flight.Flight) { f.Raw["SRVT"] = []string{"<OPER>Z</OPER>"} }, 3},
		{"nothing", func(*flight.Flight) {}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flid := "U-" + strings.ReplaceAll(tc.name, " ", "-")
			prev := rich(flid)
			flights.Write(t, d.Pool, prev)
			next := prev.Clone()
			next.Version++
			tc.change(&next)
			err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
				stored, _, err := flightstore.LoadLocked(ctx, tx, nil, flid)
				if err != nil {
					return err
				}
				b := &pgx.Batch{}
				change := flightstore.Change{MsgID: 42, FLID: flid, MsgType: "FLOP", STYP: "EUDT", Cause: flightstore.CauseTarget,
					State: next.State, Version: next.Version, At: next.UpdatedAt}
				flightstore.AddUpdates(b, nil, map[string]*flight.Flight{flid: stored}, []flight.Flight{next}, []flightstore.Change{change})
				if b.Len() != tc.statements {
					t.Errorf("%d statements, want %d", b.Len(), tc.statements)
				}
				return tx.SendBatch(ctx, b).Close()
			})
			if err != nil {
				t.Fatal(err)
			}
			if h, err := flightstore.History(ctx, d.Pool, flid, 0, 10); err != nil || len(h) != 1 || h[0].MsgID != 42 || h[0].Version != next.Version {
				t.Fatalf("history = %+v, %v; want the one row written with the update", h, err)
			}
			got, err := flightstore.Load(ctx, d.Pool, flid, false)
			if err != nil || got == nil {
				t.Fatalf("load: %v", err)
			}
			if !flight.SameContent(*got, next) || got.Version != next.Version {
				t.Fatalf("stored\n got %+v\nwant %+v", *got, next)
			}
		})
	}
}

// TestSameDetails: a state that SameDetails finds with the stored details is stored exactly
// as SaveMany stores it by its row alone (AddRows), and a state it finds different is not; so
// a snapshot that writes the row alone for such states leaves the tables as a full write does.
func TestSameDetails(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(f *flight.Flight)
		same   bool
	}{
		{"nothing", func(*flight.Flight) {}, true},
		{"a scalar", func(f *flight.Flight) { f.Scalars["RENO"] = "B1234" }, true},
		{"an empty collection dropped", func(f *flight.Flight) { delete(f.Collections, "CKDT") }, true},
		{"an empty value for a missing one", func(f *flight.Flight) { f.Collections["GTDT"][0].Fields["PGOT"] = "" }, true},
		{"a field the table has no column for", func(f *flight.Flight) { f.Collections["GTDT"][0].Fields["XXXX"] = "1" }, true},
		{"a sequence where the table has none", func(f *flight.Flight) { f.Collections["DELY"][0].Seq = "7" }, true},
		{"an empty raw tag", func(f *flight.Flight) { f.Raw["VIPF"] = nil }, true},
		{"a field", func(f *flight.Flight) { f.Collections["GTDT"][1].Fields["GATE"] = "A2" }, false},
		{"a sequence", func(f *flight.Flight) { f.Collections["ABTM"][0].Seq = "2" }, false},
		{"items reordered", func(f *flight.Flight) {
			r := f.Collections["ROUT"]
			f.Collections["ROUT"] = []flight.Item{r[1], r[0]}
		}, false},
		{"an item added", func(f *flight.Flight) { f.Collections["CKDT"] = []flight.Item{item("K1", "CHKC", "A")} }, false},
		{"a collection cleared", func(f *flight.Flight) { f.Collections["CHDT"] = []flight.Item{} }, false},
		{"raw content changed", func(f *flight.Flight) { f.Raw["SRVT"] = []string{"<OPER>X</OPER>"} }, false},
		{"raw content added", func(f *flight.Flight) { f.Raw["VIPF"] = []string{"<VIP>1</VIP>"} }, false},
		{"raw content removed", func(f *flight.Flight) { delete(f.Raw, "SRVT") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]*flight.Flight
			for i, how := range []string{"full", "row"} {
				flid := fmt.Sprintf("S-%s-%s", how, strings.ReplaceAll(tc.name, " ", "-"))
				prev := rich(flid)
				flights.Write(t, d.Pool, prev)
				next := prev.Clone()
				next.Version++
				next.Scalars["REMC"] = "next"
				tc.change(&next)
				if i == 0 && flightstore.SameDetails(prev, next) != tc.same {
					t.Fatalf("SameDetails = %v, want %v", !tc.same, tc.same)
				}
				err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
					if how == "full" {
						return flightstore.SaveMany(ctx, tx, nil, []flight.Flight{next})
					}
					b := &pgx.Batch{}
					flightstore.AddRows(b, nil, []flight.Flight{next}, nil)
					return tx.SendBatch(ctx, b).Close()
				})
				if err != nil {
					t.Fatal(err)
				}
				if got[i], err = flightstore.Load(ctx, d.Pool, flid, false); err != nil || got[i] == nil {
					t.Fatalf("load %s: %v", flid, err)
				}
				got[i].FLID = ""
			}
			if equal := reflect.DeepEqual(got[0], got[1]); equal != tc.same {
				t.Fatalf("the row alone stores what the full write stores: %v, want %v\nfull %+v\n row %+v", equal, tc.same, got[0], got[1])
			}
		})
	}
}

// TestLoadPublishedManyMatchesOneByOne: the page of the consistency sentinel reads exactly what
// ReadPublished reads flight by flight: a master with the MAFL of its active children (a
// deleted child left out, a deleted master without any), a child as stored, a flight without
// children, in the order asked, an unknown FLID absent.
func TestLoadPublishedManyMatchesOneByOne(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	m, c1, c2, c3, lone, gone, gc := rich("PM"), rich("PC1"), rich("PC2"), rich("PC3"), rich("PL"), rich("PG"), rich("PGC")
	for _, c := range []*flight.Flight{&c1, &c2, &c3} {
		c.Scalars["MAID"] = "PM"
	}
	c1.Scalars["FLNO"], c2.Scalars["FLNO"] = "ZH100", "MU200"
	c3.State = flight.Deleted
	gone.State = flight.Deleted
	gc.Scalars["MAID"] = "PG"
	flights.Write(t, d.Pool, m, c1, c2, c3, lone, gone, gc)
	ask := []string{"PL", "PC2", "NOPE", "PM", "PG", "PGC", "PC3", "PC1"}
	got, err := flightstore.LoadPublishedMany(ctx, d.Pool, ask)
	if err != nil {
		t.Fatal(err)
	}
	var want []flight.Flight
	for _, flid := range ask {
		f, err := flightstore.ReadPublished(ctx, d.Pool, flid)
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			want = append(want, *f)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadPublishedMany\n got %+v\nwant %+v", got, want)
	}
	if len(got) != 7 || got[2].FLID != "PM" || len(got[2].MAFL) != 2 {
		t.Fatalf("the master's MAFL is not derived: %+v", got[2])
	}
}

// TestAddUpdatesOfSeveralFlights: one message's writes in one batch. A flight stored does not
// hold (new) is written whole; a FLID given twice is stored as its last state, as two writes
// in turn leave it; the rows of every flight and the history rows are one statement; and
// history rows with no flight to write (a message that left every part to newer ones) are
// written alone.
func TestAddUpdatesOfSeveralFlights(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	known := rich("M-KNOWN")
	flights.Write(t, d.Pool, known)
	fresh := rich("M-NEW")
	first, second := known.Clone(), known.Clone()
	first.Version, second.Version = known.Version+1, known.Version+2
	first.Scalars["REMC"], second.Scalars["REMC"] = "first", "second"
	second.Collections["GTDT"] = []flight.Item{item("9", "GATE", "Z9")}
	change := func(msg int64, flid string, v int64) flightstore.Change {
		return flightstore.Change{MsgID: msg, FLID: flid, MsgType: "FLOP", STYP: "EUDT", Cause: flightstore.CauseTarget,
			State: flight.Active, Version: v, At: known.UpdatedAt}
	}
	err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
		stored, _, err := flightstore.LoadLocked(ctx, tx, nil, known.FLID)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		flightstore.AddUpdates(b, nil, map[string]*flight.Flight{known.FLID: stored}, []flight.Flight{first, fresh, second},
			[]flightstore.Change{change(7, known.FLID, second.Version), change(7, fresh.FLID, fresh.Version)})
		// rows and history; the new flight's details as a whole write clears and inserts them
		// (AddUpdates of a flight nothing stored holds, less its row); the known flight's GTDT
		// deleted and inserted
		whole := &pgx.Batch{}
		flightstore.AddUpdates(whole, nil, nil, []flight.Flight{fresh}, nil)
		if want := 1 + (whole.Len() - 1) + 2; b.Len() != want {
			t.Errorf("%d statements, want %d", b.Len(), want)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		b = &pgx.Batch{}
		flightstore.AddUpdates(b, nil, nil, nil, []flightstore.Change{change(8, known.FLID, second.Version)})
		if b.Len() != 1 {
			t.Errorf("history alone: %d statements, want 1", b.Len())
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []flight.Flight{second, fresh} {
		got, err := flightstore.Load(ctx, d.Pool, want.FLID, false)
		if err != nil || got == nil {
			t.Fatalf("load %s: %v", want.FLID, err)
		}
		if !flight.SameContent(*got, want) || got.Version != want.Version {
			t.Errorf("%s stored\n got %+v\nwant %+v", want.FLID, *got, want)
		}
	}
	for flid, msgs := range map[string][]int64{known.FLID: {7, 8}, fresh.FLID: {7}} {
		h, err := flightstore.History(ctx, d.Pool, flid, 0, 10)
		if err != nil || len(h) != len(msgs) {
			t.Fatalf("history of %s = %+v, %v; want messages %v", flid, h, err, msgs)
		}
		for i, c := range h {
			if c.MsgID != msgs[i] {
				t.Errorf("history of %s, row %d: message %d, want %d", flid, i, c.MsgID, msgs[i])
			}
		}
	}
}
