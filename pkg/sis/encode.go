package sis

import (
	"encoding/xml"
	"strconv"
	"strings"
	"time"
)

// Encoder writes this system's outbound requests (RQFD, RQRD) for COUTMSGS.
type Encoder struct {
	// Sender is this system's SNDR (msgx outbound sender); it must not be empty, or AODB — and
	// Decode — will reject the request as MALFORMED.
	Sender string
	// Zone is the airport zone DTTM is written in; DefaultZone when nil.
	Zone *time.Location
}

// FormatSEQN renders n as the 6-digit zero-padded SEQN, wrapping after 999999: it is n modulo
// 1,000,000, so 1000000 → "000000" and 1000001 → "000001" (negative n wraps the same way).
func FormatSEQN(n int) string {
	m := n % 1_000_000
	if m < 0 {
		m += 1_000_000
	}
	s := strconv.Itoa(m)
	return strings.Repeat("0", 6-len(s)) + s
}

// EncodeRQFD writes a flight-data request (TYPE=RQFD, STYP=NONE) for the range stdb..stde,
// which are SIS body times (ddMMMyyHHmm or ddMMMyy) written as given. It is answered by SCHD
// with STYP=RESP.
func (e Encoder) EncodeRQFD(seqn int, dttm time.Time, stdb, stde string) string {
	var b strings.Builder
	e.open(&b, seqn, dttm, "RQFD", "NONE")
	b.WriteString("\t<RQFD>\n")
	element(&b, "\t\t", "STDB", stdb)
	element(&b, "\t\t", "STDE", stde)
	b.WriteString("\t</RQFD>\n</MSG>\n")
	return b.String()
}

// EncodeRQRD writes a reference-data request for category (STYP and RTYP are both the
// category). The answer is that category with STYP=RESP; there is no correlation id.
func (e Encoder) EncodeRQRD(seqn int, dttm time.Time, category string) string {
	var b strings.Builder
	e.open(&b, seqn, dttm, "RQRD", category)
	b.WriteString("\t<RQRD>\n")
	element(&b, "\t\t", "RTYP", category)
	b.WriteString("\t</RQRD>\n</MSG>\n")
	return b.String()
}

// EncodeRQRDResource writes the resource-status request: STYP=RSTA and RTYP the resource type
// (BELT, CNTR, GATE or STND). The answer is RSTA with STYP=RESP for that type (R-REF-8:
// the RTYP is part of the match).
func (e Encoder) EncodeRQRDResource(seqn int, dttm time.Time, rtyp string) string {
	var b strings.Builder
	e.open(&b, seqn, dttm, "RQRD", "RSTA")
	b.WriteString("\t<RQRD>\n")
	element(&b, "\t\t", "RTYP", rtyp)
	b.WriteString("\t</RQRD>\n</MSG>\n")
	return b.String()
}

// FormatBodyTime writes t as a SIS body time, ddMMMyyHHmm in the zone t carries (the caller
// gives it in the airport zone), e.g. 01MAR260000.
func FormatBodyTime(t time.Time) string {
	return strings.ToUpper(t.Format("02Jan061504"))
}

// open writes the declaration, the MSG start tag (with the schema attributes the legacy
// envelope carries) and META.
func (e Encoder) open(b *strings.Builder, seqn int, dttm time.Time, typ, styp string) {
	zone := e.Zone
	if zone == nil {
		zone = DefaultZone()
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<MSG xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="unisysaodbsis.xsd">` + "\n")
	b.WriteString("\t<META>\n")
	element(b, "\t\t", "SNDR", e.Sender)
	element(b, "\t\t", "SEQN", FormatSEQN(seqn))
	element(b, "\t\t", "DTTM", dttm.In(zone).Format("20060102150405"))
	element(b, "\t\t", "TYPE", typ)
	element(b, "\t\t", "STYP", styp)
	b.WriteString("\t</META>\n")
}

func element(b *strings.Builder, indent, tag, value string) {
	b.WriteString(indent)
	b.WriteString("<" + tag + ">")
	// EscapeText writes to a strings.Builder, whose Write never fails.
	_ = xml.EscapeText(b, []byte(value))
	b.WriteString("</" + tag + ">\n")
}
