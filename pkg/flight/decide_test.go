package flight_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

var shanghai = time.FixedZone("CST", 8*3600)

func adft(t testing.TB, inner string) sis.FlightRecord {
	t.Helper()
	x := `<MSG><META><SNDR>AODB</SNDR><SEQN>9</SEQN><DTTM>20261130090000</DTTM><TYPE>SCHD</TYPE><STYP>ADFT</STYP></META>` +
		`<SCHD><RECS>1</RECS><FLTR>` + inner + `</FLTR></SCHD></MSG>`
	m, err := sis.Decode(x, sis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m.Body.(*sis.Schd).Records[0]
}

func TestFDEL(t *testing.T) {
	rec, _ := decode(t, "15", "FDEL", `<FDEL/>`)
	in := flight.Input{MsgID: 300, STYP: "FDEL", Now: now, Record: rec}
	cur := base()
	cur.Collections["CKDT"] = []flight.Item{item("1", "CHKC", "C01")}

	d := flight.ApplyFDEL(&cur, in)
	if !d.Changed || d.Next.State != flight.Deleted || d.Next.Version != cur.Version+1 {
		t.Fatalf("first FDEL: %+v", d)
	}
	if !slices.Equal(flight.Changed(cur, d.Next), []string{"STATE"}) || len(d.Next.Collections["CKDT"]) != 1 {
		t.Errorf("the detail rows must be kept: %v", d.Next.Collections)
	}
	if len(d.Events) != 2 || d.Events[0].Type != flight.Tombstone || d.Events[1].Type != flight.Tombstone ||
		d.Events[1].Payload != nil || d.Events[0].Target != flight.TargetMsg || d.Events[1].Target != flight.TargetSchd {
		t.Errorf("tombstones: %+v", d.Events)
	}
	again := flight.ApplyFDEL(&d.Next, in)
	if again.Changed || len(again.Events) != 0 || again.Skip != "" || again.Next.Version != d.Next.Version {
		t.Errorf("repeated FDEL must be an idempotent success: %+v", again)
	}
	unknown := flight.ApplyFDEL(nil, in)
	if unknown.Changed || unknown.Skip != "" || len(unknown.Events) != 0 {
		t.Errorf("FDEL of an unknown flight must be an idempotent success: %+v", unknown)
	}
}

func TestADFTSetOnly(t *testing.T) {
	days := flight.DayRule{Zone: shanghai, Cutover: 3 * time.Hour}
	t.Run("new flight gets its operation day from SODT", func(t *testing.T) {
		rec := adft(t, `<FLID>77</FLID><ALCD>CA</ALCD><FLNO>CA77</FLNO><MVIN>D</MVIN><SODT>01DEC260230</SODT><RENO></RENO>`)
		d := flight.ApplyADFT(nil, flight.Input{MsgID: 1, STYP: "ADFT", Now: now, Record: rec}, days)
		if !d.Changed || d.Next.Version != 1 || d.Next.State != flight.Active || !d.Next.CreatedAt.Equal(now) {
			t.Fatalf("%+v", d)
		}
		// 02:30 local is before the 03:00 cut-over: it belongs to 30 Nov.
		if d.Next.OperationDay == nil || d.Next.OperationDay.Format(time.DateOnly) != "2026-11-30" {
			t.Errorf("operation day = %v, want 2026-11-30", d.Next.OperationDay)
		}
		if _, ok := d.Next.Scalars["RENO"]; ok {
			t.Errorf("an empty tag in ADFT must not set a value")
		}
	})
	t.Run("present fields set, absent and empty fields stay", func(t *testing.T) {
		cur := base()
		cur.Scalars["RENO"] = "B1234"
		day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
		cur.OperationDay = &day
		rec := adft(t, `<FLID>15</FLID><ACFT>333</ACFT><RENO></RENO><SODT>02DEC261000</SODT><COBT>02DEC260950</COBT>`)
		d := flight.ApplyADFT(&cur, flight.Input{MsgID: 2, STYP: "ADFT", Now: now, Record: rec}, days)
		if _, ok := d.Next.Scalars["COBT"]; ok || !slices.Equal(d.Ignored, []string{"COBT"}) {
			t.Errorf("a tag that is not flight state must be reported, not merged: ignored=%v", d.Ignored)
		}
		if d.Next.Scalars["ACFT"] != "333" || d.Next.Scalars["RENO"] != "B1234" || d.Next.Scalars["TRML"] != "T2" {
			t.Errorf("set-only merge: %v", d.Next.Scalars)
		}
		if d.Next.OperationDay.Format(time.DateOnly) != "2026-11-30" {
			t.Errorf("an existing operation day is kept, got %v", d.Next.OperationDay)
		}
		if !slices.Equal(flight.Changed(cur, d.Next), []string{"ACFT", "SODT"}) {
			t.Errorf("changed = %v", flight.Changed(cur, d.Next))
		}
	})
	t.Run("an unparsable or seasonal SODT leaves the day unknown", func(t *testing.T) {
		rec := adft(t, `<FLID>78</FLID><SODT>0930</SODT>`)
		d := flight.ApplyADFT(nil, flight.Input{MsgID: 1, STYP: "ADFT", Now: now, Record: rec}, days)
		if d.Next.OperationDay != nil {
			t.Errorf("operation day = %v, want nil", d.Next.OperationDay)
		}
	})
}

func TestOperationDay(t *testing.T) {
	cases := []struct {
		local   string
		cutover time.Duration
		want    string
	}{
		{"2026-12-01 00:10", 0, "2026-12-01"},
		{"2026-12-01 00:10", 3 * time.Hour, "2026-11-30"},
		{"2026-12-01 03:00", 3 * time.Hour, "2026-12-01"},
		{"2026-12-01 23:59", 3 * time.Hour, "2026-12-01"},
	}
	for _, tc := range cases {
		at, _ := time.ParseInLocation("2006-01-02 15:04", tc.local, shanghai)
		got := flight.DayRule{Zone: shanghai, Cutover: tc.cutover}.OperationDay(at.UTC()).Format(time.DateOnly)
		if got != tc.want {
			t.Errorf("%s cut-over %v: %s, want %s", tc.local, tc.cutover, got, tc.want)
		}
	}
}

// flt is an active flight with a FLNO and an optional MAID at version v.
func flt(flid, flno, maid string, v int64) flight.Flight {
	f := flight.New(flid)
	f.Version = v
	f.Scalars["FLNO"] = flno
	if maid != "" {
		f.Scalars["MAID"] = maid
	}
	return f
}

func mafl(t *testing.T, o flight.Outcome, flid string) (flight.Flight, bool) {
	t.Helper()
	for _, w := range o.Writes {
		if w.FLID == flid {
			return w, true
		}
	}
	return flight.Flight{}, false
}

func TestCodeShare(t *testing.T) {
	days := flight.DayRule{Zone: shanghai}
	master := flt("M", "CA100", "", 5)
	c1 := flt("C1", "ZH100", "M", 2)
	c2 := flt("C2", "MU100", "M", 2)

	t.Run("new child joins the master's MAFL, master bumped with its own events", func(t *testing.T) {
		rec := adft(t, `<FLID>C3</FLID><FLNO>HU100</FLNO><MAID>M</MAID>`)
		in := flight.Input{MsgID: 10, STYP: "ADFT", Now: now, Record: rec}
		g := flight.Group{Masters: map[string]flight.Flight{"M": master}, Siblings: map[string][]flight.Flight{"M": {c2, c1}}}
		o := flight.Decide(flight.KindADFT, nil, in, g, days)
		if len(o.Writes) != 2 || o.Writes[0].FLID != "C3" || o.Writes[0].MAFL != nil {
			t.Fatalf("writes %+v", o.Writes)
		}
		m, ok := mafl(t, o, "M")
		want := []flight.Share{{"C1", "ZH100"}, {"C2", "MU100"}, {"C3", "HU100"}}
		if !ok || !slices.Equal(m.MAFL, want) || m.Version != 6 || m.LastMsgID != 10 {
			t.Fatalf("master %+v", m)
		}
		if len(o.Events) != 4 || o.Events[2].FLID != "M" || o.Events[3].FLID != "M" || o.Events[3].Target != flight.TargetSchd {
			t.Fatalf("events %+v", o.Events)
		}
		var doc struct{ MAFL []flight.Share }
		if err := json.Unmarshal(o.Events[3].Payload, &doc); err != nil || !slices.Equal(doc.MAFL, want) {
			t.Errorf("master document MAFL = %v (%v)", doc.MAFL, err)
		}
		var note struct {
			CHANGED []string
			VIA     string
		}
		_ = json.Unmarshal(o.Events[2].Payload, &note)
		if !slices.Equal(note.CHANGED, []string{"MAFL"}) || note.VIA != "C3" {
			t.Errorf("master note %+v", note)
		}
		if len(o.Project) != 2 {
			t.Errorf("project %d flights, want child and master", len(o.Project))
		}
	})
	t.Run("MAFL is byte-stable whatever the sibling order", func(t *testing.T) {
		in := flight.Input{MsgID: 10, STYP: "ADFT", Now: now, Record: adft(t, `<FLID>C3</FLID><FLNO>HU100</FLNO><MAID>M</MAID>`)}
		a := flight.Decide(flight.KindADFT, nil, in, flight.Group{Masters: map[string]flight.Flight{"M": master},
			Siblings: map[string][]flight.Flight{"M": {c1, c2}}}, days)
		b := flight.Decide(flight.KindADFT, nil, in, flight.Group{Masters: map[string]flight.Flight{"M": master},
			Siblings: map[string][]flight.Flight{"M": {c2, c1}}}, days)
		if string(a.Events[3].Payload) != string(b.Events[3].Payload) {
			t.Errorf("master documents differ:\n%s\n%s", a.Events[3].Payload, b.Events[3].Payload)
		}
	})
	t.Run("a child change that leaves the MAFL alone does not touch the master", func(t *testing.T) {
		rec, _ := decode(t, "C1", "ESTT", `<ESTT>30NOV261000</ESTT>`)
		in := flight.Input{MsgID: 11, STYP: "ESTT", Now: now, Record: rec}
		o := flight.Decide(flight.KindFLOP, &c1, in, flight.Group{Masters: map[string]flight.Flight{"M": master},
			Siblings: map[string][]flight.Flight{"M": {c1, c2}}}, days)
		if len(o.Writes) != 1 || o.Writes[0].FLID != "C1" || len(o.Events) != 2 {
			t.Fatalf("writes %+v events %d", o.Writes, len(o.Events))
		}
		if len(o.Project) != 2 || o.Project[1].FLID != "M" || len(o.Project[1].MAFL) != 2 {
			t.Errorf("the master is still projected with its MAFL: %+v", o.Project)
		}
	})
	t.Run("deleting a child recomputes the master", func(t *testing.T) {
		rec, _ := decode(t, "C1", "FDEL", `<FDEL/>`)
		in := flight.Input{MsgID: 12, STYP: "FDEL", Now: now, Record: rec}
		o := flight.Decide(flight.KindFDEL, &c1, in, flight.Group{Masters: map[string]flight.Flight{"M": master},
			Siblings: map[string][]flight.Flight{"M": {c1, c2}}}, days)
		m, ok := mafl(t, o, "M")
		if !ok || !slices.Equal(m.MAFL, []flight.Share{{"C2", "MU100"}}) || m.Version != 6 {
			t.Fatalf("master %+v", m)
		}
		if o.Writes[0].State != flight.Deleted || o.Events[0].Type != flight.Tombstone {
			t.Errorf("child not deleted: %+v", o.Writes[0])
		}
	})
	t.Run("deleting a master deletes its children in the same outcome", func(t *testing.T) {
		rec, _ := decode(t, "M", "FDEL", `<FDEL/>`)
		other := flt("X", "XX1", "OTHER", 1)
		in := flight.Input{MsgID: 13, STYP: "FDEL", Now: now, Record: rec, Children: []flight.Flight{c1, c2, other}}
		o := flight.Decide(flight.KindFDEL, &master, in, flight.Group{}, days)
		var ids []string
		for _, w := range o.Writes {
			if w.State != flight.Deleted {
				t.Errorf("%s not deleted", w.FLID)
			}
			ids = append(ids, w.FLID)
		}
		if !slices.Equal(ids, []string{"M", "C1", "C2"}) || len(o.Events) != 6 {
			t.Fatalf("writes %v events %d", ids, len(o.Events))
		}
		if o.Writes[1].Version != 3 {
			t.Errorf("child version %d, want 3", o.Writes[1].Version)
		}
		// Re-run: everything already deleted, nothing written, the deletions projected again.
		deleted := []flight.Flight{o.Writes[1], o.Writes[2]}
		again := flight.Decide(flight.KindFDEL, &o.Writes[0], flight.Input{MsgID: 13, STYP: "FDEL", Now: now, Record: rec, Children: deleted},
			flight.Group{}, days)
		if len(again.Writes) != 0 || len(again.Events) != 0 || len(again.Project) != 3 {
			t.Errorf("re-run writes %d events %d project %d", len(again.Writes), len(again.Events), len(again.Project))
		}
	})
	t.Run("self-reference is never in a MAFL", func(t *testing.T) {
		self := flt("S", "CA9", "S", 1)
		if flight.IsChild(self) {
			t.Fatal("MAID = FLID must not make a child")
		}
		rec, _ := decode(t, "S", "ESTT", `<ESTT>30NOV261000</ESTT>`)
		o := flight.Decide(flight.KindFLOP, &self, flight.Input{MsgID: 14, STYP: "ESTT", Now: now, Record: rec,
			Children: []flight.Flight{self}}, flight.Group{}, days)
		if o.Writes[0].MAFL != nil {
			t.Errorf("MAFL = %v", o.Writes[0].MAFL)
		}
	})
	t.Run("a dangling MAID does not block the child", func(t *testing.T) {
		orphan := flt("O", "CA8", "GONE", 1)
		rec, _ := decode(t, "O", "ESTT", `<ESTT>30NOV261000</ESTT>`)
		o := flight.Decide(flight.KindFLOP, &orphan, flight.Input{MsgID: 15, STYP: "ESTT", Now: now, Record: rec}, flight.Group{}, days)
		if o.Skip != "" || len(o.Writes) != 1 || len(o.Project) != 1 {
			t.Errorf("%+v", o)
		}
	})
	t.Run("a child moving to another master updates both", func(t *testing.T) {
		other := flt("N", "CA200", "", 1)
		rec := adft(t, `<FLID>C1</FLID><MAID>N</MAID>`)
		o := flight.Decide(flight.KindADFT, &c1, flight.Input{MsgID: 16, STYP: "ADFT", Now: now, Record: rec},
			flight.Group{Masters: map[string]flight.Flight{"M": master, "N": other},
				Siblings: map[string][]flight.Flight{"M": {c1, c2}}}, days)
		m, _ := mafl(t, o, "M")
		n, _ := mafl(t, o, "N")
		if !slices.Equal(m.MAFL, []flight.Share{{"C2", "MU100"}}) || !slices.Equal(n.MAFL, []flight.Share{{"C1", "ZH100"}}) {
			t.Errorf("M %v N %v", m.MAFL, n.MAFL)
		}
	})
	t.Run("a master's own document carries its MAFL", func(t *testing.T) {
		rec, _ := decode(t, "M", "ESTT", `<ESTT>30NOV261000</ESTT>`)
		o := flight.Decide(flight.KindFLOP, &master, flight.Input{MsgID: 17, STYP: "ESTT", Now: now, Record: rec,
			Children: []flight.Flight{c2, c1}}, flight.Group{}, days)
		if !slices.Equal(o.Writes[0].MAFL, []flight.Share{{"C1", "ZH100"}, {"C2", "MU100"}}) {
			t.Errorf("MAFL %v", o.Writes[0].MAFL)
		}
		var note struct{ CHANGED []string }
		_ = json.Unmarshal(o.Events[0].Payload, &note)
		if slices.Contains(note.CHANGED, "MAFL") || !slices.Contains(note.CHANGED, "ESTT") {
			t.Errorf("CHANGED = %v: a loaded master must not see its derived MAFL as a change", note.CHANGED)
		}
	})
}

// TestDocumentGolden pins the published document's bytes (KAFKA:schd and Redis).
func TestDocumentGolden(t *testing.T) {
	f := base()
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	f.OperationDay = &day
	f.Collections["ROUT"] = []flight.Item{item("1", "APCD", "PEK")}
	f.Raw["SRVT"] = []string{"<OPER>X</OPER>"}
	f.MAFL = []flight.Share{{"C1", "ZH100"}}
	got := string(flight.Document(f))
	const path = "testdata/document.golden.json"
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got+"\n" != string(want) {
		t.Errorf("document\n got %s\nwant %s", got, want)
	}
	if strings.Contains(got, "SRVT") {
		t.Error("SRVT must not be published")
	}
}

// The document of a state held in memory (nanoseconds) and of the same state read back from
// PostgreSQL (microseconds) are the same bytes: the consistency check compares exactly these.
func TestDocumentSameAfterPostgreSQLPrecision(t *testing.T) {
	f := base()
	f.UpdatedAt = time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.UTC)
	stored := f
	stored.UpdatedAt = f.UpdatedAt.Truncate(time.Microsecond)
	if a, b := flight.Document(f), flight.Document(stored); string(a) != string(b) {
		t.Errorf("in memory %s\nread back %s", a, b)
	}
}
