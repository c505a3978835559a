package flight_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
)

// stored is a flight as an earlier snapshot of body left it in flight_schd, at version v (MAFL
// is never stored).
func stored(t testing.TB, body string, v int64) flight.Flight {
	t.Helper()
	p := pkg(t, "DNLD", body)
	r := p.Records()[0]
	d := flight.ApplySnapshot(nil, flight.Input{MsgID: 1, STYP: "DNLD", Now: now.Add(-time.Hour), Record: r.Record}, r.Day)
	f := d.Next
	f.Version, f.MAFL = v, nil
	return f
}

func deleted(f flight.Flight) flight.Flight {
	f.State = flight.Deleted
	return f
}

func dayless(f flight.Flight) flight.Flight {
	f.OperationDay = nil
	return f
}

func plan(t testing.TB, p flight.Package, request *flight.DayRange, st []flight.Flight) flight.Plan {
	t.Helper()
	scope, err := p.Scope(request)
	if err != nil {
		t.Fatal(err)
	}
	pl, r := flight.PlanSnapshot(flight.SnapshotInput{MsgID: 500, Now: now, Package: p, Scope: scope, Stored: st})
	if r != nil {
		t.Fatalf("refused: %s", r)
	}
	return pl
}

// planned is the plan as "FLID cause changed" lines, in plan order.
func planned(p flight.Plan) []string {
	var out []string
	for _, f := range p.Flights {
		out = append(out, f.FLID+" "+string(f.Cause)+" "+strconv.FormatBool(f.Decision.Changed))
	}
	return out
}

func byFLID(p flight.Plan) map[string]flight.SnapshotFlight {
	m := map[string]flight.SnapshotFlight{}
	for _, f := range p.Flights {
		m[f.FLID] = f
	}
	return m
}

type msgNote struct {
	FLID, STATE, STYP, VIA string
	STATE_VERSION          int64
	CHANGED                []string
}

func noteOf(t testing.TB, d flight.Decision) msgNote {
	t.Helper()
	if len(d.Events) != 2 || d.Events[0].Target != flight.TargetMsg || d.Events[1].Target != flight.TargetSchd {
		t.Fatalf("events %+v, want KAFKA:msg + KAFKA:schd", d.Events)
	}
	var n msgNote
	if err := json.Unmarshal(d.Events[0].Payload, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// apply writes the changed states over st as the store would (MAFL is derived, not stored).
func apply(st []flight.Flight, flights []flight.SnapshotFlight) []flight.Flight {
	m := map[string]flight.Flight{}
	for _, f := range st {
		m[f.FLID] = f
	}
	for _, f := range flights {
		if f.Decision.Changed {
			n := f.Decision.Next.Clone()
			n.MAFL = nil
			m[f.FLID] = n
		}
	}
	var out []flight.Flight
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[id])
	}
	return out
}

// TestPlanReplacesTheScopeDays guards R-INV-18.
func TestPlanReplacesTheScopeDays(t *testing.T) {
	a := fltr("A", "CA1", d1, "", `<ACFT>320</ACFT>`)
	b := fltr("B", "CA2", d1, "", `<ACFT>320</ACFT>`)
	st := []flight.Flight{
		stored(t, a, 3), // carried again, same state
		stored(t, b, 4), // carried with a change
		stored(t, fltr("C", "CA3", d1, "", ""), 2),          // omitted on a scope day: deleted
		deleted(stored(t, fltr("E", "CA5", d1, "", ""), 6)), // omitted, already deleted
		stored(t, fltr("F", "CA6", d2, "", ""), 1),          // another day: untouched
		dayless(stored(t, fltr("G", "CA7", d1, "", ""), 1)), // no day: in no scope
	}
	p := pkg(t, "DNLD", a, fltr("B", "CA2", d1, "", `<ACFT>333</ACFT>`), fltr("N", "CA9", d1, "", ""))
	pl := plan(t, p, nil, st)
	if got, want := planned(pl), []string{"A record false", "B record true", "N record true", "C omitted true", "E omitted false"}; !slices.Equal(got, want) {
		t.Fatalf("plan\n got %v\nwant %v", got, want)
	}
	if pl.Scope.String() != "2026-11-30" || pl.Changed() != 3 {
		t.Errorf("scope %s changed %d", pl.Scope, pl.Changed())
	}
	f := byFLID(pl)
	if n := noteOf(t, f["B"].Decision); !slices.Equal(n.CHANGED, []string{"ACFT"}) || n.STATE_VERSION != 5 || n.STYP != "DNLD" {
		t.Errorf("B note %+v", n)
	}
	if nn := f["N"].Decision.Next; nn.Version != 1 || !nn.OperationDay.Equal(d1) || f["N"].Pos != 3 {
		t.Errorf("N %+v pos %d", nn, f["N"].Pos)
	}
	c := f["C"].Decision
	if c.Next.State != flight.Deleted || c.Next.Version != 3 || c.Events[0].Type != flight.Tombstone || c.Events[1].Type != flight.Tombstone ||
		c.Events[1].Payload != nil || c.Next.LastMsgID != 500 {
		t.Errorf("C must be deleted with tombstones: %+v", c)
	}
	if e := f["E"].Decision; e.Changed || len(e.Events) != 0 || e.Next.State != flight.Deleted || e.Next.Version != 6 {
		t.Errorf("an already deleted flight changes nothing, and is projected again: %+v", e)
	}
	if len(f["A"].Decision.Events) != 0 || f["A"].Decision.Next.Version != 3 {
		t.Errorf("A at its snapshot state must not move: %+v", f["A"].Decision)
	}
}

// TestPlanRerunIsSilent guards R-INV-18.
func TestPlanRerunIsSilent(t *testing.T) {
	st := []flight.Flight{
		stored(t, fltr("M", "CA1", d1, "", ""), 2),
		stored(t, fltr("C1", "ZH1", d1, "M", ""), 2),
		stored(t, fltr("X", "CA2", d1, "", `<ACFT>320</ACFT>`), 2),
		stored(t, fltr("O", "CA3", d1, "", ""), 2),
		stored(t, fltr("K", "ZH9", d2, "O", ""), 2), // cascaded with O
		stored(t, fltr("P", "CA4", d2, "", ""), 2),
	}
	var fl []string
	for i := range 7 {
		fl = append(fl, fltr("N"+strconv.Itoa(i), "HU"+strconv.Itoa(i), d1, "", ""))
	}
	fl = append(fl, fltr("M", "CA1", d1, "", `<TRML>T3</TRML>`), fltr("C1", "ZH1", d1, "", ""), fltr("C2", "ZH2", d1, "P", ""),
		fltr("X", "CA2", d1, "", `<ACFT>330</ACFT>`))
	p := pkg(t, "DNLD", fl...)
	first := plan(t, p, nil, st)
	if first.Changed() != 14 {
		t.Fatalf("first run: %d changed: %v", first.Changed(), planned(first))
	}
	t.Run("the whole package again", func(t *testing.T) {
		again := plan(t, p, nil, apply(st, first.Flights))
		if again.Changed() != 0 {
			t.Errorf("re-run changed %d: %v", again.Changed(), planned(again))
		}
		for _, f := range again.Flights {
			if len(f.Decision.Events) != 0 {
				t.Errorf("%s: events on a re-run", f.FLID)
			}
		}
		if !slices.Equal(ids(again.Flights), ids(first.Flights)) {
			t.Errorf("the re-run must project the same flights:\n%v\n%v", ids(again.Flights), ids(first.Flights))
		}
	})
	// A crash after some batches committed: the re-run finds whole groups done or not, and
	// writes exactly the rest, once.
	for _, n := range []int{1, 3, 4, 10} {
		t.Run("after the first batch of "+strconv.Itoa(n), func(t *testing.T) {
			batches := first.Batches(n)
			rest := plan(t, p, nil, apply(st, batches[0]))
			want := 0
			for _, b := range batches[1:] {
				want += len(b.Outcome().Writes)
			}
			if rest.Changed() != want {
				t.Errorf("re-run changed %d, want %d", rest.Changed(), want)
			}
			done := map[string]bool{}
			for _, f := range batches[0] {
				done[f.FLID] = f.Decision.Changed
			}
			firstBy := byFLID(first)
			for _, f := range rest.Flights {
				if done[f.FLID] && f.Decision.Changed {
					t.Errorf("%s changed again", f.FLID)
				}
				if f.Decision.Changed && f.Decision.Next.Version != firstBy[f.FLID].Decision.Next.Version {
					t.Errorf("%s version %d, want %d", f.FLID, f.Decision.Next.Version, firstBy[f.FLID].Decision.Next.Version)
				}
				if string(flight.Document(f.Decision.Next)) != string(flight.Document(firstBy[f.FLID].Decision.Next)) &&
					f.Decision.Changed {
					t.Errorf("%s: the re-run reaches another state", f.FLID)
				}
			}
		})
	}
}

func ids(fs []flight.SnapshotFlight) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.FLID)
	}
	return out
}

func TestPlanCrossDay(t *testing.T) {
	rec := fltr("X", "CA1", d1, "", "")
	cases := []struct {
		name   string
		stored flight.Flight
		reason string // "" = accepted
	}{
		{"stored on another day", stored(t, fltr("X", "CA1", d2, "", ""), 3),
			`cross-day: /MSG/SCHD/FLTR[2] FLID "X": the stored flight belongs to operation day 2026-12-01, the package puts it on 2026-11-30; an operation day is never re-derived`},
		{"deleted on another day", deleted(stored(t, fltr("X", "CA1", d3, "", ""), 3)),
			`cross-day: /MSG/SCHD/FLTR[2] FLID "X": the stored flight (deleted) belongs to operation day 2026-12-02, the package puts it on 2026-11-30; an operation day is never re-derived`},
		{"stored without a day takes the package's", dayless(stored(t, fltr("X", "CA1", d2, "", ""), 3)), ""},
		{"stored on the same day", stored(t, fltr("X", "CA0", d1, "", ""), 3), ""},
	}
	p := pkg(t, "DNLD", fltr("A", "CA2", d1, "", ""), rec)
	scope, _ := p.Scope(nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := []flight.Flight{tc.stored}
			pl, r := flight.PlanSnapshot(flight.SnapshotInput{MsgID: 9, Now: now, Package: p, Scope: scope, Stored: st})
			if cr := flight.CheckCrossDay(p, st); (cr == nil) != (r == nil) {
				t.Errorf("CheckCrossDay %v, PlanSnapshot %v", cr, r)
			}
			if tc.reason == "" {
				if r != nil {
					t.Fatalf("refused: %s", r)
				}
				x := byFLID(pl)["X"].Decision.Next
				if !x.OperationDay.Equal(d1) || x.State != flight.Active {
					t.Errorf("X %+v", x)
				}
				return
			}
			if r == nil || r.Code != flight.RefuseCrossDay || r.String() != tc.reason {
				t.Fatalf("refusal %v, want %s", r, tc.reason)
			}
			if len(pl.Flights) != 0 {
				t.Errorf("a refused package plans nothing: %v", planned(pl))
			}
		})
	}
	if _, r := flight.PlanSnapshot(flight.SnapshotInput{}); r == nil || r.Code != flight.RefuseNotSnapshot {
		t.Errorf("an unchecked package: %v", r)
	}
}

func TestPlanCodeShare(t *testing.T) {
	t.Run("an omitted master takes its children along, those the package carries too", func(t *testing.T) {
		st := []flight.Flight{
			stored(t, fltr("M", "CA1", d1, "", ""), 5),
			stored(t, fltr("C1", "ZH1", d1, "M", ""), 2),          // omitted itself
			stored(t, fltr("C2", "ZH2", d2, "M", ""), 2),          // another day: cascaded
			stored(t, fltr("C3", "ZH3", d1, "M", ""), 2),          // carried, still naming M: deleted with it
			deleted(stored(t, fltr("C4", "ZH4", d2, "M", ""), 3)), // already deleted: projected again
			stored(t, fltr("Z", "HU1", d1, "", ""), 1),
		}
		p := pkg(t, "DNLD", fltr("Z", "HU1", d1, "", ""), fltr("C3", "ZH3", d1, "M", ""))
		pl := plan(t, p, nil, st)
		want := []string{"Z record false", "C3 record true", "C1 omitted true", "C2 cascade true", "C4 cascade false", "M omitted true"}
		if got := planned(pl); !slices.Equal(got, want) {
			t.Fatalf("plan\n got %v\nwant %v", got, want)
		}
		f := byFLID(pl)
		if n := noteOf(t, f["C2"].Decision); n.VIA != "M" || n.STATE != flight.Deleted || f["C2"].Decision.Events[0].Type != flight.Tombstone {
			t.Errorf("cascaded child: %+v", n)
		}
		if n := noteOf(t, f["C1"].Decision); n.VIA != "" {
			t.Errorf("an omitted child is deleted for itself: %+v", n)
		}
		if !slices.Equal(pl.WithMaster, []string{"C3"}) {
			t.Errorf("deleted with their master %v", pl.WithMaster)
		}
		// The record a package carries under a master it deletes is deleted with it, with its
		// tombstones and VIA the master: never an active child under a deleted master
		// (R-CODESHARE-5).
		if n := noteOf(t, f["C3"].Decision); n.VIA != "M" || n.STATE != flight.Deleted || f["C3"].Decision.Events[1].Type != flight.Tombstone {
			t.Errorf("carried child of the omitted master: %+v", n)
		}
		if g := f["M"].Group; g != "C3" || f["C1"].Group != g || f["C2"].Group != g || f["C4"].Group != g || f["Z"].Group != "Z" {
			t.Errorf("groups: %+v", f)
		}
		// The master's deletion and its cascade are one atomic change: never split.
		bs := pl.Batches(1)
		if len(bs) != 2 || len(bs[0]) != 1 || len(bs[1]) != 5 {
			t.Errorf("batches %d: %v", len(bs), bs)
		}
	})
	t.Run("children joining a master move it once, with one version", func(t *testing.T) {
		st := []flight.Flight{
			stored(t, fltr("M", "CA1", d1, "", ""), 5),
			stored(t, fltr("M2", "CA2", d2, "", ""), 7), // another day, not carried
		}
		p := pkg(t, "DNLD", fltr("C5", "ZH5", d1, "M", ""), fltr("M", "CA1", d1, "", ""), fltr("C6", "MU6", d1, "M", ""),
			fltr("C7", "HU7", d1, "M2", ""))
		pl := plan(t, p, nil, st)
		if got, want := planned(pl), []string{"C5 record true", "M record true", "C6 record true", "C7 record true", "M2 code-share true"}; !slices.Equal(got, want) {
			t.Fatalf("plan\n got %v\nwant %v", got, want)
		}
		f := byFLID(pl)
		m := f["M"].Decision
		if m.Next.Version != 6 || !slices.Equal(m.Next.MAFL, []flight.Share{{FLID: "C5", FLNO: "ZH5"}, {FLID: "C6", FLNO: "MU6"}}) {
			t.Errorf("M %d %v", m.Next.Version, m.Next.MAFL)
		}
		if n := noteOf(t, m); !slices.Equal(n.CHANGED, []string{"MAFL"}) {
			t.Errorf("M note %+v", n)
		}
		m2 := f["M2"].Decision
		if n := noteOf(t, m2); m2.Next.Version != 8 || !slices.Equal(n.CHANGED, []string{"MAFL"}) || n.VIA != "" ||
			!slices.Equal(m2.Next.MAFL, []flight.Share{{FLID: "C7", FLNO: "HU7"}}) {
			t.Errorf("M2 %+v %+v", m2.Next, n)
		}
		var doc struct{ MAFL []flight.Share }
		if err := json.Unmarshal(m2.Events[1].Payload, &doc); err != nil || len(doc.MAFL) != 1 {
			t.Errorf("M2 document MAFL %v %v", doc.MAFL, err)
		}
		if f["C5"].Decision.Next.MAFL != nil || f["C5"].Group != "C5" || f["M"].Group != "C5" || f["C7"].Group != "C7" || f["M2"].Group != "C7" {
			t.Errorf("children carry no MAFL; groups %s %s %s %s", f["C5"].Group, f["M"].Group, f["C7"].Group, f["M2"].Group)
		}
	})
	t.Run("an omitted child leaves its master's MAFL", func(t *testing.T) {
		st := []flight.Flight{
			stored(t, fltr("M", "CA1", d2, "", ""), 5),
			stored(t, fltr("C", "ZH1", d1, "M", ""), 2),
			stored(t, fltr("D", "ZH2", d2, "M", ""), 2),
		}
		pl := plan(t, pkg(t, "DNLD", fltr("Y", "HU1", d1, "", "")), nil, st)
		if got, want := planned(pl), []string{"Y record true", "C omitted true", "M code-share true"}; !slices.Equal(got, want) {
			t.Fatalf("plan\n got %v\nwant %v", got, want)
		}
		m := byFLID(pl)["M"].Decision
		if m.Next.Version != 6 || !slices.Equal(m.Next.MAFL, []flight.Share{{FLID: "D", FLNO: "ZH2"}}) || m.Next.State != flight.Active {
			t.Errorf("M %+v", m.Next)
		}
	})
	t.Run("a child moving between masters moves both, in one group", func(t *testing.T) {
		st := []flight.Flight{
			stored(t, fltr("M1", "CA1", d2, "", ""), 5),
			stored(t, fltr("M2", "CA2", d2, "", ""), 5),
			stored(t, fltr("C", "ZH1", d1, "M1", ""), 2),
			stored(t, fltr("U", "ZH2", d1, "M3", ""), 2),
			stored(t, fltr("M3", "CA3", d2, "", ""), 5),
		}
		pl := plan(t, pkg(t, "DNLD", fltr("C", "ZH1", d1, "M2", ""), fltr("U", "ZH2", d1, "M3", ""), fltr("Q", "HU1", d1, "GONE", "")), nil, st)
		want := []string{"C record true", "M1 code-share true", "M2 code-share true", "U record false", "M3 code-share false", "Q record true"}
		if got := planned(pl); !slices.Equal(got, want) {
			t.Fatalf("plan\n got %v\nwant %v", got, want)
		}
		f := byFLID(pl)
		if f["M1"].Decision.Next.MAFL != nil || len(f["M2"].Decision.Next.MAFL) != 1 || f["M1"].Group != "C" || f["M2"].Group != "C" {
			t.Errorf("M1 %v M2 %v", f["M1"].Decision.Next.MAFL, f["M2"].Decision.Next.MAFL)
		}
		// An unchanged master of a carried child is projected again with its MAFL; a dangling
		// MAID plans the child alone.
		if m3 := f["M3"].Decision.Next; len(m3.MAFL) != 1 || f["M3"].Group != "U" || f["Q"].Group != "Q" {
			t.Errorf("M3 %+v", m3)
		}
	})
}

// A RESP replaces the request's days: a record outside them is still the flight's state, but
// nothing of its day is deleted; an empty RESP empties its days.
func TestPlanRESP(t *testing.T) {
	st := []flight.Flight{
		stored(t, fltr("A", "CA1", d1, "", ""), 1),
		stored(t, fltr("B", "CA2", d2, "", ""), 1),
		stored(t, fltr("C", "CA3", d3, "", ""), 1),
		stored(t, fltr("D", "CA4", d3, "", ""), 1),
	}
	pl := plan(t, pkg(t, "RESP", fltr("A", "CA1", d1, "", ""), fltr("C", "CA3", d3, "", `<ACFT>320</ACFT>`)), &flight.DayRange{First: d1, Last: d2}, st)
	if got, want := planned(pl), []string{"A record false", "C record true", "B omitted true"}; !slices.Equal(got, want) {
		t.Errorf("plan\n got %v\nwant %v", got, want)
	}
	if n := noteOf(t, byFLID(pl)["C"].Decision); n.STYP != "RESP" {
		t.Errorf("note %+v", n)
	}
	empty := plan(t, pkg(t, "RESP"), &flight.DayRange{First: d3, Last: d3}, st)
	if got, want := planned(empty), []string{"C omitted true", "D omitted true"}; !slices.Equal(got, want) {
		t.Errorf("empty RESP\n got %v\nwant %v", got, want)
	}
	if none := plan(t, pkg(t, "DNLD"), nil, st); len(none.Flights) != 0 {
		t.Errorf("an empty DNLD covers no day: %v", planned(none))
	}
	// A RESP that omits a master of its range and carries its child (of a day outside the
	// range) deletes the child with it, as a DNLD does (R-CODESHARE-5).
	withChild := append(slices.Clone(st), stored(t, fltr("K", "ZH1", d3, "B", ""), 1))
	cs := plan(t, pkg(t, "RESP", fltr("A", "CA1", d1, "", ""), fltr("K", "ZH1", d3, "B", "")), &flight.DayRange{First: d1, Last: d2}, withChild)
	if k := byFLID(cs)["K"].Decision; k.Next.State != flight.Deleted || !slices.Equal(cs.WithMaster, []string{"K"}) {
		t.Errorf("RESP: the child of the omitted master is %s, deleted with their master %v", k.Next.State, cs.WithMaster)
	}
}

func TestPlanVersionFloor(t *testing.T) {
	p := pkg(t, "DNLD", fltr("77", "CA77", d1, "", ""), fltr("78", "CA78", d1, "", ""))
	scope, _ := p.Scope(nil)
	st := []flight.Flight{stored(t, fltr("78", "CA78", d1, "", `<ACFT>1</ACFT>`), 3)}
	pl, r := flight.PlanSnapshot(flight.SnapshotInput{MsgID: 1, Now: now, Package: p, Scope: scope, Stored: st,
		VersionFloors: map[string]int64{"77": 8, "78": 40}})
	if r != nil {
		t.Fatal(r)
	}
	f := byFLID(pl)
	// The floor is for a FLID absent from the store; a stored flight keeps counting.
	if f["77"].Decision.Next.Version != 9 || f["78"].Decision.Next.Version != 4 {
		t.Errorf("versions %d %d", f["77"].Decision.Next.Version, f["78"].Decision.Next.Version)
	}
}

// The plan depends neither on the order of the stored flights nor on map order.
func TestPlanIsDeterministic(t *testing.T) {
	var st []flight.Flight
	var fl []string
	for i := range 30 {
		id := strconv.Itoa(100 + i)
		maid := ""
		if i%3 == 1 {
			maid = strconv.Itoa(100 + i - 1)
		}
		st = append(st, stored(t, fltr(id, "CA"+id, d1, maid, ""), 2))
		if i%4 != 0 {
			fl = append(fl, fltr(id, "CA"+id, d1, maid, `<ACFT>`+id+`</ACFT>`))
		}
	}
	p := pkg(t, "DNLD", fl...)
	want := plan(t, p, nil, st)
	for range 5 {
		shuffled := slices.Clone(st)
		slices.Reverse(shuffled)
		shuffled = append(shuffled[7:], shuffled[:7]...)
		got := plan(t, p, nil, shuffled)
		if !slices.Equal(planned(got), planned(want)) {
			t.Fatalf("order\n got %v\nwant %v", planned(got), planned(want))
		}
		for i, f := range got.Flights {
			w := want.Flights[i]
			if f.Group != w.Group || len(f.Decision.Events) != len(w.Decision.Events) {
				t.Fatalf("%s differs", f.FLID)
			}
			for k := range f.Decision.Events {
				if string(f.Decision.Events[k].Payload) != string(w.Decision.Events[k].Payload) {
					t.Fatalf("%s event %d differs", f.FLID, k)
				}
			}
		}
	}
}

func TestPlanBatches(t *testing.T) {
	// Records U, A..F, G, V, H, M: the group of M (carried, with two joining children G and H)
	// sits at G's place; U and V are unchanged; W is deleted.
	st := []flight.Flight{
		stored(t, fltr("M", "CA0", d1, "", ""), 1),
		stored(t, fltr("U", "CU", d1, "", ""), 1),
		stored(t, fltr("V", "CV", d1, "", ""), 1),
		stored(t, fltr("W", "CW", d1, "", ""), 1),
	}
	fl := []string{fltr("U", "CU", d1, "", "")}
	for _, id := range []string{"A", "B", "C", "D", "E", "F"} {
		fl = append(fl, fltr(id, "C"+id, d1, "", ""))
	}
	fl = append(fl, fltr("G", "CG", d1, "M", ""), fltr("V", "CV", d1, "", ""), fltr("H", "CH", d1, "M", ""), fltr("M", "CA0", d1, "", ""))
	pl := plan(t, pkg(t, "DNLD", fl...), nil, st)
	if len(pl.WithMaster) != 0 {
		t.Fatalf("deleted with their master %v", pl.WithMaster)
	}
	if got, want := ids(pl.Flights), []string{"U", "A", "B", "C", "D", "E", "F", "G", "H", "M", "V", "W"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	cases := []struct {
		n    int
		want [][]string
	}{
		{2, [][]string{{"U", "A", "B"}, {"C", "D"}, {"E", "F"}, {"G", "H", "M"}, {"V", "W"}}},
		{4, [][]string{{"U", "A", "B", "C", "D"}, {"E", "F"}, {"G", "H", "M", "V", "W"}}},
		{1, [][]string{{"U", "A"}, {"B"}, {"C"}, {"D"}, {"E"}, {"F"}, {"G", "H", "M"}, {"V", "W"}}},
		{0, [][]string{ids(pl.Flights)}},
	}
	for _, tc := range cases {
		bs := pl.Batches(tc.n)
		var got [][]string
		for _, b := range bs {
			got = append(got, ids(b))
		}
		if !slices.EqualFunc(got, tc.want, slices.Equal[[]string]) {
			t.Errorf("Batches(%d)\n got %v\nwant %v", tc.n, got, tc.want)
		}
	}
	o := pl.Batches(2)[3].Outcome()
	if len(o.Writes) != 3 || len(o.Events) != 6 || len(o.Project) != 3 || o.Writes[2].FLID != "M" || len(o.Writes[2].MAFL) != 2 {
		t.Errorf("outcome writes %d events %d project %d: %+v", len(o.Writes), len(o.Events), len(o.Project), o.Writes)
	}
	if o := pl.Batches(2)[0].Outcome(); len(o.Writes) != 2 || len(o.Project) != 3 {
		t.Errorf("an unchanged flight is projected, not written: %d %d", len(o.Writes), len(o.Project))
	}
	if bs := (flight.Plan{}).Batches(5); bs != nil {
		t.Errorf("an empty plan has no batch: %v", bs)
	}
}
