package flight_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// TestItemsKeepKnownFields: an item keeps only its collection's known fields (R-FLIGHT-3: the
// columns of its detail table); every other child or attribute is reported as ignored, once
// each, under its collection (GTDT/XYZ), in FLOP, ADFT and snapshot alike.
func TestItemsKeepKnownFields(t *testing.T) {
	for _, tc := range []struct {
		name, styp, inner string
		want              map[string][]flight.Item
		ignored           []string
	}{
		{
			name: "known fields only: nothing ignored", styp: "GTDT",
			inner: `<GTDT GTNO="1"><GATE>A1</GATE><GTYP>M</GTYP></GTDT>`,
			want:  map[string][]flight.Item{"GTDT": {item("1", "GATE", "A1", "GTYP", "M")}},
		},
		{
			name: "unknown child and attribute dropped", styp: "GTDT",
			inner:   `<GTDT GTNO="1" COLOR="red"><GATE>A1</GATE><XFOO>1</XFOO></GTDT>`,
			want:    map[string][]flight.Item{"GTDT": {item("1", "GATE", "A1")}},
			ignored: []string{"GTDT/COLOR", "GTDT/XFOO"},
		},
		{
			name: "the same unknown name in several items is reported once", styp: "CKDT",
			inner:   `<CKDT CKNO="1"><CHKC>1</CHKC><ZZ>a</ZZ></CKDT><CKDT CKNO="2"><CHKC>2</CHKC><ZZ>b</ZZ></CKDT>`,
			want:    map[string][]flight.Item{"CKDT": {item("1", "CHKC", "1"), item("2", "CHKC", "2")}},
			ignored: []string{"CKDT/ZZ"},
		},
		{
			name: "an item of unknown fields only stays, empty", styp: "CHOT",
			inner:   `<CHOT CSNO="3"><NOPE>x</NOPE></CHOT>`,
			want:    map[string][]flight.Item{"CHOT": {item("3")}},
			ignored: []string{"CHOT/NOPE"},
		},
		{
			name: "another collection's field is unknown here", styp: "CLDT",
			inner:   `<CLDT CLNO="1"><BELT>7</BELT><GATE>A1</GATE></CLDT>`,
			want:    map[string][]flight.Item{"CLDT": {item("1", "BELT", "7")}},
			ignored: []string{"CLDT/GATE"},
		},
		{
			name: "the sequence attribute sent as a child is no field", styp: "PSDT",
			inner:   `<PSDT PSNO="1"><PSST>T</PSST><PSNO>9</PSNO></PSDT>`,
			want:    map[string][]flight.Item{"PSDT": {item("1", "PSST", "T")}},
			ignored: []string{"PSDT/PSNO"},
		},
		{
			name: "DELY keeps CODE STRT DURA and its text", styp: "DELY",
			inner:   `<DELY CODE="81" DURA="0030" SEV="3">weather</DELY>`,
			want:    map[string][]flight.Item{"DELY": {item("", "CODE", "81", "DURA", "0030", "TEXT", "weather")}},
			ignored: []string{"DELY/SEV"},
		},
		{
			name: "ROUT: SCAT and SCDT are known fields the FLOP rule drops, not ignored", styp: "ROUT",
			inner:   `<ROUT RTNO="1"><APCD>PEK</APCD><SCDT>30NOV261000</SCDT><WX>1</WX></ROUT>`,
			want:    map[string][]flight.Item{"ROUT": {item("1", "APCD", "PEK")}},
			ignored: []string{"ROUT/WX"},
		},
		{
			name: "no allocation now: nothing to report", styp: "ABTM",
			inner: `<ABTM ASNO="0"/>`,
			want:  map[string][]flight.Item{"ABTM": {}},
		},
		{
			name: "a tag outside the STYP is reported whole, not by its fields", styp: "GTDT",
			inner:   `<GTDT GTNO="1"><GATE>A1</GATE></GTDT><CKDT CKNO="1"><CHKC>1</CHKC><ZZ>1</ZZ></CKDT>`,
			want:    map[string][]flight.Item{"GTDT": {item("1", "GATE", "A1")}},
			ignored: []string{"CKDT"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, styp := decode(t, "15", tc.styp, tc.inner)
			cur := base()
			delete(cur.Collections, "GTDT")
			d := flight.ApplyFLOP(&cur, flight.Input{MsgID: 200, STYP: styp, Now: now, Record: rec})
			if d.Skip != "" {
				t.Fatalf("skipped: %s", d.Skip)
			}
			got := map[string][]flight.Item{}
			for tag, items := range d.Next.Collections {
				got[tag] = items
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("collections %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(d.Ignored, tc.ignored) {
				t.Errorf("ignored %q, want %q", d.Ignored, tc.ignored)
			}
		})
	}
}

// TestScheduleItemsKeepKnownFields: a schedule record (ADFT and a snapshot's) stores its
// collections whole, and as for a FLOP, only their known fields.
func TestScheduleItemsKeepKnownFields(t *testing.T) {
	rec := sis.FlightRecord{FLID: "15", Scalars: map[string]sis.Field{"SODT": {Present: true, Value: "30NOV260900"}},
		Collections: map[string]*sis.Collection{
			"ERUT": {Items: []sis.Item{{Seq: "1", Fields: map[string]sis.Field{
				"APCD": {Present: true, Value: "PEK"}, "LEG": {Present: true, Value: "2"}}}}},
			"GTDT": {Items: []sis.Item{{Seq: "1", Fields: map[string]sis.Field{
				"GATE": {Present: true, Value: "A1"}, "NOTE": {Present: true, Value: "x"}}}}},
		}}
	want := map[string][]flight.Item{"ERUT": {item("1", "APCD", "PEK")}, "GTDT": {item("1", "GATE", "A1")}}
	ignored := []string{"ERUT/LEG", "GTDT/NOTE"}
	adft := flight.ApplyADFT(nil, flight.Input{MsgID: 1, STYP: "ADFT", Now: now, Record: rec}, flight.DayRule{})
	snap := flight.ApplySnapshot(nil, flight.Input{MsgID: 1, STYP: "DNLD", Now: now, Record: rec}, now)
	for name, d := range map[string]flight.Decision{"ADFT": adft, "snapshot": snap} {
		if !reflect.DeepEqual(d.Next.Collections, want) {
			t.Errorf("%s: collections %+v, want %+v", name, d.Next.Collections, want)
		}
		if !slices.Equal(d.Ignored, ignored) {
			t.Errorf("%s: ignored %q, want %q", name, d.Ignored, ignored)
		}
	}
}

// TestIgnoredIsBounded: the probe of issue #57 (99 items × 200 distinct unknown tags) reports
// the first flight.MaxIgnored names, sorted, and how many more there were.
func TestIgnoredIsBounded(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 99; i++ {
		fmt.Fprintf(&b, `<GTDT GTNO="%d"><GATE>A%d</GATE>`, i, i)
		for k := range 200 {
			fmt.Fprintf(&b, "<X%03d>v</X%03d>", k, k)
		}
		b.WriteString("</GTDT>")
	}
	rec, styp := decode(t, "15", "GTDT", b.String())
	cur := base()
	d := flight.ApplyFLOP(&cur, flight.Input{MsgID: 200, STYP: styp, Now: now, Record: rec})
	if len(d.Ignored) != flight.MaxIgnored+1 {
		t.Fatalf("%d ignored names reported, want %d and a count: %q", len(d.Ignored), flight.MaxIgnored+1, d.Ignored)
	}
	if d.Ignored[0] != "GTDT/X000" || d.Ignored[flight.MaxIgnored-1] != fmt.Sprintf("GTDT/X%03d", flight.MaxIgnored-1) {
		t.Errorf("ignored %q: want GTDT/X000 … in order", d.Ignored)
	}
	if last, want := d.Ignored[flight.MaxIgnored], fmt.Sprintf("… %d more", 200-flight.MaxIgnored); last != want {
		t.Errorf("last entry %q, want %q", last, want)
	}
	for _, it := range d.Next.Collections["GTDT"] {
		if len(it.Fields) != 1 {
			t.Fatalf("item %+v keeps fields beyond GATE", it)
		}
	}
}
