package reference_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/reference"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// message wraps reference records in the SIS envelope.
func message(typ, styp string, recs int, body string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>7</SEQN>` +
		`<DTTM>20240315090000</DTTM><TYPE>` + typ + `</TYPE><STYP>` + styp + `</STYP></META>`)
	if recs >= 0 {
		b.WriteString("<RECS>" + itoa(recs) + "</RECS>")
	}
	b.WriteString(body)
	b.WriteString("</MSG>")
	return b.String()
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func decodeRef(t *testing.T, typ, styp string, recs int, body string) *sis.RefData {
	t.Helper()
	m, err := sis.Decode(message(typ, styp, recs, body), sis.Options{})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	d, ok := m.Body.(*sis.RefData)
	if !ok {
		t.Fatalf("body %T, want *sis.RefData", m.Body)
	}
	return d
}

// TestStoreGolden is one golden record per category: the key, the ignore list, truncation,
// empty tags and repeated children of R-REF-5 and R-REF-9, as the JSON ref_master keeps.
func TestStoreGolden(t *testing.T) {
	cases := []struct {
		rtype, record string
		key, want     string
		dropped       []string
	}{
		{"COUL", `<COUL><COUC>PRC</COUC><COUN>PEOPLES REPUBLIC OF CHINA</COUN><CNMC>中国</CNMC><REGC>ASIA</REGC><REGC>GCHINA</REGC></COUL>`,
			"PRC", `{"COUC":"PRC","CNMC":"中国","REGC":"ASIA"}`, []string{"COUN", "REGC#2"}},
		{"ARPT", `<ARPT><ITCD>PEK</ITCD><ICCD>ZBAA</ICCD><ANAM>BEIJING CAPITAL</ANAM><ANMC>北京首都国际机场</ANMC><BDIS>1900</BDIS>` +
			`<CTRY>PRC</CTRY><ACTY>BJS</ACTY><ATYP>D</ATYP><HAUL>S</HAUL><ABBR CODE="ABR5">BEIJING</ABBR><ABBR CODE="ABR6">北京首都</ABBR></ARPT>`,
			"PEK", `{"ITCD":"PEK","ANMC":"北京首都国际机场","CTRY":"PRC","ABBR":[{"CODE":"ABR5","TEXT":"BEIJING"},{"CODE":"ABR6","TEXT":"北京首都"}]}`,
			[]string{"ICCD", "ANAM", "BDIS", "ACTY", "ATYP", "HAUL"}},
		{"AIRL", `<AIRL><ITOP>ZZ</ITOP><ICOP>ZZZ</ICOP><ONAM>CATHAY</ONAM><ONMC>香港航空公司</ONMC><CTRY>HKG</CTRY>` +
			`<TRML MVIN="A" FLIN="I">T3A</TRML><TRML MVIN="D" FLIN="I">T3B</TRML><OGRP>ONE WORLD</OGRP>` +
			`<SUBC><CODE>002</CODE><NAME>Second</NAME><NAMC>第二子公司</NAMC></SUBC><SUBC><CODE>001</CODE><NAME>First</NAME><NAMC></NAMC></SUBC><DORI>I</DORI></AIRL>`,
			"ZZ", `{"ITOP":"ZZ","ICOP":"ZZZ","ONAM":"CATHAY","ONMC":"香港航空公司","CTRY":"HKG",` +
				`"TRML":[{"MVIN":"A","FLIN":"I","TEXT":"T3A"},{"MVIN":"D","FLIN":"I","TEXT":"T3B"}],"OGRP":["ONE WORLD"],` +
				`"SUBC":[{"CODE":"002","NAME":"Second","NAMC":"第二子公司"},{"CODE":"001","NAME":"First","NAMC":""}],"DORI":"I"}`, nil},
		{"AIRC", `<AIRC><ITAT>310</ITAT><ICAT>A310</ICAT><DESC>AIRBUS 310</DESC><CDSC>空客310</CDSC><CHAP>C</CHAP><MAXP>242</MAXP>` +
			`<MFWT>31732</MFWT><MTWT>138600</MTWT><ALEN>33.2</ALEN><WSPN>32</WSPN><MHTM>42</MHTM><MABR>2</MABR></AIRC>`,
			"310", `{"ITAT":"310","ICAT":"A310","CDSC":"空客310","MAXP":"242","ALEN":"33.2","WSPN":"32"}`,
			[]string{"DESC", "CHAP", "MFWT", "MTWT", "MHTM", "MABR"}},
		{"REGN", `<REGN><RNUM>B2290</RNUM><ITAT>321</ITAT><OWID>52156</OWID><ACAL>CA</ACAL><ALSC>WN</ALSC><MAXP></MAXP><MFWT></MFWT><MTWT/></REGN>`,
			"B2290", `{"RNUM":"B2290","ITAT":"321","ACAL":"CA","ALSC":"WN","MAXP":""}`, []string{"OWID", "MFWT", "MTWT"}},
		{"ORGN", `<ORGN><OGID>477923</OGID><ONAM>ServisAir</ONAM><ONMC>美国SERVISAIR有限公司</ONMC><OCAT>RAMP HANDLER</OCAT>` +
			`<OCAT>CARGO HANDLER</OCAT><OCAT>PAX HANDLER</OCAT></ORGN>`,
			"477923", `{"OGID":"477923","ONMC":"美国SERVISAIR有限公司","OCAT":["RAMP HANDLER","PAX HANDLER"]}`,
			[]string{"ONAM", "OCAT=CARGO HANDLER"}},
		{"FLTL", `<FLTL><FTYP>K</FTYP><CTYP>SCH</CTYP><FDES>SCHEDULED FLT</FDES><FDSC>定期航班</FDSC><FCML>Y</FCML></FLTL>`,
			"K", `{"FTYP":"K","FDSC":"定期航班"}`, []string{"CTYP", "FDES", "FCML"}},
		{"TLST", `<TLST><TCOD>T3A</TCOD><TNAM>TERMINAL T1</TNAM><TNMC>T1航站楼</TNMC><TCAT>D</TCAT><TPAX>Y</TPAX></TLST>`,
			"T3A", `{"TCOD":"T3A","TNMC":"T1航站楼"}`, []string{"TNAM", "TCAT", "TPAX"}},
		{"GLST", `<GLST><GCOD>G17</GCOD><GTNM>Gate for CA</GTNM><GNMC>登机口</GNMC><GCAT>D</GCAT><GTML>T1</GTML><PIER></PIER></GLST>`,
			"G17", `{"GCOD":"G17","GTNM":"Gate for CA","GNMC":"登机口","GCAT":"D","GTML":"T1","PIER":""}`, nil},
		{"SLST", `<SLST><SCOD>S209</SCOD><STNM>South Stand 209</STNM><SNMC>南方机位209</SNMC><SATC>C</SATC><STGP>T1 SOUTH APRON</STGP>` +
			`<SWID></SWID><STML>T1</STML><MABS>2</MABS><REMT>N</REMT><FEPU></FEPU></SLST>`,
			"S209", `{"SCOD":"S209","SNMC":"南方机位209","SATC":"C","STGP":"T1 SOUTH","SWID":"","STML":"T1","REMT":"N"}`,
			[]string{"STNM", "STGP>8", "MABS", "FEPU"}},
		{"CLST", `<CLST><CCOD>C12</CCOD><CTNM>Desk 11</CTNM><CNMC>北方柜台十一</CNMC><CCAT>D</CCAT><CTML>T3A</CTML><CTRA>Y</CTRA></CLST>`,
			"C12", `{"CCOD":"C12","CNMC":"北方柜台十一","CTML":"T3A","CTRA":"Y"}`, []string{"CTNM", "CCAT"}},
		{"BLST", `<BLST><BCOD>b14</BCOD><BTNM>Belt</BTNM><BNMC>转盘</BNMC><BCAT>D</BCAT><BTML>T2</BTML></BLST>`,
			"b14", `{"BCOD":"b14","BNMC":"转盘","BTML":"T2"}`, []string{"BTNM", "BCAT"}},
		// The same tags as CLST: CHLT keeps CCAT, which CLST drops.
		{"CHLT", `<CHLT><CCOD>C12</CCOD><CHNM>Chute 11</CHNM><CNMC>滑槽十一</CNMC><CTML>T3A</CTML><CCAT>D</CCAT></CHLT>`,
			"C12", `{"CCOD":"C12","CHNM":"Chute 11","CNMC":"滑槽十一","CTML":"T3A","CCAT":"D"}`, nil},
	}
	if len(cases) != len(reference.Categories()) {
		t.Fatalf("%d golden cases for %d categories", len(cases), len(reference.Categories()))
	}
	for _, tc := range cases {
		t.Run(tc.rtype, func(t *testing.T) {
			d := decodeRef(t, tc.rtype, "ADD", 1, tc.record)
			got, err := reference.Store(tc.rtype, d.Records[0])
			if err != nil {
				t.Fatal(err)
			}
			if got.RKey != tc.key {
				t.Errorf("RKey = %q, want %q", got.RKey, tc.key)
			}
			if g, w := canonical(t, got.Payload), canonical(t, tc.want); g != w {
				t.Errorf("payload\n got %s\nwant %s", g, w)
			}
			if !slices.Equal(got.Dropped, tc.dropped) {
				t.Errorf("Dropped = %q, want %q", got.Dropped, tc.dropped)
			}
		})
	}
}

func canonical(t *testing.T, v any) string {
	t.Helper()
	if s, ok := v.(string); ok {
		var m any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("golden %s: %v", s, err)
		}
		v = m
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestStoreEdges(t *testing.T) {
	t.Run("a repeat no rule foresaw is kept as an array", func(t *testing.T) {
		d := decodeRef(t, "GLST", "ADD", 1, `<GLST><GCOD>G1</GCOD><GTML>T1</GTML><GTML>T2</GTML></GLST>`)
		got, _ := reference.Store("GLST", d.Records[0])
		if g := canonical(t, got.Payload); g != `{"GCOD":"G1","GTML":["T1","T2"]}` {
			t.Errorf("payload %s", g)
		}
	})
	t.Run("ORGN whose every OCAT is filtered keeps an empty list", func(t *testing.T) {
		d := decodeRef(t, "ORGN", "ADD", 1, `<ORGN><OGID>1</OGID><OCAT>CARGO</OCAT></ORGN>`)
		got, _ := reference.Store("ORGN", d.Records[0])
		if g := canonical(t, got.Payload); g != `{"OCAT":[],"OGID":"1"}` {
			t.Errorf("payload %s", g)
		}
	})
	t.Run("STGP is cut by characters, not bytes", func(t *testing.T) {
		d := decodeRef(t, "SLST", "ADD", 1, `<SLST><SCOD>1</SCOD><STGP>西区远机位第一组别</STGP></SLST>`)
		got, _ := reference.Store("SLST", d.Records[0])
		if got.Payload["STGP"] != "西区远机位第一组" {
			t.Errorf("STGP = %q", got.Payload["STGP"])
		}
	})
	t.Run("an STGP of 8 characters is not reported", func(t *testing.T) {
		d := decodeRef(t, "SLST", "ADD", 1, `<SLST><SCOD>1</SCOD><STGP>T1 SOUTH</STGP></SLST>`)
		got, _ := reference.Store("SLST", d.Records[0])
		if got.Payload["STGP"] != "T1 SOUTH" || len(got.Dropped) != 0 {
			t.Errorf("STGP = %q, dropped %q", got.Payload["STGP"], got.Dropped)
		}
	})
	t.Run("an attribute named like a child", func(t *testing.T) {
		d := decodeRef(t, "AIRL", "ADD", 1, `<AIRL><ITOP>X</ITOP><SUBC CODE="a"><CODE>b</CODE></SUBC></AIRL>`)
		got, _ := reference.Store("AIRL", d.Records[0])
		if g := canonical(t, got.Payload); g != `{"ITOP":"X","SUBC":[{"@CODE":"a","CODE":"b"}]}` {
			t.Errorf("payload %s", g)
		}
	})
	t.Run("not a category", func(t *testing.T) {
		if _, err := reference.Store("DLYL", sis.RefRecord{Key: "x"}); err == nil {
			t.Error("Store(DLYL) succeeded")
		}
	})
}

func TestCheckBatch(t *testing.T) {
	g := func(k string) string { return "<GLST><GCOD>" + k + "</GCOD></GLST>" }
	cases := []struct {
		name, styp string
		recs       int
		body, want string // want: a part of the refusal, "" when accepted
	}{
		{"complete", "DNLD", 2, g("G1") + g("G2"), ""},
		{"empty category", "DNLD", 0, "", ""},
		{"RESP like DNLD", "RESP", 1, g("G1"), ""},
		{"count too high", "DNLD", 3, g("G1") + g("G2"), "declares RECS 3 but carries 2"},
		{"count too low", "RESP", 1, g("G1") + g("G2"), "declares RECS 1 but carries 2"},
		{"no RECS", "DNLD", -1, g("G1"), "without RECS"},
		{"key twice", "DNLD", 3, g("G1") + g("G2") + g("G1"), `GCOD "G1" twice (records 1 and 3)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := reference.CheckBatch(decodeRef(t, "GLST", tc.styp, tc.recs, tc.body))
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("CheckBatch = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("increments do not compare RECS", func(t *testing.T) {
		if got := reference.CheckIncrement(decodeRef(t, "FLTL", "ADD", 2, "<FLTL><FTYP>K</FTYP></FLTL>")); got != "" {
			t.Errorf("CheckIncrement = %q", got)
		}
	})
	t.Run("ops", func(t *testing.T) {
		for styp, want := range map[string]reference.Op{"DNLD": reference.Replace, "RESP": reference.Replace,
			"ADD": reference.Upsert, "UPD": reference.Upsert, "DEL": reference.Delete, "GTDT": 0} {
			if got := reference.OpOf(styp); got != want {
				t.Errorf("OpOf(%s) = %d, want %d", styp, got, want)
			}
		}
	})
}
