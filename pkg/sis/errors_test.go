package sis

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDecodeErrors pins the class and the element path of every error corpus file. Every file in
// testdata/malformed and testdata/codec_error must be listed, so a new file cannot go unchecked.
func TestDecodeErrors(t *testing.T) {
	tests := map[string]struct {
		class  ErrorClass
		path   string
		reason string // a fragment the reason must contain
	}{
		"malformed/not_well_formed.xml":            {Malformed, "/MSG/FLOP/ESTT", "closed by </ETST>"},
		"malformed/truncated.xml":                  {Malformed, "/MSG/FLOP/ESTT", "unexpected end of input"},
		"malformed/root_not_msg.xml":               {Malformed, "/MESSAGE", "not <MSG>"},
		"malformed/no_meta.xml":                    {Malformed, "/MSG", "no META"},
		"malformed/missing_sndr.xml":               {Malformed, "/MSG/META/SNDR", "missing"},
		"malformed/empty_styp.xml":                 {Malformed, "/MSG/META/STYP", "empty"},
		"malformed/seqn_not_integer.xml":           {Malformed, "/MSG/META/SEQN", `"12A3"`},
		"malformed/seqn_negative.xml":              {Malformed, "/MSG/META/SEQN", `"-5"`},
		"malformed/seqn_repeated.xml":              {Malformed, "/MSG/META/SEQN", "repeated"},
		"malformed/dttm_wrong_format.xml":          {Malformed, "/MSG/META/DTTM", "yyyyMMddHHmmss"},
		"malformed/dttm_february_30.xml":           {Malformed, "/MSG/META/DTTM", "20240230083000"},
		"malformed/doctype.xml":                    {Malformed, "/", "DOCTYPE"},
		"malformed/billion_laughs.xml":             {Malformed, "/", "DOCTYPE"},
		"malformed/undefined_entity.xml":           {Malformed, "/MSG/FLOP/REMC", "entity"},
		"malformed/control_character.xml":          {Malformed, "/MSG/FLOP/REMC", "illegal character"},
		"malformed/invalid_utf8.xml":               {Malformed, "/", "invalid UTF-8"},
		"malformed/second_root.xml":                {Malformed, "/", "after the root"},
		"malformed/flop_without_flid.xml":          {Malformed, "/MSG/FLOP/FLID", "without FLID"},
		"malformed/flop_empty_flid.xml":            {Malformed, "/MSG/FLOP/FLID", "without FLID"},
		"malformed/flop_payload_missing.xml":       {Malformed, "/MSG/FLOP", "payload missing"},
		"malformed/flop_two_bodies.xml":            {Malformed, "/MSG/FLOP", "more than one"},
		"malformed/schd_payload_missing.xml":       {Malformed, "/MSG/SCHD", "payload missing"},
		"malformed/ref_payload_missing.xml":        {Malformed, "/MSG/GLST", "payload missing"},
		"malformed/ref_record_without_key.xml":     {Malformed, "/MSG/GLST[1]/GCOD", "key"},
		"malformed/rsta_without_rsid.xml":          {Malformed, "/MSG/RSTA[1]/RSID", "RSID"},
		"malformed/rqrd_without_rtyp.xml":          {Malformed, "/MSG/RQRD/RTYP", "RTYP"},
		"malformed/codec_error_then_malformed.xml": {Malformed, "/MSG/SCHD/FLTR[2]/FLID", "without FLID"},

		"codec_error/scalar_time_day_out_of_range.xml": {CodecError, "/MSG/FLOP/ESTT", `"32MAR240905"`},
		"codec_error/scalar_time_unknown_format.xml":   {CodecError, "/MSG/FLOP/ESTT", "not a known time format"},
		"codec_error/cncl_not_a_time.xml":              {CodecError, "/MSG/FLOP/CNCL", `"Y"`},
		"codec_error/collection_time.xml":              {CodecError, "/MSG/FLOP/GTDT[2]/GOTM", `"1503240752"`},
		"codec_error/dely_start_time.xml":              {CodecError, "/MSG/FLOP/DELY[1]/@STRT", `"15XYZ240830"`},
		"codec_error/schd_record_time.xml":             {CodecError, "/MSG/SCHD/FLTR[2]/SODT", "SODT"},
		"codec_error/schd_recs_not_integer.xml":        {CodecError, "/MSG/SCHD/RECS", `"two"`},
		"codec_error/ref_recs_negative.xml":            {CodecError, "/MSG/RECS", `"-1"`},
		"codec_error/repeated_scalar.xml":              {CodecError, "/MSG/FLOP/ESTT", "repeated"},
		"codec_error/no_allocation_with_items.xml":     {CodecError, "/MSG/FLOP/GTDT[1]", `GTNO="0"`},
		"codec_error/scalar_with_elements.xml":         {CodecError, "/MSG/FLOP/ESTT", "child elements"},
		"codec_error/schd_unexpected_element.xml":      {CodecError, "/MSG/SCHD/PAGE", "unexpected element"},
		"codec_error/rsta_unknown_status.xml":          {CodecError, "/MSG/RSTA[1]/STAT", `"X"`},
		"codec_error/rsta_end_time.xml":                {CodecError, "/MSG/RSTA[1]/ENDT", `"tomorrow"`},
		"codec_error/rqfd_time.xml":                    {CodecError, "/MSG/RQFD/STDE", `"16/03/2024"`},
	}
	for _, dir := range []string{"malformed", "codec_error"} {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.xml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if _, ok := tests[dir+"/"+filepath.Base(f)]; !ok {
				t.Errorf("%s has no expectation in this table", f)
			}
		}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			// The inbox column's text; invalid bytes reach Decode as they are.
			m, err := Decode(string(raw), Options{})
			if err == nil {
				t.Fatalf("decoded %+v, want %s", m, tc.class)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecodeError", err, err)
			}
			if de.Class != tc.class || de.Path != tc.path || !strings.Contains(de.Reason, tc.reason) {
				t.Errorf("got %s at %s (%s), want %s at %s containing %q", de.Class, de.Path, de.Reason, tc.class, tc.path, tc.reason)
			}
			if class, ok := ClassOf(fmt.Errorf("pump: decode message 42: %w", err)); !ok || class != tc.class {
				t.Errorf("ClassOf(wrapped) = %s, %v", class, ok)
			}
		})
	}
}

func TestClassOf(t *testing.T) {
	if _, ok := ClassOf(io.EOF); ok {
		t.Error("ClassOf(io.EOF) reported a class")
	}
	if _, ok := ClassOf(nil); ok {
		t.Error("ClassOf(nil) reported a class")
	}
	err := fmt.Errorf("outer: %w", codecError("/MSG/X", "r", io.ErrUnexpectedEOF))
	if c, ok := ClassOf(err); !ok || c != CodecError {
		t.Errorf("ClassOf = %s, %v", c, ok)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Error("the cause is not reachable through Unwrap")
	}
	if got, want := codecError("/MSG/FLOP/ESTT", "bad", nil).Error(), "sis: CODEC_ERROR at /MSG/FLOP/ESTT: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestLimits(t *testing.T) {
	msg := flopText("ESTT", `<ESTT>15MAR240905</ESTT>`)
	t.Run("size", func(t *testing.T) {
		if _, err := Decode(msg, Options{MaxBytes: len(msg)}); err != nil {
			t.Fatalf("at the limit: %v", err)
		}
		_, err := Decode(msg, Options{MaxBytes: len(msg) - 1})
		wantError(t, err, Malformed, "/", "over the limit")
	})
	t.Run("default size is 8 MiB", func(t *testing.T) {
		// A generated 2,000-flight schedule (about 1.8 MB) is well inside it.
		if _, err := Decode(genSchedule(2000), Options{}); err != nil {
			t.Fatalf("a 2,000-flight schedule: %v", err)
		}
		big := flopText("REMC", "<REMC>"+strings.Repeat("x", 8<<20)+"</REMC>")
		_, err := Decode(big, Options{})
		wantError(t, err, Malformed, "/", "over the limit of 8388608")
	})
	t.Run("depth", func(t *testing.T) {
		deep := flopText("ESTT", `<SRVT>`+strings.Repeat("<A>", 3)+strings.Repeat("</A>", 3)+`</SRVT>`) // MSG FLOP SRVT A A A = 6
		if _, err := Decode(deep, Options{MaxDepth: 6}); err != nil {
			t.Fatalf("at the limit: %v", err)
		}
		_, err := Decode(deep, Options{MaxDepth: 5})
		wantError(t, err, Malformed, "/MSG/FLOP/SRVT/A/A", "deeper than 5")
	})
	t.Run("default depth is 64", func(t *testing.T) {
		deep := flopText("ESTT", strings.Repeat("<A>", 63)+strings.Repeat("</A>", 63)) // 2 + 63 = 65
		_, err := Decode(deep, Options{})
		wantError(t, err, Malformed, "/MSG/FLOP/"+strings.TrimSuffix(strings.Repeat("A/", 62), "/"), "deeper than 64")
	})
	t.Run("elements", func(t *testing.T) {
		many := flopText("ESTT", strings.Repeat("<SRVT/>", 10)) // MSG META×6 FLOP FLID SRVT×10 = 19
		if _, err := Decode(many, Options{MaxElements: 19}); err != nil {
			t.Fatalf("at the limit: %v", err)
		}
		_, err := Decode(many, Options{MaxElements: 18})
		wantError(t, err, Malformed, "/MSG/FLOP", "more than 18 elements")
	})
	t.Run("attributes count as elements", func(t *testing.T) {
		many := flopText("ESTT", `<SRVT a="1" b="2"/>`) // 10 elements + 2 attributes
		if _, err := Decode(many, Options{MaxElements: 12}); err != nil {
			t.Fatalf("at the limit: %v", err)
		}
		_, err := Decode(many, Options{MaxElements: 11})
		wantError(t, err, Malformed, "/MSG/FLOP", "more than 11 elements and attributes")
	})
	t.Run("default elements follow the size", func(t *testing.T) {
		// 600,000 elements in 2.4 MB: within 8 MiB, over one element per 16 bytes of it.
		flood := flopText("ESTT", strings.Repeat("<X/>", 600_000))
		_, err := Decode(flood, Options{})
		wantError(t, err, Malformed, "/MSG/FLOP", "more than 524288 elements")
		if _, err := Decode(flopText("ESTT", strings.Repeat("<X/>", 100)), Options{MaxBytes: 64}); err == nil ||
			!strings.Contains(err.Error(), "over the limit of 64") {
			t.Fatalf("a small MaxBytes: %v", err)
		}
	})
	t.Run("text", func(t *testing.T) {
		at := flopText("REMC", "<REMC>  "+strings.Repeat("中", 10)+"\n</REMC>") // 30 bytes once trimmed
		if _, err := Decode(at, Options{MaxText: 30}); err != nil {
			t.Fatalf("at the limit: %v", err)
		}
		_, err := Decode(at, Options{MaxText: 29})
		wantError(t, err, Malformed, "/MSG/FLOP/REMC", "the text of REMC is 30 bytes, over the limit of 29")
	})
	t.Run("default text is 4 KiB", func(t *testing.T) {
		if _, err := Decode(flopText("REMC", "<REMC>"+strings.Repeat("x", 4096)+"</REMC>"), Options{}); err != nil {
			t.Fatalf("at the limit: %v", err)
		}
		_, err := Decode(flopText("REMC", "<REMC>"+strings.Repeat("x", 4097)+"</REMC>"), Options{})
		wantError(t, err, Malformed, "/MSG/FLOP/REMC", "4097 bytes, over the limit of 4096")
	})
}

// TestTextLimitNamesTheField pins where an over-long value is reported: the decoder's own path
// for that field, whatever part of the message it is in, supported or not.
func TestTextLimitNamesTheField(t *testing.T) {
	long := strings.Repeat("x", 65)
	tests := []struct {
		name, text, path, reason string
	}{
		{"scalar", flopText("REMC", "<REMC>"+long+"</REMC>"), "/MSG/FLOP/REMC", "the text of REMC is 65 bytes"},
		{"text split by comments", flopText("REMC", "<REMC>"+long[:40]+"<!-- -->"+long[40:]+"</REMC>"), "/MSG/FLOP/REMC", "65 bytes"},
		{"entities count as resolved", flopText("REMC", "<REMC>"+strings.Repeat("&amp;", 65)+"</REMC>"), "/MSG/FLOP/REMC", "65 bytes"},
		{"META field", strings.Replace(flopText("ESTT", "<ESTT/>"), "<SNDR>AODB</SNDR>", "<SNDR>"+long+"</SNDR>", 1), "/MSG/META/SNDR", "SNDR"},
		{"collection item child", flopText("GTDT", `<GTDT GTNO="1"><GATE>A1</GATE></GTDT><GTDT GTNO="2"><GATE>`+long+`</GATE></GTDT>`), "/MSG/FLOP/GTDT[2]/GATE", "GATE"},
		{"only item", flopText("GTDT", `<GTDT GTNO="1"><GATE>`+long+`</GATE></GTDT>`), "/MSG/FLOP/GTDT[1]/GATE", "GATE"},
		{"sequence attribute", flopText("GTDT", `<GTDT GTNO="`+long+`"/>`), "/MSG/FLOP/GTDT[1]/@GTNO", "attribute GTNO is 65 bytes"},
		{"DELY text", flopText("DELY", `<DELY CODE="1">`+long+`</DELY>`), "/MSG/FLOP/DELY[1]", "DELY"},
		{"scalar attribute", flopText("FDIV", `<FDIV DDES="`+long+`">x</FDIV>`), "/MSG/FLOP/FDIV/@DDES", "attribute DDES"},
		{"text in a container", flopText("ESTT", long+"<ESTT/>"), "/MSG/FLOP", "the text of FLOP"},
		{"raw SRVT content", flopText("ESTT", "<SRVT><OPER>"+long+"</OPER></SRVT>"), "/MSG/FLOP/SRVT/OPER", "OPER"},
		{"repeated scalar", flopText("ESTT", "<ESTT/><ESTT>"+long+"</ESTT>"), "/MSG/FLOP/ESTT[2]", "ESTT"},
		{"schedule record", strings.Replace(mustRead(t, "schd/DNLD.xml"), "<FLNO>", "<REMC>"+long+"</REMC><FLNO>", 1), "/MSG/SCHD/FLTR[1]/REMC", "REMC"},
		{"reference record", `<MSG><META><SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20240315083000</DTTM><TYPE>GLST</TYPE><STYP>ADD</STYP></META>` +
			`<GLST><GCOD>G1</GCOD></GLST><GLST><GCOD>G2</GCOD><GDES>` + long + `</GDES></GLST></MSG>`, "/MSG/GLST[2]/GDES", "GDES"},
		{"unsupported kind", strings.Replace(flopText("EGSR", "<EGSR>"+long+"</EGSR>"), "<TYPE>FLOP</TYPE>", "<TYPE>ZZZZ</TYPE>", 1), "/MSG/FLOP/EGSR", "EGSR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.text, Options{MaxText: 64})
			wantError(t, err, Malformed, tc.path, tc.reason)
		})
	}
}

// TestCollectionLimits: R-FLIGHT-3's SIS limits per flight record, each at its limit and one
// over, in a FLOP and in a schedule record.
func TestCollectionLimits(t *testing.T) {
	tests := []struct {
		tag, seq string
		limit    int
	}{
		{"GTDT", "GTNO", 99}, {"CKDT", "CKNO", 99}, {"CLDT", "CLNO", 99}, {"CHDT", "CHNO", 99},
		{"CHOT", "CSNO", 99}, {"ABTM", "ASNO", 99}, {"PSDT", "PSNO", 9}, {"ROUT", "RTNO", 6},
		{"ERUT", "RTNO", 7}, {"DELY", "CODE", 99},
	}
	items := func(tag, seq string, n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, `<%s %s="%d"/>`, tag, seq, i)
		}
		return b.String()
	}
	for _, tc := range tests {
		t.Run(tc.tag, func(t *testing.T) {
			if got := CollectionLimit(tc.tag); got != tc.limit {
				t.Fatalf("CollectionLimit(%s) = %d, want %d", tc.tag, got, tc.limit)
			}
			// ERUT travels in a ROUT message; every other tag is its own STYP.
			styp := strings.Replace(tc.tag, "ERUT", "ROUT", 1)
			m, err := Decode(flopText(styp, items(tc.tag, tc.seq, tc.limit)), Options{})
			if err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			if n := len(m.Body.(*Flop).Record.Collections[tc.tag].Items); n != tc.limit {
				t.Fatalf("%d items decoded, want %d", n, tc.limit)
			}
			_, err = Decode(flopText(styp, items(tc.tag, tc.seq, tc.limit+1)), Options{})
			wantError(t, err, Malformed, fmt.Sprintf("/MSG/FLOP/%s[%d]", tc.tag, tc.limit+1),
				fmt.Sprintf("more than %d %s elements", tc.limit, tc.tag))
			// Items of one collection count together wherever they are in the record.
			split := items(tc.tag, tc.seq, tc.limit) + "<ESTT/>" + items(tc.tag, tc.seq, 1)
			_, err = Decode(flopText(styp, split), Options{})
			wantError(t, err, Malformed, fmt.Sprintf("/MSG/FLOP/%s[%d]", tc.tag, tc.limit+1), "more than")
		})
	}
	t.Run("ROUT and ERUT count apart", func(t *testing.T) {
		if _, err := Decode(flopText("ROUT", items("ROUT", "RTNO", 6)+items("ERUT", "RTNO", 7)), Options{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("per schedule record", func(t *testing.T) {
		over := strings.Replace(mustRead(t, "schd/DNLD.xml"), "</FLTR>", items("PSDT", "PSNO", 10)+"</FLTR>", 2)
		_, err := Decode(over, Options{})
		wantError(t, err, Malformed, "/MSG/SCHD/FLTR[1]/PSDT[10]", "more than 9 PSDT")
	})
	t.Run("a flood is refused at the first item too many", func(t *testing.T) {
		// The message: 300,000 gates in one FLOP (2.1 MB, under every size bound).
		flood := flopText("GTDT", strings.Repeat(`<GTDT/>`, 300_000))
		_, err := Decode(flood, Options{})
		wantError(t, err, Malformed, "/MSG/FLOP/GTDT[100]", "more than 99 GTDT elements")
	})
	t.Run("not collections", func(t *testing.T) {
		for _, tag := range []string{"SRVT", "VIPF", "ESTT", "FLTR"} {
			if got := CollectionLimit(tag); got != 0 {
				t.Errorf("CollectionLimit(%s) = %d, want 0 (unbounded by the seed or not a collection)", tag, got)
			}
		}
	})
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func wantError(t *testing.T, err error, class ErrorClass, path, reason string) {
	t.Helper()
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v, want a %s DecodeError", err, class)
	}
	if de.Class != class || de.Path != path || !strings.Contains(de.Reason, reason) {
		t.Fatalf("got %s at %s (%s), want %s at %s containing %q", de.Class, de.Path, de.Reason, class, path, reason)
	}
}

// TestTolerances pins what is deliberately accepted although a stricter reading could refuse it.
func TestTolerances(t *testing.T) {
	for name, text := range map[string]string{
		// The shared sample ABNR-ADD-ABNR-3 ends in a stray </MSG>.
		"stray end tag after the root": flopText("ESTT", "<ESTT/>") + "\n</MSG>",
		"byte-order mark":              "\ufeff" + flopText("ESTT", "<ESTT/>"),
		"comments and PIs":             "<!-- c -->" + flopText("ESTT", "<!-- c --><ESTT/><?pi x?>") + "<!-- after -->",
		"GBK declaration on text":      `<?xml version="1.0" encoding="GBK"?>` + flopText("REMC", "<REMC>中文</REMC>"),
		"spaces around =":              strings.Replace(flopText("GTDT", `<GTDT GTNO = "1"><GATE>A1</GATE></GTDT>`), "<MSG>", `<MSG xmlns:xsi = "http://www.w3.org/2001/XMLSchema-instance">`, 1),
		"CDATA and character refs":     flopText("REMC", "<REMC>a &amp; <![CDATA[<b>]]> &#x4E2D;</REMC>"),
		"default namespace":            strings.Replace(flopText("ESTT", "<ESTT/>"), "<MSG>", `<MSG xmlns="urn:sis">`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(text, Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	m, err := Decode(flopText("REMC", "<REMC>\n  a &amp; <![CDATA[<b>]]> &#x4E2D;\u3000 \n</REMC>"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// XML white space is trimmed; the ideographic space U+3000 is content.
	if got := m.Body.(*Flop).Record.Scalars["REMC"].Value; got != "a & <b> 中\u3000" {
		t.Errorf("REMC %q", got)
	}
	// Text split by a comment, CDATA and a processing instruction is one value.
	m, err = Decode(flopText("REMC", "<REMC> a<!-- x -->b<![CDATA[ c ]]>d<?pi?>e </REMC>"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Body.(*Flop).Record.Scalars["REMC"].Value; got != "ab c de" {
		t.Errorf("REMC %q", got)
	}
}

// TestDecodeErrorsInline covers rules that read better as one line than as a corpus file.
func TestDecodeErrorsInline(t *testing.T) {
	tests := []struct {
		name, text  string
		class       ErrorClass
		path, cause string
	}{
		{"duplicate attribute", flopText("FDIV", `<FDIV DDES="HKG" DDES="PVG">x</FDIV>`), Malformed, "/MSG/FLOP/FDIV", "appears twice"},
		{"prefixed root", `<s:MSG xmlns:s="urn:x"><META/></s:MSG>`, Malformed, "/s:MSG", "not <MSG>"},
		{"empty input", "", Malformed, "/", "no root element"},
		{"only a declaration", `<?xml version="1.0"?>`, Malformed, "/", "no root element"},
		{"XML 1.1", `<?xml version="1.1"?>` + flopText("ESTT", "<ESTT/>"), Malformed, "/", "version"},
		{"end tag before any root", `</MSG>`, Malformed, "/", "unexpected end tag"},
		{"text before the root", `x` + flopText("ESTT", "<ESTT/>"), Malformed, "/", "text outside"},
		{"two META", strings.Replace(flopText("ESTT", "<ESTT/>"), "<FLOP>", "<META/><FLOP>", 1), Malformed, "/MSG/META", "more than one META"},
		{"SEQN overflows int64", strings.Replace(flopText("ESTT", "<ESTT/>"), "<SEQN>1</SEQN>", "<SEQN>99999999999999999999</SEQN>", 1), Malformed, "/MSG/META/SEQN", "not a non-negative integer"},
		{"META field with elements", strings.Replace(flopText("ESTT", "<ESTT/>"), "<SNDR>AODB</SNDR>", "<SNDR><X/></SNDR>", 1), Malformed, "/MSG/META/SNDR", "must be text"},
		{"repeated FLID", flopText("ESTT", "<FLID>2</FLID>"), Malformed, "/MSG/FLOP/FLID", "repeated FLID"},
		{"text in a container", flopText("ESTT", "stray<ESTT/>"), CodecError, "/MSG/FLOP", "unexpected text"},
		{"element beside the body", strings.Replace(flopText("ESTT", "<ESTT/>"), "</FLOP>", "</FLOP><EXTRA/>", 1), CodecError, "/MSG/EXTRA", "beside the FLOP body"},
		{"repeated item child", flopText("GTDT", `<GTDT GTNO="1"><GATE>A</GATE><GATE>B</GATE></GTDT>`), CodecError, "/MSG/FLOP/GTDT[1]/GATE", "repeated GATE"},
		{"DELY with elements", flopText("DELY", `<DELY CODE="1"><X/></DELY>`), CodecError, "/MSG/FLOP/DELY[1]", "child elements"},
		{"attribute shadows a field", flopText("FDIV", `<FDIV DDES="A">x</FDIV><FDIV_DDES>B</FDIV_DDES>`), CodecError, "/MSG/FLOP/FDIV_DDES", "repeated FDIV_DDES"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.text, Options{})
			wantError(t, err, tc.class, tc.path, tc.cause)
		})
	}
}

// TestTextPiecesAreLinear guards against quadratic copying when an element's text arrives in
// many pieces (here 400,000, split by comments): linear work takes well under a second.
func TestTextPiecesAreLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a 3 MB message")
	}
	const pieces = 400_000
	text := flopText("REMC", "<REMC>"+strings.Repeat("a<!---->", pieces)+"</REMC>")
	start := time.Now()
	m, err := Decode(text, Options{MaxText: pieces})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Body.(*Flop).Record.Scalars["REMC"].Value; got != strings.Repeat("a", pieces) {
		t.Fatalf("REMC has %d bytes", len(got))
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("took %v: text pieces are copied quadratically", elapsed)
	}
}
