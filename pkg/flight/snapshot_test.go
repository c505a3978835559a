package flight_test

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

var (
	d1 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	d2 = d1.AddDate(0, 0, 1)
	d3 = d1.AddDate(0, 0, 2)
	// snapDays is the airport's rule in these tests: Shanghai, cut-over at midnight.
	snapDays = flight.DayRule{Zone: shanghai}
)

// schd decodes a SCHD package through the real codec; recs "" leaves RECS out.
func schd(t testing.TB, styp, recs string, fltrs ...string) *sis.Schd {
	t.Helper()
	var b strings.Builder
	b.WriteString(`<MSG><META><SNDR>AODB</SNDR><SEQN>11</SEQN><DTTM>20261130040000</DTTM><TYPE>SCHD</TYPE><STYP>` + styp + `</STYP></META><SCHD>`)
	if recs != "" {
		b.WriteString(`<RECS>` + recs + `</RECS>`)
	}
	for _, f := range fltrs {
		b.WriteString(`<FLTR>` + f + `</FLTR>`)
	}
	b.WriteString(`</SCHD></MSG>`)
	m, err := sis.Decode(b.String(), sis.Options{})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return m.Body.(*sis.Schd)
}

// pkg is a checked package of the given records, RECS matching.
func pkg(t testing.TB, styp string, fltrs ...string) flight.Package {
	t.Helper()
	p, r := flight.ValidatePackage(schd(t, styp, strconv.Itoa(len(fltrs)), fltrs...), snapDays)
	if r != nil {
		t.Fatalf("refused: %s", r)
	}
	return p
}

// sodt is 09:00 local on day, as SIS writes it.
func sodt(day time.Time) string { return strings.ToUpper(day.Format("02Jan06")) + "0900" }

// fltr is a FLTR body: FLID, FLNO, SODT on day, MAID when set, then extra.
func fltr(flid, flno string, day time.Time, maid, extra string) string {
	s := `<FLID>` + flid + `</FLID><FLNO>` + flno + `</FLNO><SODT>` + sodt(day) + `</SODT>`
	if maid != "" {
		s += `<MAID>` + maid + `</MAID>`
	}
	return s + extra
}

func TestValidatePackage(t *testing.T) {
	ok1 := fltr("15", "CA101", d1, "", "")
	ok2 := fltr("16", "CA102", d2, "", "")
	long := strings.Repeat("9", 70) + "\n"
	cases := []struct {
		name   string
		schd   *sis.Schd
		reason string // "" = accepted
		code   string
		record int
		flid   string
	}{
		{name: "DNLD with matching RECS", schd: schd(t, "DNLD", "2", ok1, ok2)},
		{name: "RESP with matching RECS", schd: schd(t, "RESP", "1", ok1)},
		{name: "an empty DNLD declared as empty", schd: schd(t, "DNLD", "0")},
		{name: "RECS not sent", schd: schd(t, "DNLD", "", ok1), code: flight.RefuseRECSMissing,
			reason: "recs-missing: RECS not sent: without the declared count a truncated package cannot be told from a whole one, and a snapshot deletes what it omits"},
		{name: "RECS bomb", schd: schd(t, "DNLD", "999999999", ok1, ok2), code: flight.RefuseRECSMismatch,
			reason: "recs-mismatch: RECS declares 999999999 records, the package carries 2 FLTR"},
		{name: "RECS above the records: a truncated package", schd: schd(t, "RESP", "3", ok1, ok2), code: flight.RefuseRECSMismatch,
			reason: "recs-mismatch: RECS declares 3 records, the package carries 2 FLTR"},
		{name: "RECS below the records", schd: schd(t, "DNLD", "1", ok1, ok2), code: flight.RefuseRECSMismatch,
			reason: "recs-mismatch: RECS declares 1 records, the package carries 2 FLTR"},
		{name: "RECS 0 with a record", schd: schd(t, "DNLD", "0", ok1), code: flight.RefuseRECSMismatch,
			reason: "recs-mismatch: RECS declares 0 records, the package carries 1 FLTR"},
		{name: "duplicate FLID", schd: schd(t, "DNLD", "3", ok1, ok2, fltr("15", "CA999", d1, "", "")),
			code: flight.RefuseDuplicateFLID, record: 3, flid: "15",
			reason: `duplicate-flid: /MSG/SCHD/FLTR[3] FLID "15": FLID repeated (first at FLTR[1]): which record is the flight's state is ambiguous`},
		{name: "FLTR without FLID", schd: &sis.Schd{STYP: "DNLD", RECS: 2, Records: []sis.FlightRecord{schd(t, "DNLD", "1", ok1).Records[0], {}}},
			code: flight.RefuseMissingFLID, record: 2,
			reason: "missing-flid: /MSG/SCHD/FLTR[2]: FLTR without FLID: the flight is not identified"},
		{name: "SODT not sent", schd: schd(t, "DNLD", "2", ok1, `<FLID>16</FLID><FLNO>CA102</FLNO>`),
			code: flight.RefuseNoDay, record: 2, flid: "16",
			reason: `no-operation-day: /MSG/SCHD/FLTR[2] FLID "16": SODT not sent: the operation day cannot be derived`},
		{name: "SODT sent empty", schd: schd(t, "DNLD", "1", `<FLID>16</FLID><SODT></SODT>`),
			code: flight.RefuseNoDay, record: 1, flid: "16",
			reason: `no-operation-day: /MSG/SCHD/FLTR[1] FLID "16": SODT sent empty: the operation day cannot be derived`},
		{name: "seasonal SODT has no date", schd: schd(t, "RESP", "1", `<FLID>16</FLID><SODT>0930</SODT>`),
			code: flight.RefuseNoDay, record: 1, flid: "16",
			reason: `no-operation-day: /MSG/SCHD/FLTR[1] FLID "16": SODT "0930" is a seasonal time without a date: the operation day cannot be derived`},
		{name: "the first failure in document order wins", schd: schd(t, "DNLD", "3", ok1, `<FLID>16</FLID>`, ok1),
			code: flight.RefuseNoDay, record: 2, flid: "16",
			reason: `no-operation-day: /MSG/SCHD/FLTR[2] FLID "16": SODT not sent: the operation day cannot be derived`},
		{name: "a hostile FLID is quoted and cut", schd: &sis.Schd{STYP: "DNLD", RECS: 2, Records: []sis.FlightRecord{{FLID: long}, {FLID: long}}},
			code: flight.RefuseNoDay, record: 1, flid: long,
			reason: `no-operation-day: /MSG/SCHD/FLTR[1] FLID "` + strings.Repeat("9", 64) + `"…: SODT not sent: the operation day cannot be derived`},
		{name: "ADFT is not a snapshot", schd: schd(t, "ADFT", "1", ok1), code: flight.RefuseNotSnapshot,
			reason: "not-a-snapshot: SCHD-ADFT is not a snapshot: only DNLD and RESP replace"},
		{name: "no body", code: flight.RefuseNotSnapshot, reason: "not-a-snapshot: no SCHD body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, r := flight.ValidatePackage(tc.schd, snapDays)
			if tc.reason == "" {
				if r != nil {
					t.Fatalf("refused: %s", r)
				}
				if p.STYP() != tc.schd.STYP || len(p.Records()) != len(tc.schd.Records) {
					t.Errorf("package %s with %d records", p.STYP(), len(p.Records()))
				}
				return
			}
			if r == nil {
				t.Fatalf("accepted, want %s", tc.code)
			}
			if r.Code != tc.code || r.Record != tc.record || r.FLID != tc.flid {
				t.Errorf("refusal %+v, want code %s record %d FLID %q", *r, tc.code, tc.record, tc.flid)
			}
			if r.String() != tc.reason {
				t.Errorf("reason\n got %s\nwant %s", r, tc.reason)
			}
			if len(p.Records()) != 0 || p.STYP() != "" {
				t.Errorf("a refused package must carry nothing: %+v", p)
			}
		})
	}
	// The codec refuses a FLTR without FLID before the rules see it; the rule above repeats the
	// check for packages built without the codec.
	_, err := sis.Decode(`<MSG><META><SNDR>A</SNDR><SEQN>1</SEQN><DTTM>20261130040000</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP></META>`+
		`<SCHD><RECS>1</RECS><FLTR><SODT>30NOV260900</SODT></FLTR></SCHD></MSG>`, sis.Options{})
	if class, _ := sis.ClassOf(err); class != sis.Malformed {
		t.Errorf("codec on a FLTR without FLID: %v, want MALFORMED", err)
	}
}

func TestValidatePackageDays(t *testing.T) {
	s := schd(t, "DNLD", "3", `<FLID>1</FLID><SODT>01DEC260230</SODT>`, `<FLID>2</FLID><SODT>01DEC260300</SODT>`, `<FLID>3</FLID><SODT>01DEC26</SODT>`)
	for _, tc := range []struct {
		cutover time.Duration
		want    []string
	}{
		{0, []string{"2026-12-01", "2026-12-01", "2026-12-01"}},
		// Before the 03:00 cut-over a flight belongs to the previous day, as for ADFT.
		{3 * time.Hour, []string{"2026-11-30", "2026-12-01", "2026-11-30"}},
	} {
		p, r := flight.ValidatePackage(s, flight.DayRule{Zone: shanghai, Cutover: tc.cutover})
		if r != nil {
			t.Fatal(r)
		}
		var got []string
		for i, rec := range p.Records() {
			if rec.Pos != i+1 || rec.Record.FLID != strconv.Itoa(i+1) {
				t.Errorf("record %d: pos %d FLID %s", i, rec.Pos, rec.Record.FLID)
			}
			got = append(got, rec.Day.Format(time.DateOnly))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("cut-over %v: days %v, want %v", tc.cutover, got, tc.want)
		}
	}
}

func TestScope(t *testing.T) {
	dnld := pkg(t, "DNLD", fltr("2", "B", d2, "", ""), fltr("1", "A", d1, "", ""), fltr("3", "C", d2, "", ""))
	resp := pkg(t, "RESP", fltr("1", "A", d1, "", ""), fltr("9", "Z", d3, "", ""))
	cst := func(d time.Time) time.Time { return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, shanghai) }
	cases := []struct {
		name    string
		p       flight.Package
		request *flight.DayRange
		want    string // the days; "" with err
		err     string
	}{
		{name: "DNLD covers its records' days", p: dnld, want: "2026-11-30,2026-12-01"},
		{name: "an empty DNLD covers no day", p: pkg(t, "DNLD"), want: ""},
		{name: "RESP covers the request's range, not its records' days", p: resp, request: &flight.DayRange{First: d1, Last: d2}, want: "2026-11-30,2026-12-01"},
		{name: "RESP range given as local midnights", p: resp, request: &flight.DayRange{First: cst(d2), Last: cst(d3)}, want: "2026-12-01,2026-12-02"},
		{name: "RESP of one day", p: resp, request: &flight.DayRange{First: d3, Last: d3}, want: "2026-12-02"},
		{name: "RESP without its request", p: resp, err: "schedule scope: a RESP needs the range of the request it answers"},
		{name: "RESP range ending before it starts", p: resp, request: &flight.DayRange{First: d2, Last: d1},
			err: "schedule scope: request range 2026-12-01..2026-11-30 ends before it starts"},
		{name: "RESP range over a year", p: resp, request: &flight.DayRange{First: d1, Last: d1.AddDate(0, 0, flight.MaxScopeDays)},
			err: "schedule scope: request range 2026-11-30..2027-12-01 is 367 days, more than 366"},
		{name: "DNLD given a request", p: dnld, request: &flight.DayRange{First: d1, Last: d1},
			err: "schedule scope: a DNLD covers its records' days, not a request range"},
		{name: "an unchecked package", p: flight.Package{}, err: "schedule scope: the package was not checked by ValidatePackage"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.p.Scope(tc.request)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.String() != tc.want || len(s.Days()) != len(strings.FieldsFunc(tc.want, func(r rune) bool { return r == ',' })) {
				t.Errorf("scope %s (%d days), want %s", s, len(s.Days()), tc.want)
			}
		})
	}
	s, _ := resp.Scope(&flight.DayRange{First: d1, Last: d2})
	inCST := cst(d2)
	for _, tc := range []struct {
		day  *time.Time
		want bool
	}{{&d1, true}, {&d2, true}, {&inCST, true}, {&d3, false}, {nil, false}} {
		if got := s.Contains(tc.day); got != tc.want {
			t.Errorf("Contains(%v) = %v, want %v", tc.day, got, tc.want)
		}
	}
}

func TestMasters(t *testing.T) {
	p := pkg(t, "DNLD", fltr("C1", "ZH1", d1, "M1", ""), fltr("C2", "ZH2", d1, "C1", ""), fltr("S", "CA9", d1, "S", ""),
		fltr("C3", "ZH3", d1, "M3", ""))
	loaded := []flight.Flight{flt("C1", "ZH1", "M2", 1), flt("X", "HU1", "M4", 1), flt("M3", "CA3", "", 1), flt("Y", "HU2", "Y", 1)}
	// M1, M2, M4: named and not loaded; C1 is in the package, M3 loaded, S and Y self-references.
	if got := p.Masters(loaded); !slices.Equal(got, []string{"M1", "M2", "M4"}) {
		t.Errorf("masters %v", got)
	}
}

// snapBase is the stored flight the goldens start from: base() placed on its operation day.
func snapBase() flight.Flight {
	f := base()
	day := d1
	f.OperationDay = &day
	return f
}

// snapRecord is base() as a FLTR: a record of it changes nothing.
const snapRecord = `<ALCD>CA</ALCD><FLNO>CA101</FLNO><MVIN>D</MVIN><SODT>30NOV260900</SODT><FLTY>J</FLTY><FLIN>D</FLIN>` +
	`<ACFT>320</ACFT><TRML>T2</TRML><GTDT GTNO="1"><GATE>A1</GATE></GTDT>`

// TestSnapshotGolden pins the record → full state merge (C-26): prior state + record → the whole
// next state (every scalar, collection and raw element), its events and the ignored tags.
func TestSnapshotGolden(t *testing.T) {
	without := func(tag string) string {
		i := strings.Index(snapRecord, "<"+tag)
		j := strings.Index(snapRecord, "</"+tag+">")
		return snapRecord[:i] + snapRecord[j+len(tag)+3:]
	}
	baseScalars := snapBase().Scalars
	scalars := func(kv ...string) map[string]string { // baseScalars with changes; "" deletes
		m := maps.Clone(baseScalars)
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	gate := map[string][]flight.Item{"GTDT": {item("1", "GATE", "A1")}}
	cases := []struct {
		name      string
		prior     func(f *flight.Flight)
		body      string
		scalars   map[string]string        // the whole next scalar set
		coll      map[string][]flight.Item // the whole next collection set
		raw       map[string][]string
		changed   []string // CHANGED of KAFKA:msg; nil = no change, no event
		ignored   []string
		wantState string // "" = ACTIVE
	}{
		{name: "the stored state again changes nothing", body: snapRecord, scalars: baseScalars, coll: gate},
		{name: "an absent scalar clears", body: without("ACFT"), scalars: scalars("ACFT", ""), coll: gate, changed: []string{"ACFT"}},
		{name: "an empty scalar clears", body: without("ACFT") + `<ACFT></ACFT>`, scalars: scalars("ACFT", ""), coll: gate, changed: []string{"ACFT"}},
		{name: "a value sets", body: without("ACFT") + `<ACFT>333</ACFT>`, scalars: scalars("ACFT", "333"), coll: gate, changed: []string{"ACFT"}},
		{name: "dynamic fields a FLOP set are cleared when the record omits them",
			prior: func(f *flight.Flight) {
				maps.Copy(f.Scalars, map[string]string{"ESTT": "30NOV260930", "ACTT": "30NOV260931", "BOTM": "30NOV260830", "BOARDING_STATUS": "BOARDING"})
			},
			body: snapRecord, scalars: baseScalars, coll: gate, changed: []string{"ACTT", "BOARDING_STATUS", "BOTM", "ESTT"}},
		{name: "BOTM and LACL in the record set their statuses", body: snapRecord + `<BOTM>30NOV260830</BOTM><LACL>30NOV260850</LACL>`,
			scalars: scalars("BOTM", "30NOV260830", "BOARDING_STATUS", "BOARDING", "LACL", "30NOV260850", "LAST_CALL_STATUS", "LAST_CALL"),
			coll:    gate, changed: []string{"BOARDING_STATUS", "BOTM", "LACL", "LAST_CALL_STATUS"}},
		{name: "an absent collection clears", body: without("GTDT"), scalars: baseScalars, coll: map[string][]flight.Item{}, changed: []string{"GTDT"}},
		{name: "a NO=0 collection is no allocation now", body: without("GTDT") + `<GTDT GTNO="0"/>`, scalars: baseScalars,
			coll: map[string][]flight.Item{"GTDT": {}}, changed: []string{"GTDT"}},
		{name: "collections replaced whole in record order, the same counter twice kept",
			prior: func(f *flight.Flight) { f.Collections["CKDT"] = []flight.Item{item("1", "CHKC", "C01")} },
			body:  snapRecord + `<CKDT CKNO="2"><CHKC>C12</CHKC><CTYP></CTYP></CKDT><CKDT CKNO="1"><CHKC>C12</CHKC></CKDT>`, scalars: baseScalars,
			coll:    map[string][]flight.Item{"GTDT": gate["GTDT"], "CKDT": {item("2", "CHKC", "C12"), item("1", "CHKC", "C12")}},
			changed: []string{"CKDT"}},
		{name: "ROUT stored as sent: every point, SCAT and SCDT kept", body: snapRecord + route(6), scalars: baseScalars,
			coll: map[string][]flight.Item{"GTDT": gate["GTDT"], "ROUT": {
				item("1", "APCD", "AP1", "SCAT", "30NOV260100", "SCDT", "30NOV260130"), item("2", "APCD", "AP2", "SCAT", "30NOV260200", "SCDT", "30NOV260230"),
				item("3", "APCD", "AP3", "SCAT", "30NOV260300", "SCDT", "30NOV260330"), item("4", "APCD", "AP4", "SCAT", "30NOV260400", "SCDT", "30NOV260430"),
				item("5", "APCD", "AP5", "SCAT", "30NOV260500", "SCDT", "30NOV260530"), item("6", "APCD", "AP6", "SCAT", "30NOV260600", "SCDT", "30NOV260630"),
			}},
			changed: []string{"ROUT"}},
		{name: "an FFID the record sends replaces the stored one", body: `<FFID>CA-CA101-D-30NOV260900-I</FFID>` + snapRecord,
			scalars: scalars("FFID", "CA-CA101-D-30NOV260900-I"), coll: gate, changed: []string{"FFID"}},
		{name: "FDIV with its destination is taken whole", body: snapRecord + `<FDIV DDES="HKG" DDIR="TO">WX</FDIV>`,
			scalars: scalars("FDIV", "WX", "FDIV_DDES", "HKG", "FDIV_DDIR", "TO"), coll: gate, changed: []string{"FDIV", "FDIV_DDES", "FDIV_DDIR"}},
		{name: "FDIV without its destination is no diversion",
			prior: func(f *flight.Flight) {
				maps.Copy(f.Scalars, map[string]string{"FDIV": "WX", "FDIV_DDES": "HKG", "FDIV_DDIR": "TO"})
			},
			body: snapRecord + `<FDIV DDIR="TO">WX</FDIV>`, scalars: baseScalars, coll: gate, changed: []string{"FDIV", "FDIV_DDES", "FDIV_DDIR"}},
		{name: "FRET without its flag is no return", body: snapRecord + `<FRET REID="">DOOR</FRET>`, scalars: baseScalars, coll: gate},
		{name: "FRET with its flag", body: snapRecord + `<FRET REID="G">DOOR</FRET>`,
			scalars: scalars("FRET", "DOOR", "FRET_REID", "G"), coll: gate, changed: []string{"FRET", "FRET_REID"}},
		{name: "a turnaround part sent empty links nothing",
			prior: func(f *flight.Flight) {
				maps.Copy(f.Scalars, map[string]string{"TAOP": "CA", "TAFL": "CA201", "TAID": "16"})
			},
			body: snapRecord + `<TAOP>CA</TAOP><TAFL></TAFL><TAID>16</TAID>`, scalars: baseScalars, coll: gate, changed: []string{"TAFL", "TAID", "TAOP"}},
		{name: "a turnaround sent whole links", body: snapRecord + `<TAOP>CA</TAOP><TAFL>CA201</TAFL><TAID>16</TAID>`,
			scalars: scalars("TAOP", "CA", "TAFL", "CA201", "TAID", "16"), coll: gate, changed: []string{"TAFL", "TAID", "TAOP"}},
		{name: "tags that are not flight state are reported, not merged",
			body:    snapRecord + `<COBT>30NOV260850</COBT><BOARDING_STATUS>X</BOARDING_STATUS><PORT><X>1</X></PORT>`,
			scalars: baseScalars, coll: gate, ignored: []string{"BOARDING_STATUS", "COBT", "PORT"}},
		{name: "SRVT kept raw as sent", body: snapRecord + `<SRVT><OPER>A</OPER></SRVT>`, scalars: baseScalars, coll: gate,
			raw: map[string][]string{"SRVT": {"<OPER>A</OPER>"}}, changed: []string{}},
		{name: "raw content the record omits is cleared", prior: func(f *flight.Flight) { f.Raw["VIPF"] = []string{"<OPER>V</OPER>"} },
			body: snapRecord, scalars: baseScalars, coll: gate, changed: []string{}},
		{name: "a deleted flight comes back", prior: func(f *flight.Flight) { f.State = flight.Deleted },
			// a deleted master carries no MAFL; back, it carries its children's again
			body: snapRecord, scalars: baseScalars, coll: gate, changed: []string{"MAFL", "STATE"}},
		{name: "MAID makes it a child: it carries no MAFL", body: snapRecord + `<MAID>M</MAID>`,
			scalars: scalars("MAID", "M"), coll: gate, changed: []string{"MAFL", "MAID"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prior := snapBase()
			if tc.prior != nil {
				tc.prior(&prior)
			}
			frozen := prior.Clone()
			rec := schd(t, "DNLD", "1", `<FLID>15</FLID>`+tc.body).Records[0]
			kids := []flight.Flight{flt("C1", "ZH1", "15", 1)}
			d := flight.ApplySnapshot(&prior, flight.Input{MsgID: 200, STYP: "DNLD", Now: now, Record: rec, Children: kids}, d1)
			if !flight.SameContent(prior, frozen) || prior.Version != frozen.Version {
				t.Fatal("the rule changed its input state")
			}
			if d.Skip != "" {
				t.Fatalf("skip %s", d.Skip)
			}
			if !maps.Equal(d.Next.Scalars, tc.scalars) {
				t.Errorf("scalars\n got %v\nwant %v", d.Next.Scalars, tc.scalars)
			}
			if !reflect.DeepEqual(d.Next.Collections, tc.coll) {
				t.Errorf("collections\n got %v\nwant %v", d.Next.Collections, tc.coll)
			}
			raw := tc.raw
			if raw == nil {
				raw = map[string][]string{}
			}
			if !reflect.DeepEqual(d.Next.Raw, raw) {
				t.Errorf("raw %v, want %v", d.Next.Raw, raw)
			}
			if want := cmpOr(tc.wantState, flight.Active); d.Next.State != want {
				t.Errorf("state %s, want %s", d.Next.State, want)
			}
			if d.Next.OperationDay == nil || !d.Next.OperationDay.Equal(d1) {
				t.Errorf("operation day %v", d.Next.OperationDay)
			}
			if flight.IsChild(d.Next) && d.Next.MAFL != nil {
				t.Errorf("a child carries no MAFL: %v", d.Next.MAFL)
			}
			if !flight.IsChild(d.Next) && !slices.Equal(d.Next.MAFL, []flight.Share{{FLID: "C1", FLNO: "ZH1"}}) {
				t.Errorf("a master carries its MAFL: %v", d.Next.MAFL)
			}
			if !slices.Equal(d.Ignored, tc.ignored) {
				t.Errorf("ignored %v, want %v", d.Ignored, tc.ignored)
			}
			checkEvents(t, d, frozen, tc.changed, 200)
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestSnapshotUnlikeADFT runs one record through both schedule rules: ADFT keeps what the record
// omits or sends empty, the snapshot clears it (R-SCHD-1).
func TestSnapshotUnlikeADFT(t *testing.T) {
	prior := snapBase()
	prior.Scalars["RENO"] = "B1234"
	prior.Collections["CKDT"] = []flight.Item{item("1", "CHKC", "C01")}
	rec := schd(t, "DNLD", "1", `<FLID>15</FLID><FLNO>CA101</FLNO><SODT>30NOV260900</SODT><RENO></RENO><ESTT>30NOV260930</ESTT>`).Records[0]
	in := flight.Input{MsgID: 7, STYP: "DNLD", Now: now, Record: rec}
	a := flight.ApplyADFT(&prior, in, snapDays)
	s := flight.ApplySnapshot(&prior, in, d1)
	if a.Next.Scalars["RENO"] != "B1234" || a.Next.Scalars["ACFT"] != "320" || len(a.Next.Collections["CKDT"]) != 1 || a.Next.Scalars["ESTT"] == "" {
		t.Errorf("ADFT must stay set-only: %v %v", a.Next.Scalars, a.Next.Collections)
	}
	want := map[string]string{"FFID": prior.Scalars["FFID"], "FLNO": "CA101", "SODT": "30NOV260900", "ESTT": "30NOV260930"}
	if !maps.Equal(s.Next.Scalars, want) || len(s.Next.Collections) != 0 {
		t.Errorf("snapshot must replace: %v %v", s.Next.Scalars, s.Next.Collections)
	}
}

// A new flight is created on the record's day, above a FLID's archived versions.
func TestSnapshotNewFlight(t *testing.T) {
	rec := schd(t, "RESP", "1", fltr("77", "CA77", d2, "", "")).Records[0]
	for _, tc := range []struct {
		floor, want int64
	}{{0, 1}, {8, 9}} {
		d := flight.ApplySnapshot(nil, flight.Input{MsgID: 3, STYP: "RESP", Now: now, Record: rec, VersionFloor: tc.floor}, d2)
		if !d.Changed || d.Next.Version != tc.want || !d.Next.CreatedAt.Equal(now) || d.Next.State != flight.Active {
			t.Errorf("floor %d: %+v", tc.floor, d.Next)
		}
		if d.Next.OperationDay == nil || !d.Next.OperationDay.Equal(d2) {
			t.Errorf("operation day %v", d.Next.OperationDay)
		}
	}
	// A stored flight without a day takes the record's; an existing day is never re-derived.
	nodDay := snapBase()
	nodDay.OperationDay = nil
	if d := flight.ApplySnapshot(&nodDay, flight.Input{MsgID: 4, STYP: "DNLD", Now: now,
		Record: schd(t, "DNLD", "1", `<FLID>15</FLID>`+snapRecord).Records[0]}, d1); !d.Changed || !d.Next.OperationDay.Equal(d1) {
		t.Errorf("day-less flight: changed %v day %v", d.Changed, d.Next.OperationDay)
	}
}
