package flight_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

var now = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

// decode builds the decoded message the pump would hand the rules, through the real codec.
func decode(t testing.TB, flid, styp, inner string) (sis.FlightRecord, string) {
	t.Helper()
	x := fmt.Sprintf(`<MSG><META><SNDR>AODB</SNDR><SEQN>7</SEQN><DTTM>20261130090000</DTTM><TYPE>FLOP</TYPE>`+
		`<STYP>%s</STYP></META><FLOP><FLID>%s</FLID><FFID>CA-CA101-D-30NOV260900-D</FFID>%s</FLOP></MSG>`, styp, flid, inner)
	m, err := sis.Decode(x, sis.Options{})
	if err != nil {
		t.Fatalf("decode %s: %v", styp, err)
	}
	b, ok := m.Body.(*sis.Flop)
	if !ok {
		t.Fatalf("decode %s: body %T, want *sis.Flop", styp, m.Body)
	}
	return b.Record, m.Meta.STYP
}

// base is the prior state every golden case starts from (a departure with a plan).
func base() flight.Flight {
	f := flight.New("15")
	f.Version = 3
	f.LastMsgID = 100
	f.CreatedAt = now.Add(-time.Hour)
	f.UpdatedAt = now.Add(-time.Minute)
	f.Scalars = map[string]string{
		"FFID": "CA-CA101-D-30NOV260900-D", "ALCD": "CA", "FLNO": "CA101", "MVIN": "D", "SODT": "30NOV260900",
		"FLTY": "J", "FLIN": "D", "ACFT": "320", "TRML": "T2",
	}
	f.Collections = map[string][]flight.Item{
		"GTDT": {{Seq: "1", Fields: map[string]string{"GATE": "A1"}}},
	}
	return f
}

func item(seq string, kv ...string) flight.Item {
	it := flight.Item{Seq: seq, Fields: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		it.Fields[kv[i]] = kv[i+1]
	}
	return it
}

// TestFLOPGolden pins every row of the FLOP table (R-FLOP-1) and the legacy extras: input + prior
// state → target state, terminal state and events.
// Guards R-INV-19.
func TestFLOPGolden(t *testing.T) {
	cases := []struct {
		name, styp, body string
		prior            map[string]string        // scalars added to base() before the message
		priorColl        map[string][]flight.Item // collections added to base()
		mvin             string                   // overrides base MVIN ("" keeps D)
		want             map[string]string        // scalar changes: "" = must be absent after
		wantColl         map[string][]flight.Item // collections expected after (whole)
		changed          []string                 // CHANGED of the KAFKA:msg event; nil = no change, no event
		ignored          []string
	}{
		{name: "ACFT set", styp: "ACFT", body: `<ACFT>359</ACFT>`, want: map[string]string{"ACFT": "359"}, changed: []string{"ACFT"}},
		{name: "ACFT same value changes nothing", styp: "ACFT", body: `<ACFT>320</ACFT>`},
		{name: "ACTT set", styp: "ACTT", body: `<ACTT>30NOV260912</ACTT>`, want: map[string]string{"ACTT": "30NOV260912"}, changed: []string{"ACTT"}},
		{name: "ACTT empty clears the actual time", styp: "ACTT", body: `<ACTT></ACTT>`, prior: map[string]string{"ACTT": "30NOV260912"},
			want: map[string]string{"ACTT": ""}, changed: []string{"ACTT"}},
		{name: "BOTM sets the time and the boarding status", styp: "BOTM", body: `<BOTM>30NOV260825</BOTM>`,
			want: map[string]string{"BOTM": "30NOV260825", "BOARDING_STATUS": "BOARDING"}, changed: []string{"BOARDING_STATUS", "BOTM"}},
		{name: "BOTM empty clears the time and resets the status", styp: "BOTM", body: `<BOTM/>`,
			prior: map[string]string{"BOTM": "30NOV260825", "BOARDING_STATUS": "BOARDING"},
			want:  map[string]string{"BOTM": "", "BOARDING_STATUS": ""}, changed: []string{"BOARDING_STATUS", "BOTM"}},
		{name: "CHOT replaced whole, empty CHTM deletes that chocks time", styp: "CHOT",
			body:      `<CHOT CSNO="1"><CHTM>30NOV260915</CHTM><CHID>ON</CHID></CHOT><CHOT CSNO="2"><CHTM></CHTM><CHID>OFF</CHID></CHOT>`,
			priorColl: map[string][]flight.Item{"CHOT": {item("1", "CHTM", "30NOV260910", "CHID", "ON"), item("2", "CHTM", "30NOV260920", "CHID", "OFF")}},
			wantColl:  map[string][]flight.Item{"CHOT": {item("1", "CHTM", "30NOV260915", "CHID", "ON"), item("2", "CHID", "OFF")}},
			changed:   []string{"CHOT"}},
		{name: "FLTY set", styp: "FLTY", body: `<FLTY>C</FLTY>`, want: map[string]string{"FLTY": "C"}, changed: []string{"FLTY"}},
		{name: "CKDT replaced whole in message order, same counter twice kept", styp: "CKDT",
			body:      `<CKDT CKNO="2"><CHKC>C12</CHKC><CTYP>D</CTYP></CKDT><CKDT CKNO="1"><CHKC>C12</CHKC></CKDT>`,
			priorColl: map[string][]flight.Item{"CKDT": {item("1", "CHKC", "C01"), item("2", "CHKC", "C02"), item("3", "CHKC", "C03")}},
			wantColl:  map[string][]flight.Item{"CKDT": {item("2", "CHKC", "C12", "CTYP", "D"), item("1", "CHKC", "C12")}},
			changed:   []string{"CKDT"}},
		{name: "CKDT CKNO=0 is no counter allocation now", styp: "CKDT", body: `<CKDT CKNO="0"/>`,
			priorColl: map[string][]flight.Item{"CKDT": {item("1", "CHKC", "C01")}},
			wantColl:  map[string][]flight.Item{"CKDT": {}}, changed: []string{"CKDT"}},
		{name: "CLDT set", styp: "CLDT", body: `<CLDT CLNO="1"><BELT>B3</BELT><BTYP>D</BTYP></CLDT>`,
			wantColl: map[string][]flight.Item{"CLDT": {item("1", "BELT", "B3", "BTYP", "D")}}, changed: []string{"CLDT"}},
		{name: "CLDT CLNO=0 is no belt allocation now", styp: "CLDT", body: `<CLDT CLNO="0"></CLDT>`,
			priorColl: map[string][]flight.Item{"CLDT": {item("1", "BELT", "B3")}},
			wantColl:  map[string][]flight.Item{"CLDT": {}}, changed: []string{"CLDT"}},
		{name: "CHDT keeps its class fields as CCLS/CTYP", styp: "CHDT",
			body:     `<CHDT CHNO="1"><CHUT>CH0021</CHUT><CCLS>X</CCLS><CBTM>15DEC031520</CBTM><CTYP>D</CTYP></CHDT>`,
			wantColl: map[string][]flight.Item{"CHDT": {item("1", "CHUT", "CH0021", "CCLS", "X", "CBTM", "15DEC031520", "CTYP", "D")}},
			changed:  []string{"CHDT"}},
		{name: "CHDT CHNO=0 is no chute allocation now", styp: "CHDT", body: `<CHDT CHNO="0"/>`,
			wantColl: map[string][]flight.Item{"CHDT": {}}, changed: []string{"CHDT"}},
		{name: "CNCL sets the cancellation", styp: "CNCL", body: `<CNCL>30NOV260700</CNCL>`,
			want: map[string]string{"CNCL": "30NOV260700"}, changed: []string{"CNCL"}},
		{name: "CNCL empty undoes the cancellation", styp: "CNCL", body: `<CNCL></CNCL>`, prior: map[string]string{"CNCL": "30NOV260700"},
			want: map[string]string{"CNCL": ""}, changed: []string{"CNCL"}},
		{name: "ESTT set", styp: "ESTT", body: `<ESTT>30NOV260930</ESTT>`, want: map[string]string{"ESTT": "30NOV260930"}, changed: []string{"ESTT"}},
		{name: "ESTT empty deletes the estimate", styp: "ESTT", body: `<ESTT/>`, prior: map[string]string{"ESTT": "30NOV260930"},
			want: map[string]string{"ESTT": ""}, changed: []string{"ESTT"}},
		{name: "FDIV sets destination, direction and reason", styp: "FDIV", body: `<FDIV DDES="HKG" DDIR="TO">INCLEMENT WEATHER</FDIV>`,
			want:    map[string]string{"FDIV": "INCLEMENT WEATHER", "FDIV_DDES": "HKG", "FDIV_DDIR": "TO"},
			changed: []string{"FDIV", "FDIV_DDES", "FDIV_DDIR"}},
		{name: "FDIV DDES empty clears the diversion", styp: "FDIV", body: `<FDIV DDES="" DDIR="TO">INCLEMENT WEATHER</FDIV>`,
			prior: map[string]string{"FDIV": "INCLEMENT WEATHER", "FDIV_DDES": "HKG", "FDIV_DDIR": "TO"},
			want:  map[string]string{"FDIV": "", "FDIV_DDES": "", "FDIV_DDIR": ""}, changed: []string{"FDIV", "FDIV_DDES", "FDIV_DDIR"}},
		{name: "FDIV DDIR empty clears only the direction", styp: "FDIV", body: `<FDIV DDES="HKG" DDIR="">INCLEMENT WEATHER</FDIV>`,
			prior: map[string]string{"FDIV": "INCLEMENT WEATHER", "FDIV_DDES": "HKG", "FDIV_DDIR": "TO"},
			want:  map[string]string{"FDIV_DDIR": ""}, changed: []string{"FDIV_DDIR"}},
		{name: "FINT set", styp: "FINT", body: `<FINT>30NOV260940</FINT>`, want: map[string]string{"FINT": "30NOV260940"}, changed: []string{"FINT"}},
		{name: "FINT empty deletes the final time", styp: "FINT", body: `<FINT/>`, prior: map[string]string{"FINT": "30NOV260940"},
			want: map[string]string{"FINT": ""}, changed: []string{"FINT"}},
		{name: "FLIN set", styp: "FLIN", body: `<FLIN>I</FLIN>`, want: map[string]string{"FLIN": "I"}, changed: []string{"FLIN"}},
		{name: "FRET sets the return flag and reason", styp: "FRET", body: `<FRET REID="G">EXIT DOOR FAULT</FRET>`,
			want: map[string]string{"FRET": "EXIT DOOR FAULT", "FRET_REID": "G"}, changed: []string{"FRET", "FRET_REID"}},
		{name: "FRET flag without reason", styp: "FRET", body: `<FRET REID="G"></FRET>`,
			prior: map[string]string{"FRET": "EXIT DOOR FAULT", "FRET_REID": "G"},
			want:  map[string]string{"FRET": ""}, changed: []string{"FRET"}},
		{name: "FRET empty clears the return", styp: "FRET", body: `<FRET></FRET>`,
			prior: map[string]string{"FRET": "EXIT DOOR FAULT", "FRET_REID": "G"},
			want:  map[string]string{"FRET": "", "FRET_REID": ""}, changed: []string{"FRET", "FRET_REID"}},
		{name: "GTDT without GOTM/GCTM: times not assigned", styp: "GTDT",
			body:     `<GTDT GTNO="1"><GATE>B7</GATE><PGOT>30NOV260815</PGOT><GTYP>D</GTYP></GTDT>`,
			wantColl: map[string][]flight.Item{"GTDT": {item("1", "GATE", "B7", "PGOT", "30NOV260815", "GTYP", "D")}}, changed: []string{"GTDT"}},
		{name: "GTDT GTNO=0 is no gate allocation now", styp: "GTDT", body: `<GTDT GTNO="0"><GATE/></GTDT>`,
			wantColl: map[string][]flight.Item{"GTDT": {}}, changed: []string{"GTDT"}},
		{name: "LACL sets the time and the last-call status", styp: "LACL", body: `<LACL>30NOV260845</LACL>`,
			want: map[string]string{"LACL": "30NOV260845", "LAST_CALL_STATUS": "LAST_CALL"}, changed: []string{"LACL", "LAST_CALL_STATUS"}},
		{name: "LACL empty clears the time and resets the status", styp: "LACL", body: `<LACL></LACL>`,
			prior: map[string]string{"LACL": "30NOV260845", "LAST_CALL_STATUS": "LAST_CALL"},
			want:  map[string]string{"LACL": "", "LAST_CALL_STATUS": ""}, changed: []string{"LACL", "LAST_CALL_STATUS"}},
		{name: "MAXP set", styp: "MAXP", body: `<MAXP>180</MAXP>`, want: map[string]string{"MAXP": "180"}, changed: []string{"MAXP"}},
		{name: "MAXP empty deletes", styp: "MAXP", body: `<MAXP/>`, prior: map[string]string{"MAXP": "180"},
			want: map[string]string{"MAXP": ""}, changed: []string{"MAXP"}},
		{name: "HNAG sets the three agents", styp: "HNAG", body: `<FHAG>234523</FHAG><PHAG>22313</PHAG><MHAG>234523</MHAG>`,
			want: map[string]string{"FHAG": "234523", "PHAG": "22313", "MHAG": "234523"}, changed: []string{"FHAG", "MHAG", "PHAG"}},
		{name: "HNAG without MHAG keeps it; FHAG empty deletes that agent", styp: "HNAG", body: `<FHAG></FHAG><PHAG>9</PHAG>`,
			prior: map[string]string{"FHAG": "1", "PHAG": "2", "MHAG": "3"},
			want:  map[string]string{"FHAG": "", "PHAG": "9"}, changed: []string{"FHAG", "PHAG"}},
		{name: "PSDT set", styp: "PSDT", body: `<PSDT PSNO="1"><PSST>211</PSST><STST>30NOV260750</STST></PSDT>`,
			wantColl: map[string][]flight.Item{"PSDT": {item("1", "PSST", "211", "STST", "30NOV260750")}}, changed: []string{"PSDT"}},
		{name: "PSDT PSNO=0 is no stand allocation now", styp: "PSDT", body: `<PSDT PSNO="0"/>`,
			priorColl: map[string][]flight.Item{"PSDT": {item("1", "PSST", "211")}},
			wantColl:  map[string][]flight.Item{"PSDT": {}}, changed: []string{"PSDT"}},
		{name: "RENO set", styp: "RENO", body: `<RENO>B6688</RENO>`, want: map[string]string{"RENO": "B6688"}, changed: []string{"RENO"}},
		{name: "RENO empty clears the registration", styp: "RENO", body: `<RENO/>`, prior: map[string]string{"RENO": "B6688"},
			want: map[string]string{"RENO": ""}, changed: []string{"RENO"}},
		{name: "ROUT departure keeps the first 4 points without SCAT/SCDT", styp: "ROUT", body: route(6),
			wantColl: map[string][]flight.Item{"ROUT": {item("1", "APCD", "AP1"), item("2", "APCD", "AP2"), item("3", "APCD", "AP3"), item("4", "APCD", "AP4")}},
			changed:  []string{"ROUT"}},
		{name: "ROUT arrival keeps the last 4 points", styp: "ROUT", body: route(6), mvin: "A",
			wantColl: map[string][]flight.Item{"ROUT": {item("3", "APCD", "AP3"), item("4", "APCD", "AP4"), item("5", "APCD", "AP5"), item("6", "APCD", "AP6")}},
			changed:  []string{"ROUT"}},
		{name: "ROUT leaves ERUT alone", styp: "ROUT", body: route(2),
			priorColl: map[string][]flight.Item{"ERUT": {item("1", "APCD", "XXX")}},
			wantColl:  map[string][]flight.Item{"ROUT": {item("1", "APCD", "AP1"), item("2", "APCD", "AP2")}, "ERUT": {item("1", "APCD", "XXX")}},
			changed:   []string{"ROUT"}},
		{name: "TAOP links the turnaround", styp: "TAOP", body: `<TAOP>CA</TAOP><TAFL>CA201</TAFL><TAID>6213345</TAID>`,
			want: map[string]string{"TAOP": "CA", "TAFL": "CA201", "TAID": "6213345"}, changed: []string{"TAFL", "TAID", "TAOP"}},
		{name: "TAOP any empty disconnects all three", styp: "TAOP", body: `<TAOP>CA</TAOP><TAFL></TAFL><TAID>6213345</TAID>`,
			prior: map[string]string{"TAOP": "CA", "TAFL": "CA201", "TAID": "6213345"},
			want:  map[string]string{"TAOP": "", "TAFL": "", "TAID": ""}, changed: []string{"TAFL", "TAID", "TAOP"}},
		{name: "TRML set", styp: "TRML", body: `<TRML>T3</TRML>`, want: map[string]string{"TRML": "T3"}, changed: []string{"TRML"}},
		{name: "TRML empty deletes the terminal", styp: "TRML", body: `<TRML/>`, want: map[string]string{"TRML": ""}, changed: []string{"TRML"}},
		{name: "VIPP/VIPR set", styp: "VIPP", body: `<VIPP>2</VIPP><VIPR>3</VIPR>`,
			want: map[string]string{"VIPP": "2", "VIPR": "3"}, changed: []string{"VIPP", "VIPR"}},
		{name: "VIPP empty deletes VIPP only", styp: "VIPP", body: `<VIPP></VIPP><VIPR>3</VIPR>`, prior: map[string]string{"VIPP": "2", "VIPR": "3"},
			want: map[string]string{"VIPP": ""}, changed: []string{"VIPP"}},
		// Legacy extras.
		{name: "ABTM replaced whole", styp: "ABTM", body: `<ABTM ASNO="1"><ABDG>B12</ABDG><ABOP>O</ABOP><AOTM>30NOV260820</AOTM></ABTM>`,
			wantColl: map[string][]flight.Item{"ABTM": {item("1", "ABDG", "B12", "ABOP", "O", "AOTM", "30NOV260820")}}, changed: []string{"ABTM"}},
		{name: "DELY replaced whole", styp: "DELY", body: `<DELY CODE="81" STRT="30NOV260900" DURA="30">ATC</DELY><DELY CODE="93">LATE</DELY>`,
			wantColl: map[string][]flight.Item{"DELY": {item("", "CODE", "81", "STRT", "30NOV260900", "DURA", "30", "TEXT", "ATC"), item("", "CODE", "93", "TEXT", "LATE")}},
			changed:  []string{"DELY"}},
		{name: "DELY bare is no delay now", styp: "DELY", body: `<DELY/>`,
			priorColl: map[string][]flight.Item{"DELY": {item("", "CODE", "81")}},
			wantColl:  map[string][]flight.Item{"DELY": {}}, changed: []string{"DELY"}},
		{name: "PADT set", styp: "PADT", body: `<PADT>30NOV260905</PADT>`, want: map[string]string{"PADT": "30NOV260905"}, changed: []string{"PADT"}},
		{name: "FTSS set", styp: "FTSS", body: `<FTSS>DELY</FTSS>`, want: map[string]string{"FTSS": "DELY"}, changed: []string{"FTSS"}},
		{name: "STND set", styp: "STND", body: `<STND>211</STND>`, want: map[string]string{"STND": "211"}, changed: []string{"STND"}},
		{name: "BDPB set", styp: "BDPB", body: `<BDPB>Y</BDPB>`, want: map[string]string{"BDPB": "Y"}, changed: []string{"BDPB"}},
		{name: "REMC set", styp: "REMC", body: `<REMC>请旅客留意登机口变更</REMC>`, want: map[string]string{"REMC": "请旅客留意登机口变更"}, changed: []string{"REMC"}},
		{name: "REMC empty clears", styp: "REMC", body: `<REMC/>`, prior: map[string]string{"REMC": "x"}, want: map[string]string{"REMC": ""}, changed: []string{"REMC"}},
		// What the STYP does not own is reported, not merged.
		{name: "ESTT carrying ACTT and GTDT merges only ESTT", styp: "ESTT",
			body: `<ESTT>30NOV260930</ESTT><ACTT>30NOV260931</ACTT><GTDT GTNO="1"><GATE>Z9</GATE></GTDT>`,
			want: map[string]string{"ESTT": "30NOV260930"}, changed: []string{"ESTT"}, ignored: []string{"ACTT", "GTDT"}},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.styp] = true
		t.Run(tc.name, func(t *testing.T) {
			prior := base()
			maps.Copy(prior.Scalars, tc.prior)
			maps.Copy(prior.Collections, tc.priorColl)
			if tc.mvin != "" {
				prior.Scalars["MVIN"] = tc.mvin
			}
			frozen := prior.Clone()
			rec, styp := decode(t, "15", tc.styp, tc.body)
			d := flight.ApplyFLOP(&prior, flight.Input{MsgID: 200, STYP: styp, Now: now, Record: rec})
			if d.Skip != "" {
				t.Fatalf("skipped: %s", d.Skip)
			}
			if !flight.SameContent(prior, frozen) || prior.Version != frozen.Version {
				t.Fatalf("the rule changed its input state")
			}
			wantScalars := maps.Clone(frozen.Scalars)
			for k, v := range tc.want {
				if v == "" {
					delete(wantScalars, k)
				} else {
					wantScalars[k] = v
				}
			}
			if !maps.Equal(d.Next.Scalars, wantScalars) {
				t.Errorf("scalars\n got %v\nwant %v", d.Next.Scalars, wantScalars)
			}
			wantColl := maps.Clone(frozen.Collections)
			maps.Copy(wantColl, tc.wantColl)
			if !reflect.DeepEqual(d.Next.Collections, wantColl) {
				t.Errorf("collections\n got %v\nwant %v", d.Next.Collections, wantColl)
			}
			if !slices.Equal(d.Ignored, tc.ignored) {
				t.Errorf("ignored = %v, want %v", d.Ignored, tc.ignored)
			}
			checkEvents(t, d, frozen, tc.changed, 200)
		})
	}
	for _, s := range flight.STYPs() {
		if s != "FDEL" && !seen[s] {
			t.Errorf("STYP %s has no golden case", s)
		}
	}
}

// checkEvents asserts the terminal effects of an accepted message: no change → same version,
// no events; a change → version+1 and KAFKA:msg (CHANGED) + KAFKA:schd (the full document).
func checkEvents(t *testing.T, d flight.Decision, prior flight.Flight, changed []string, msgID int64) {
	t.Helper()
	if changed == nil {
		if d.Changed || len(d.Events) != 0 || d.Next.Version != prior.Version {
			t.Fatalf("no change expected: changed=%v events=%d version=%d", d.Changed, len(d.Events), d.Next.Version)
		}
		return
	}
	if !d.Changed || d.Next.Version != prior.Version+1 || d.Next.LastMsgID != msgID || !d.Next.UpdatedAt.Equal(now) {
		t.Fatalf("change expected: changed=%v version=%d last=%d", d.Changed, d.Next.Version, d.Next.LastMsgID)
	}
	if len(d.Events) != 2 {
		t.Fatalf("events = %d, want KAFKA:msg + KAFKA:schd", len(d.Events))
	}
	msg, schd := d.Events[0], d.Events[1]
	if msg.Target != flight.TargetMsg || schd.Target != flight.TargetSchd || msg.Type != flight.Upsert || schd.Type != flight.Upsert ||
		msg.Version != d.Next.Version || schd.Version != d.Next.Version || msg.FLID != d.Next.FLID {
		t.Fatalf("events %+v %+v", msg, schd)
	}
	var note struct {
		CHANGED []string
	}
	if err := json.Unmarshal(msg.Payload, &note); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(note.CHANGED, changed) {
		t.Errorf("CHANGED = %v, want %v", note.CHANGED, changed)
	}
	if string(schd.Payload) != string(flight.Document(d.Next)) {
		t.Errorf("KAFKA:schd payload is not the full document of the next state")
	}
}

// route is a ROUT of n points with SCAT/SCDT.
func route(n int) string {
	s := ""
	for i := 1; i <= n; i++ {
		s += fmt.Sprintf(`<ROUT RTNO="%d"><APCD>AP%d</APCD><SCAT>30NOV26%02d00</SCAT><SCDT>30NOV26%02d30</SCDT></ROUT>`, i, i, i, i)
	}
	return s
}

// TestFLOPTargetUnknownOrDeleted: every FLOP STYP skips an unknown or deleted target with its
// reason; nothing is invented.
func TestFLOPTargetUnknownOrDeleted(t *testing.T) {
	deleted := base()
	deleted.State = flight.Deleted
	for _, s := range flight.STYPs() {
		if s == "FDEL" {
			continue
		}
		rec, _ := decode(t, "15", s, "")
		in := flight.Input{MsgID: 1, STYP: s, Now: now, Record: rec}
		if d := flight.ApplyFLOP(nil, in); d.Skip != flight.SkipUnknownFlight || d.Changed || len(d.Events) > 0 {
			t.Errorf("%s on an unknown flight: %+v", s, d)
		}
		if d := flight.ApplyFLOP(&deleted, in); d.Skip != flight.SkipDeletedFlight || d.Changed || len(d.Events) > 0 {
			t.Errorf("%s on a deleted flight: %+v", s, d)
		}
	}
}

// TestRulesCoverCodecWhitelist checks that the rules and the codec's FLOP whitelist are the same
// set, and that both are the table of R-FLOP-1 plus the legacy extras.
// Guards R-INV-19.
func TestRulesCoverCodecWhitelist(t *testing.T) {
	seed := []string{"ACFT", "ACTT", "BOTM", "CHOT", "FLTY", "CKDT", "CLDT", "CHDT", "CNCL", "ESTT", "FDEL", "FDIV", "FINT",
		"FLIN", "FRET", "GTDT", "LACL", "MAXP", "HNAG", "PSDT", "RENO", "ROUT", "TAOP", "TRML", "VIPP",
		"ABTM", "DELY", "PADT", "FTSS", "STND", "BDPB", "REMC"}
	slices.Sort(seed)
	if got := flight.STYPs(); !slices.Equal(got, seed) {
		t.Errorf("rules %v\n seed %v", got, seed)
	}
	for _, s := range seed {
		x := fmt.Sprintf(`<MSG><META><SNDR>A</SNDR><SEQN>1</SEQN><DTTM>20261130090000</DTTM><TYPE>FLOP</TYPE><STYP>%s</STYP></META><FLOP><FLID>1</FLID></FLOP></MSG>`, s)
		m, err := sis.Decode(x, sis.Options{})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if _, ok := m.Body.(*sis.Flop); !ok {
			t.Errorf("codec does not accept FLOP STYP %s: %T", s, m.Body)
		}
	}
	// Sample STYPs outside the table stay unsupported (R-FLOP-1: no generic merge).
	for _, s := range []string{"APPT", "EOBT", "FLAB", "SRVT", "VIPF", "PORT", "EXSS"} {
		x := fmt.Sprintf(`<MSG><META><SNDR>A</SNDR><SEQN>1</SEQN><DTTM>20261130090000</DTTM><TYPE>FLOP</TYPE><STYP>%s</STYP></META><FLOP><FLID>1</FLID></FLOP></MSG>`, s)
		m, err := sis.Decode(x, sis.Options{})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if _, ok := m.Body.(*sis.Unsupported); !ok {
			t.Errorf("FLOP STYP %s decodes to %T, want *sis.Unsupported", s, m.Body)
		}
	}
}
