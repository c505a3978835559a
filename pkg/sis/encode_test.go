package sis

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestIdentity(t *testing.T) {
	m := Meta{SNDR: "AODB", TYPE: "FLOP", STYP: "ESTT", SEQN: 1243, SEQNText: "001243",
		DTTM: time.Date(2024, 3, 15, 0, 30, 0, 0, DefaultZone())}
	if got := Identity(m, false); got != "AODB|FLOP|ESTT|1243" {
		t.Errorf("Identity = %q", got)
	}
	// 00:30 local is still the 14th in UTC: the boundary is the airport-local date.
	if got := Identity(m, true); got != "AODB|FLOP|ESTT|1243|20240315" {
		t.Errorf("Identity with day boundary = %q", got)
	}
	// Leading zeros do not make a different message.
	dec, err := Decode(strings.Replace(flopText("ESTT", "<ESTT/>"), "<SEQN>1</SEQN>", "<SEQN>0001243</SEQN>", 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := Identity(dec.Meta, false); got != "AODB|FLOP|ESTT|1243" {
		t.Errorf("Identity of decoded = %q", got)
	}
	if got := Identity(dec.Meta, true); got != "AODB|FLOP|ESTT|1243|20240315" {
		t.Errorf("Identity of decoded with day boundary = %q", got)
	}
}

func TestFormatSEQN(t *testing.T) {
	for n, want := range map[int]string{
		0: "000000", 1: "000001", 42: "000042", 999999: "999999", 1000000: "000000",
		1000001: "000001", 123456789: "456789", -1: "999999",
	} {
		if got := FormatSEQN(n); got != want {
			t.Errorf("FormatSEQN(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestEncoder(t *testing.T) {
	shanghai := DefaultZone()
	e := Encoder{Sender: "MSGX"}
	// 18:00 UTC is 02:00 next day in the airport zone.
	dttm := time.Date(2024, 3, 14, 18, 0, 0, 0, time.UTC)

	rqfd := e.EncodeRQFD(1000007, dttm, "15MAR240000", "16MAR240000")
	for _, want := range []string{"<SEQN>000007</SEQN>", "<DTTM>20240315020000</DTTM>", "<TYPE>RQFD</TYPE>", "<STYP>NONE</STYP>", "<SNDR>MSGX</SNDR>"} {
		if !strings.Contains(rqfd, want) {
			t.Errorf("RQFD lacks %s:\n%s", want, rqfd)
		}
	}
	m, err := Decode(rqfd, Options{Zone: shanghai})
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := Meta{SNDR: "MSGX", TYPE: "RQFD", STYP: "NONE", SEQN: 7, SEQNText: "000007", DTTM: time.Date(2024, 3, 15, 2, 0, 0, 0, shanghai)}
	if !reflect.DeepEqual(m.Meta, wantMeta) {
		t.Errorf("Meta %+v, want %+v", m.Meta, wantMeta)
	}
	if !reflect.DeepEqual(m.Body, &RQFD{STDB: present("15MAR240000"), STDE: present("16MAR240000")}) {
		t.Errorf("RQFD body %+v", m.Body)
	}

	rsta := e.EncodeRQRDResource(8, dttm, "GATE")
	m, err = Decode(rsta, Options{Zone: shanghai})
	if err != nil {
		t.Fatal(err)
	}
	if m.Meta.TYPE != "RQRD" || m.Meta.STYP != "RSTA" || !reflect.DeepEqual(m.Body, &RQRD{RTYP: "GATE"}) {
		t.Errorf("RSTA request decodes as %+v %+v", m.Meta, m.Body)
	}
	if got := FormatBodyTime(time.Date(2026, 3, 1, 23, 59, 0, 0, shanghai)); got != "01MAR262359" {
		t.Errorf("FormatBodyTime = %q, want 01MAR262359", got)
	}
	if _, err := ParseTime(FormatBodyTime(time.Date(2026, 12, 9, 0, 0, 0, 0, shanghai)), shanghai); err != nil {
		t.Errorf("FormatBodyTime does not parse back: %v", err)
	}

	rqrd := Encoder{Sender: "A&B", Zone: time.UTC}.EncodeRQRD(5, dttm, "GLST")
	m, err = Decode(rqrd, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Meta.SNDR != "A&B" || m.Meta.STYP != "GLST" || m.Meta.TYPE != "RQRD" || m.Meta.SEQNText != "000005" {
		t.Errorf("Meta %+v", m.Meta)
	}
	if !strings.Contains(rqrd, "<SNDR>A&amp;B</SNDR>") || !strings.Contains(rqrd, "<DTTM>20240314180000</DTTM>") {
		t.Errorf("RQRD escaping or zone:\n%s", rqrd)
	}
	if !reflect.DeepEqual(m.Body, &RQRD{RTYP: "GLST"}) {
		t.Errorf("RQRD body %+v", m.Body)
	}
}
