package sis

import (
	"fmt"
	"strings"
	"testing"
)

// genSchedule writes a SCHD DNLD of n flights shaped like the shared SCHD sample, with the
// collections a busy departure carries (about 1 KiB and 50 elements per flight).
func genSchedule(n int) string {
	var b strings.Builder
	b.Grow(n * 1400)
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<MSG xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="unisysaodbsis.xsd">
<META><SNDR>AODB</SNDR><SEQN>345935</SEQN><DTTM>20240315020000</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP></META>
<SCHD>
`)
	fmt.Fprintf(&b, "<RECS>%d</RECS>\n", n)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `<FLTR>
<FLID>%d</FLID>
<ALCD>MU</ALCD>
<FLNO>MU%04d</FLNO>
<MVIN>D</MVIN>
<SODT>15MAR24%02d%02d</SODT>
<FLTY>W</FLTY>
<FLIN>D</FLIN>
<ROUT RTNO="1">
<APCD>SHA</APCD>
<SCDT>15MAR241835</SCDT>
</ROUT>
<ROUT RTNO="2">
<APCD>XIY</APCD>
<SCAT>15MAR242110</SCAT>
</ROUT>
<ACFT>32N</ACFT>
<RENO>B-%04d</RENO>
<TAOP>MU</TAOP>
<TAFL>MU%04d</TAFL>
<TAID>%d</TAID>
<TRML>T2</TRML>
<MAXP>186</MAXP>
<STND>%d</STND>
<ESTT></ESTT>
<PSDT PSNO="1">
<PSST>%d</PSST>
<STST>15MAR241700</STST>
<STET>15MAR241850</STET>
</PSDT>
<GTDT GTNO="1">
<GATE>A%02d</GATE>
<PGOT>15MAR241750</PGOT>
<PGCT>15MAR241815</PGCT>
</GTDT>
<CKDT CKNO="1">
<CHKC>%02d</CHKC>
<PCOT>15MAR241530</PCOT>
<PCCT>15MAR241750</PCCT>
</CKDT>
<PHAG>310002</PHAG>
<FHAG>310001</FHAG>
<ERUT RTNO="1">
<APCD>SHA</APCD>
<SCDT>15MAR241835</SCDT>
</ERUT>
<ERUT RTNO="2">
<APCD>XIY</APCD>
<SCAT>15MAR242110</SCAT>
</ERUT>
<REMC>正常航班</REMC>
<FTSS>RCFLOP</FTSS>
</FLTR>
`, 100000+i, i%10000, i%24, i%60, i%10000, i%10000, 200000+i, 100+i%200, 100+i%200, i%40, i%99)
	}
	b.WriteString("</SCHD>\n</MSG>\n")
	return b.String()
}

func TestGeneratedSchedule(t *testing.T) {
	m, err := Decode(genSchedule(2000), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Body.(*Schd)
	if s.RECS != 2000 || len(s.Records) != 2000 || s.Records[1999].FLID != "101999" || len(s.Records[7].Collections) != 5 {
		t.Fatalf("RECS %d, %d records", s.RECS, len(s.Records))
	}
}

func BenchmarkDecode(b *testing.B) {
	flop := flopText("GTDT", `<FFID>MU-MU5101-D-15MAR240830-D</FFID>
<GTDT GTNO="1"><GATE>A12</GATE><PGOT>15MAR240750</PGOT><PGCT>15MAR240815</PGCT><GOTM>15MAR240752</GOTM><GTYP>D</GTYP></GTDT>
<GTDT GTNO="2"><GATE>A14</GATE><PGOT>15MAR240750</PGOT><PGCT>15MAR240815</PGCT><GTYP>D</GTYP></GTDT>`)
	for _, bc := range []struct {
		name string
		text string
	}{
		{"FLOP", flop},
		{"SCHD-DNLD-2000", genSchedule(2000)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				if _, err := Decode(bc.text, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
