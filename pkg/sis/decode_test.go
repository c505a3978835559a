package sis

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decodeFile reads a corpus file the way the system does: raw bytes → BytesToText (charset) →
// Decode (text).
func decodeFile(t *testing.T, name string) (*Message, error) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	text, err := BytesToText(raw, "")
	if err != nil {
		return nil, err
	}
	return Decode(text, Options{})
}

func mustDecodeFile(t *testing.T, name string) *Message {
	t.Helper()
	m, err := decodeFile(t, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func present(v string) Field { return Field{Present: true, Value: v} }

type itemWant struct {
	seq    string
	fields map[string]string // tag → value; every listed tag must be present with that value
	absent []string
}

func checkItems(t *testing.T, r FlightRecord, tag string, want []itemWant) {
	t.Helper()
	col := r.Collections[tag]
	if col == nil {
		t.Fatalf("collection %s missing; have %v", tag, keys(r.Collections))
	}
	if col.NoAllocation {
		t.Fatalf("%s: NoAllocation set on a collection with items", tag)
	}
	if len(col.Items) != len(want) {
		t.Fatalf("%s: %d items, want %d: %+v", tag, len(col.Items), len(want), col.Items)
	}
	for k, w := range want {
		it := col.Items[k]
		if it.Seq != w.seq {
			t.Errorf("%s[%d].Seq = %q, want %q", tag, k+1, it.Seq, w.seq)
		}
		for f, v := range w.fields {
			if got := it.Fields[f]; got != present(v) {
				t.Errorf("%s[%d].%s = %+v, want %q", tag, k+1, f, got, v)
			}
		}
		for _, f := range w.absent {
			if got, ok := it.Fields[f]; ok {
				t.Errorf("%s[%d].%s = %+v, want absent", tag, k+1, f, got)
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestDecodeFlop covers every FLOP STYP of R-FLOP-1 (FDEL included) and the legacy extras,
// one corpus file each.
func TestDecodeFlop(t *testing.T) {
	tests := []struct {
		styp    string
		scalars map[string]string // exact values of scalars that must be present
		absent  []string          // scalars that must not be present
		check   func(t *testing.T, r FlightRecord)
	}{
		{styp: "ACFT", scalars: map[string]string{"ACFT": "32N"}},
		{styp: "ACTT", scalars: map[string]string{"ACTT": "15MAR240842"}},
		{styp: "BOTM", scalars: map[string]string{"BOTM": "15MAR240805"}},
		{styp: "CHOT", check: func(t *testing.T, r FlightRecord) {
			checkItems(t, r, "CHOT", []itemWant{
				{seq: "1", fields: map[string]string{"CHTM": "15MAR240840", "CHID": "OFF", "CHST": "S211"}},
				// An empty CHTM inside an element deletes that chock time: it must stay visible.
				{seq: "2", fields: map[string]string{"CHTM": "", "CHID": "ON"}},
			})
		}},
		{styp: "FLTY", scalars: map[string]string{"FLTY": "W"}},
		{styp: "CKDT", check: func(t *testing.T, r FlightRecord) {
			// Same counter twice: two allocations, never merged.
			checkItems(t, r, "CKDT", []itemWant{
				{seq: "1", fields: map[string]string{"CHKC": "01", "CCLS": "Y", "COTM": "15MAR240628"}},
				{seq: "2", fields: map[string]string{"CHKC": "01", "CCLS": "F"}, absent: []string{"COTM", "CCTM"}},
			})
		}},
		{styp: "CLDT", check: func(t *testing.T, r FlightRecord) {
			checkItems(t, r, "CLDT", []itemWant{{seq: "1", fields: map[string]string{"BELT": "B07", "FBAG": "15MAR241012", "LBAG": "", "BTYP": "D"}}})
		}},
		{styp: "CHDT", check: func(t *testing.T, r FlightRecord) {
			checkItems(t, r, "CHDT", []itemWant{{seq: "1", fields: map[string]string{"CHUT": "CH11", "CCLS": "Y", "CTYP": "D", "CETM": ""}}})
		}},
		{styp: "CNCL", scalars: map[string]string{"CNCL": "15MAR240715"}},
		{styp: "ESTT", scalars: map[string]string{"ESTT": "15MAR240905"}},
		{styp: "FDEL", scalars: map[string]string{"FDEL": ""}},
		{styp: "FDIV", scalars: map[string]string{"FDIV": "目的地大雾，备降杭州", "FDIV_DDES": "HGH", "FDIV_DDIR": "TO"}},
		{styp: "FINT", scalars: map[string]string{"FINT": "15MAR240901"}},
		{styp: "FLIN", scalars: map[string]string{"FLIN": "I"}},
		{styp: "FRET", scalars: map[string]string{"FRET": "舱门故障 DOOR FAULT", "FRET_REID": "G"}},
		{styp: "GTDT", check: func(t *testing.T, r FlightRecord) {
			checkItems(t, r, "GTDT", []itemWant{
				{seq: "1", fields: map[string]string{"GATE": "A12", "PGOT": "15MAR240750", "GOTM": "15MAR240752", "GTYP": "D"}},
				// GOTM/GCTM not sent = open/close time not assigned (R-FLOP-GTDT).
				{seq: "2", fields: map[string]string{"GATE": "A12"}, absent: []string{"GOTM", "GCTM"}},
			})
		}},
		{styp: "LACL", scalars: map[string]string{"LACL": "15MAR240812"}},
		{styp: "MAXP", scalars: map[string]string{"MAXP": "186"}},
		{styp: "HNAG", scalars: map[string]string{"FHAG": "310001", "PHAG": "310002"}, absent: []string{"MHAG"}},
		{styp: "PSDT", check: func(t *testing.T, r FlightRecord) {
			checkItems(t, r, "PSDT", []itemWant{{seq: "1", fields: map[string]string{"PSST": "215", "STST": "15MAR240600", "STET": "15MAR240845"}}})
		}},
		{styp: "RENO", scalars: map[string]string{"RENO": "B-30EF"}},
		{styp: "ROUT", check: func(t *testing.T, r FlightRecord) {
			checkItems(t, r, "ROUT", []itemWant{
				{seq: "1", fields: map[string]string{"APCD": "SHA", "SCDT": "15MAR240830"}, absent: []string{"SCAT"}},
				{seq: "2", fields: map[string]string{"APCD": "XIY", "SCAT": "15MAR241040", "SCDT": "15MAR241130"}},
				{seq: "3", fields: map[string]string{"APCD": "URC", "SCAT": "15MAR241420"}, absent: []string{"SCDT"}},
			})
			if _, ok := r.Collections["ERUT"]; ok {
				t.Error("ROUT leaked into ERUT")
			}
		}},
		{styp: "TAOP", scalars: map[string]string{"TAOP": "MU", "TAFL": "MU5100", "TAID": "880077"}},
		{styp: "TRML", scalars: map[string]string{"TRML": "T2"}},
		{styp: "VIPP", scalars: map[string]string{"VIPP": "1", "VIPR": ""}},
		{styp: "ABTM", check: func(t *testing.T, r FlightRecord) {
			checkItems(t, r, "ABTM", []itemWant{{seq: "1", fields: map[string]string{"ABDG": "212", "ABOP": "D", "AOTM": "15MAR240748"}}})
		}},
		{styp: "DELY", check: func(t *testing.T, r FlightRecord) {
			checkItems(t, r, "DELY", []itemWant{
				{fields: map[string]string{"CODE": "93", "STRT": "15MAR240830", "DURA": "0045", "TEXT": "前序航班晚到"}},
				{fields: map[string]string{"CODE": "81", "STRT": "15MAR240915", "DURA": "0010", "TEXT": "ATC"}},
			})
		}},
		{styp: "PADT", scalars: map[string]string{"PADT": "15MAR240835"}},
		{styp: "FTSS", scalars: map[string]string{"FTSS": "RCFLOP"}},
		{styp: "STND", scalars: map[string]string{"STND": "215"}},
		{styp: "BDPB", scalars: map[string]string{"BDPB": "212"}},
		{styp: "REMC", scalars: map[string]string{"REMC": "旅客行李装载延误"}},
	}
	for _, tc := range tests {
		t.Run(tc.styp, func(t *testing.T) {
			m := mustDecodeFile(t, "flop/"+tc.styp+".xml")
			if m.Meta.TYPE != "FLOP" || m.Meta.STYP != tc.styp {
				t.Fatalf("META %s/%s", m.Meta.TYPE, m.Meta.STYP)
			}
			f, ok := m.Body.(*Flop)
			if !ok {
				t.Fatalf("body %T, want *Flop", m.Body)
			}
			r := f.Record
			if !strings.HasPrefix(r.FLID, "880") {
				t.Errorf("FLID %q", r.FLID)
			}
			if r.FFID != present("MU-MU5101-D-15MAR240830-D") {
				t.Errorf("FFID %+v", r.FFID)
			}
			for k, v := range tc.scalars {
				if got := r.Scalars[k]; got != present(v) {
					t.Errorf("Scalars[%s] = %+v, want %q", k, got, v)
				}
			}
			for _, k := range tc.absent {
				if got, ok := r.Scalars[k]; ok {
					t.Errorf("Scalars[%s] = %+v, want absent", k, got)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			} else if len(r.Collections) != 0 {
				t.Errorf("unexpected collections %v", keys(r.Collections))
			}
			if r.Order[0] != "FLID" || r.Order[1] != "FFID" {
				t.Errorf("Order %v", r.Order)
			}
		})
	}
}

// TestCorpusCoversEveryKind fails when a whitelisted FLOP STYP or a reference category has no
// corpus file, so the table above cannot silently shrink.
func TestCorpusCoversEveryKind(t *testing.T) {
	for _, s := range strings.Fields("ACFT ACTT BOTM CHOT FLTY CKDT CLDT CHDT CNCL ESTT FDEL FDIV FINT FLIN FRET GTDT LACL MAXP HNAG PSDT RENO ROUT TAOP TRML VIPP ABTM DELY PADT FTSS STND BDPB REMC") {
		if !flopSTYP(s) {
			t.Errorf("%s is not in the FLOP whitelist", s)
		}
		if _, err := os.Stat(filepath.Join("testdata", "flop", s+".xml")); err != nil {
			t.Errorf("no corpus file for FLOP %s: %v", s, err)
		}
	}
	for _, c := range strings.Fields("COUL ARPT AIRL AIRC REGN ORGN FLTL TLST GLST SLST CLST BLST CHLT") {
		if _, err := os.Stat(filepath.Join("testdata", "ref", c+".xml")); err != nil {
			t.Errorf("no corpus file for %s: %v", c, err)
		}
	}
}

func TestAbsentVersusEmpty(t *testing.T) {
	tests := []struct {
		file    string
		scalars map[string]Field
	}{
		{"flop/ESTT_clear.xml", map[string]Field{"ESTT": present(""), "ACTT": {}}},
		{"flop/ESTT.xml", map[string]Field{"ESTT": present("15MAR240905"), "ACTT": {}}},
		// Empty CNCL revokes the cancellation (R-FLOP-CNCL): sent, empty.
		{"flop/CNCL_revoke.xml", map[string]Field{"CNCL": present("")}},
		{"flop/FDIV_clear.xml", map[string]Field{"FDIV": present(""), "FDIV_DDES": present(""), "FDIV_DDIR": present("TO")}},
		// TAID not sent stays absent even though its siblings are cleared.
		{"flop/TAOP_disconnect.xml", map[string]Field{"TAOP": present(""), "TAFL": present(""), "TAID": {}}},
		{"flop/VIPP.xml", map[string]Field{"VIPP": present("1"), "VIPR": present("")}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r := mustDecodeFile(t, tc.file).Body.(*Flop).Record
			for k, want := range tc.scalars {
				got, ok := r.Scalars[k]
				if got != want || ok != want.Present {
					t.Errorf("Scalars[%s] = %+v (in map: %v), want %+v", k, got, ok, want)
				}
			}
		})
	}
}

func TestNoAllocation(t *testing.T) {
	for _, tag := range []string{"GTDT", "CKDT", "CLDT", "CHDT", "PSDT"} {
		t.Run(tag, func(t *testing.T) {
			r := mustDecodeFile(t, "flop/"+tag+"_no_allocation.xml").Body.(*Flop).Record
			col := r.Collections[tag]
			if col == nil || !col.NoAllocation || len(col.Items) != 0 {
				t.Fatalf("Collections[%s] = %+v, want NoAllocation with no items", tag, col)
			}
		})
	}
	t.Run("DELY bare element clears delays", func(t *testing.T) {
		r := mustDecodeFile(t, "flop/DELY_clear.xml").Body.(*Flop).Record
		if col := r.Collections["DELY"]; col == nil || !col.NoAllocation || len(col.Items) != 0 {
			t.Fatalf("DELY = %+v", col)
		}
	})
	t.Run("collection not sent has no key", func(t *testing.T) {
		r := mustDecodeFile(t, "flop/ESTT.xml").Body.(*Flop).Record
		if len(r.Collections) != 0 {
			t.Fatalf("collections %v", keys(r.Collections))
		}
	})
	t.Run("GTNO=1 alone is a real allocation", func(t *testing.T) {
		m, err := Decode(flopText("GTDT", `<GTDT GTNO="1"><GATE>A1</GATE></GTDT>`), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if col := m.Body.(*Flop).Record.Collections["GTDT"]; col.NoAllocation || len(col.Items) != 1 {
			t.Fatalf("GTDT = %+v", col)
		}
	})
}

// flopText builds a FLOP message around fields, for cases that are clearer inline.
func flopText(styp, fields string) string {
	return `<MSG><META><SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20240315083000</DTTM><TYPE>FLOP</TYPE><STYP>` +
		styp + `</STYP></META><FLOP><FLID>1</FLID>` + fields + `</FLOP></MSG>`
}

func TestDecodeSchd(t *testing.T) {
	t.Run("DNLD", func(t *testing.T) {
		m := mustDecodeFile(t, "schd/DNLD.xml")
		s, ok := m.Body.(*Schd)
		if !ok {
			t.Fatalf("body %T", m.Body)
		}
		if s.STYP != "DNLD" || s.RECS != 3 || len(s.Records) != 3 {
			t.Fatalf("STYP %s RECS %d records %d", s.STYP, s.RECS, len(s.Records))
		}
		if got := []string{s.Records[0].FLID, s.Records[1].FLID, s.Records[2].FLID}; !reflect.DeepEqual(got, []string{"9001", "9002", "9003"}) {
			t.Errorf("FLIDs in order: %v", got)
		}
		r0 := s.Records[0]
		if r0.FFID.Present {
			t.Errorf("FLTR has no FFID, got %+v", r0.FFID)
		}
		for k, v := range map[string]string{"ALCD": "MU", "FLNO": "MU5101", "MVIN": "D", "SODT": "15MAR240830", "REMC": "备注：东航", "FTSS": "RCFLOP", "STND": "215"} {
			if r0.Scalars[k] != present(v) {
				t.Errorf("FLTR[1].%s = %+v, want %q", k, r0.Scalars[k], v)
			}
		}
		checkItems(t, r0, "ROUT", []itemWant{{seq: "1", fields: map[string]string{"APCD": "SHA"}}, {seq: "2", fields: map[string]string{"APCD": "XIY"}}})
		checkItems(t, r0, "ERUT", []itemWant{{seq: "1", fields: map[string]string{"APCD": "SHA", "SCDT": "15MAR240830"}}})
		checkItems(t, r0, "PSDT", []itemWant{{seq: "1", fields: map[string]string{"PSST": "215"}}})
		if _, ok := r0.Scalars["ESTT"]; ok {
			t.Error("FLTR[1] did not send ESTT")
		}

		r1 := s.Records[1]
		if r1.Scalars["ESTT"] != present("") {
			t.Errorf("FLTR[2].ESTT = %+v, want sent empty", r1.Scalars["ESTT"])
		}
		if col := r1.Collections["CKDT"]; col == nil || !col.NoAllocation {
			t.Errorf("FLTR[2].CKDT = %+v, want NoAllocation", col)
		}
		wantSRVT := []string{
			"<SRTC>ATN</SRTC>\n\t\t\t\t<SRQT>2</SRQT>\n\t\t\t\t<SARR>由于机器问题延误服务</SARR>",
			"<SRTC>ACCN</SRTC>",
		}
		if !reflect.DeepEqual(r1.Raw["SRVT"], wantSRVT) {
			t.Errorf("Raw[SRVT] = %q, want %q", r1.Raw["SRVT"], wantSRVT)
		}
		if want := []string{"<VPCD>VC11030</VPCD>\n\t\t\t\t<VFES>3</VFES>"}; !reflect.DeepEqual(r1.Raw["VIPF"], want) {
			t.Errorf("Raw[VIPF] = %q", r1.Raw["VIPF"])
		}
		// An unknown structured element is kept raw, not dropped and not an error.
		if len(r1.Raw["PORT"]) != 1 || !strings.Contains(r1.Raw["PORT"][0], "<POID>O</POID>") {
			t.Errorf("Raw[PORT] = %q", r1.Raw["PORT"])
		}
		wantOrder := []string{"FLID", "ALCD", "FLNO", "MVIN", "SODT", "FLTY", "ESTT", "CKDT", "SRVT", "SRVT", "VIPF", "PORT"}
		if !reflect.DeepEqual(r1.Order, wantOrder) {
			t.Errorf("Order %v, want %v", r1.Order, wantOrder)
		}
		if s.Records[2].Scalars["MAID"] != present("9001") {
			t.Errorf("FLTR[3].MAID = %+v", s.Records[2].Scalars["MAID"])
		}
	})
	t.Run("RESP", func(t *testing.T) {
		s := mustDecodeFile(t, "schd/RESP.xml").Body.(*Schd)
		if s.STYP != "RESP" || s.RECS != 2 || len(s.Records) != 2 || s.Records[1].Scalars["CNCL"] != present("16MAR240900") {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("ADFT", func(t *testing.T) {
		s := mustDecodeFile(t, "schd/ADFT.xml").Body.(*Schd)
		if s.STYP != "ADFT" || s.RECS != 1 || len(s.Records) != 1 || s.Records[0].FLID != "9201" {
			t.Fatalf("%+v", s)
		}
		// ADFT is set-only: what was not sent must stay distinguishable.
		if _, ok := s.Records[0].Scalars["STND"]; ok {
			t.Error("STND was not sent")
		}
	})
	t.Run("empty DNLD", func(t *testing.T) {
		s := mustDecodeFile(t, "schd/DNLD_empty.xml").Body.(*Schd)
		if s.RECS != 0 || len(s.Records) != 0 {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("RECS not sent", func(t *testing.T) {
		m, err := Decode(`<MSG><META><SNDR>A</SNDR><SEQN>1</SEQN><DTTM>20240315083000</DTTM><TYPE>SCHD</TYPE><STYP>RESP</STYP></META><SCHD><FLTR><FLID>1</FLID></FLTR></SCHD></MSG>`, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s := m.Body.(*Schd); s.RECS != RECSAbsent || len(s.Records) != 1 {
			t.Fatalf("%+v", s)
		}
	})
}

func TestDecodeRefData(t *testing.T) {
	tests := []struct {
		category, styp string
		keys           []string
		check          func(t *testing.T, r *RefData)
	}{
		{"COUL", "DNLD", []string{"PRC", "JPN"}, func(t *testing.T, r *RefData) {
			// Repeated children are ordered entries, not merged.
			var regc []string
			for _, f := range r.Records[0].Fields {
				if f.Tag == "REGC" {
					regc = append(regc, f.Value)
				}
			}
			if !reflect.DeepEqual(regc, []string{"ASIA", "GCHINA"}) {
				t.Errorf("REGC %v", regc)
			}
			if f := field(r.Records[0], "CNMC"); f.Value != "中国" {
				t.Errorf("CNMC %+v", f)
			}
		}},
		{"ARPT", "RESP", []string{"PVG"}, func(t *testing.T, r *RefData) {
			abbr := r.Records[0].Fields[4]
			if abbr.Tag != "ABBR" || abbr.Attrs["CODE"] != "ABR1" || abbr.Value != "PD" {
				t.Errorf("ABBR %+v", abbr)
			}
		}},
		{"AIRL", "DNLD", []string{"MU"}, func(t *testing.T, r *RefData) {
			var tags []string
			for _, f := range r.Records[0].Fields {
				tags = append(tags, f.Tag)
			}
			if want := []string{"ITOP", "ICOP", "ONMC", "TRML", "TRML", "SUBC", "SUBC", "OGRP"}; !reflect.DeepEqual(tags, want) {
				t.Errorf("field order %v, want %v", tags, want)
			}
			trml := r.Records[0].Fields[4]
			if trml.Value != "T2" || !reflect.DeepEqual(trml.Attrs, map[string]string{"MVIN": "D", "FLIN": "I"}) {
				t.Errorf("second TRML %+v", trml)
			}
			subc := r.Records[0].Fields[6]
			if len(subc.Children) != 2 || !reflect.DeepEqual(subc.Children[0], RefField{Tag: "CODE", Value: "002"}) || subc.Children[1].Value != "中联航" {
				t.Errorf("second SUBC %+v", subc)
			}
		}},
		{"AIRC", "ADD", []string{"32N"}, nil},
		{"REGN", "UPD", []string{"B-30EF"}, func(t *testing.T, r *RefData) {
			// Empty means "not available" for reference data; it is still an entry.
			if f := field(r.Records[0], "ALSC"); f.Tag != "ALSC" || f.Value != "" {
				t.Errorf("ALSC %+v", f)
			}
		}},
		{"ORGN", "DEL", []string{"310002"}, nil},
		{"FLTL", "DNLD", []string{"W", "C"}, nil},
		{"TLST", "RESP", []string{"T2"}, nil},
		{"GLST", "ADD", []string{"A12"}, func(t *testing.T, r *RefData) {
			if f := field(r.Records[0], "GNMC"); f.Value != "A12登机口" {
				t.Errorf("GNMC %+v", f)
			}
		}},
		{"SLST", "UPD", []string{"215"}, nil},
		{"CLST", "DNLD", []string{"01"}, nil},
		{"BLST", "DEL", []string{"B07"}, nil},
		{"CHLT", "RESP", []string{"01"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.category, func(t *testing.T) {
			m := mustDecodeFile(t, "ref/"+tc.category+".xml")
			r, ok := m.Body.(*RefData)
			if !ok {
				t.Fatalf("body %T", m.Body)
			}
			if r.Category != tc.category || r.STYP != tc.styp || r.RECS != len(tc.keys) {
				t.Errorf("Category %s STYP %s RECS %d", r.Category, r.STYP, r.RECS)
			}
			var got []string
			for _, rec := range r.Records {
				got = append(got, rec.Key)
				if rec.Fields[0].Tag != RefKeyTag(tc.category) {
					t.Errorf("first field %s, want the key tag", rec.Fields[0].Tag)
				}
			}
			if !reflect.DeepEqual(got, tc.keys) {
				t.Errorf("keys %v, want %v", got, tc.keys)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func field(r RefRecord, tag string) RefField {
	for _, f := range r.Fields {
		if f.Tag == tag {
			return f
		}
	}
	return RefField{}
}

func TestDecodeResourceStatus(t *testing.T) {
	m := mustDecodeFile(t, "rsta/DNLD.xml")
	rs, ok := m.Body.(*ResourceStatus)
	if !ok {
		t.Fatalf("body %T", m.Body)
	}
	want := []RSTARecord{{RTYP: "GATE", RSID: "A12", STAT: "D", Start: present("15MAR241000"), End: present("15MAR241800")}}
	if rs.STYP != "DNLD" || rs.RECS != RECSAbsent || !reflect.DeepEqual(rs.Records, want) {
		t.Fatalf("%+v", rs)
	}
	rs = mustDecodeFile(t, "rsta/RESP.xml").Body.(*ResourceStatus)
	want = []RSTARecord{
		// No ENDT: disabled until the next status event (R-RSTA-2).
		{RTYP: "STND", RSID: "215", STAT: "D", Start: present("15MAR241000")},
		{RTYP: "BELT", RSID: "B07", STAT: "E", Start: present("15MAR241200")},
	}
	if rs.STYP != "RESP" || rs.RECS != 2 || !reflect.DeepEqual(rs.Records, want) {
		t.Fatalf("%+v", rs)
	}
}

func TestDecodeRequestsAndEror(t *testing.T) {
	if got := mustDecodeFile(t, "request/RQFD.xml").Body; !reflect.DeepEqual(got, &RQFD{STDB: present("15MAR240000"), STDE: present("16MAR240000")}) {
		t.Errorf("RQFD %+v", got)
	}
	if got := mustDecodeFile(t, "request/RQRD.xml").Body; !reflect.DeepEqual(got, &RQRD{RTYP: "GLST"}) {
		t.Errorf("RQRD %+v", got)
	}
	want := &Eror{Fields: map[string]Field{"ERCD": present("E102"), "ERDS": present("报文序号不连续"), "RSEQ": present("000123")}}
	if got := mustDecodeFile(t, "request/EROR.xml").Body; !reflect.DeepEqual(got, want) {
		t.Errorf("EROR %+v", got)
	}
}

func TestDecodeUnsupported(t *testing.T) {
	for _, tc := range []struct{ file, reason string }{
		{"unsupported/SCHS_DNLD.xml", "TYPE SCHS"},
		// Not in the whitelist: skipped even though its content would not decode.
		{"unsupported/FLOP_EGSR.xml", "FLOP STYP EGSR"},
		{"unsupported/AIRL_SYNC.xml", "AIRL STYP SYNC"},
		{"unsupported/SCHD_WEEK.xml", "SCHD STYP WEEK"},
		{"unsupported/HLTR_DNLD.xml", "TYPE HLTR"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m := mustDecodeFile(t, tc.file)
			u, ok := m.Body.(*Unsupported)
			if !ok {
				t.Fatalf("body %T, want *Unsupported", m.Body)
			}
			if !strings.Contains(u.Reason, tc.reason) {
				t.Errorf("reason %q, want it to name %q", u.Reason, tc.reason)
			}
			if m.Meta.SNDR != "AODB" || m.Meta.SEQN == 0 {
				t.Errorf("META still decoded: %+v", m.Meta)
			}
		})
	}
}

func TestDecodeMeta(t *testing.T) {
	zone := time.FixedZone("test+3", 3*60*60)
	m, err := Decode(`<?xml version="1.0"?>
<MSG><META><STYP>ESTT</STYP><TYPE>FLOP</TYPE><DTTM>20240229235959</DTTM><SEQN> 000042 </SEQN><SNDR>AODB</SNDR><XTRA>ignored</XTRA></META>
<FLOP><FLID>7</FLID><ESTT>01MAR240005</ESTT></FLOP></MSG>`, Options{Zone: zone})
	if err != nil {
		t.Fatal(err)
	}
	want := Meta{SNDR: "AODB", TYPE: "FLOP", STYP: "ESTT", SEQN: 42, SEQNText: "000042", DTTM: time.Date(2024, 2, 29, 23, 59, 59, 0, zone)}
	if !reflect.DeepEqual(m.Meta, want) {
		t.Errorf("Meta %+v, want %+v", m.Meta, want)
	}
	if m.Meta.DTTM.Location() != zone {
		t.Errorf("DTTM zone %v", m.Meta.DTTM.Location())
	}
	m, err = Decode(flopText("ESTT", ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, off := m.Meta.DTTM.Zone(); off != 8*60*60 {
		t.Errorf("default zone offset %d, want UTC+8", off)
	}
}
