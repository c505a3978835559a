package traffic

import (
	"encoding/xml"
	"strconv"
	"strings"
	"time"
)

const (
	xmlDecl = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	msgOpen = `<MSG xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="unisysaodbsis.xsd">` + "\n"
)

// body writes indented XML fragments. Indentation is cosmetic (the samples use tabs); text is
// always escaped so Chinese remarks and names survive any XML parser unchanged.
type body struct{ strings.Builder }

func (b *body) indent(depth int) {
	for range depth {
		b.WriteByte('\t')
	}
}

// leaf writes <name>text</name>; an empty text writes <name></name>, the "empty means clear"
// form the samples use (FLOP-CNCL-CNCL-2, FLOP-BOTM-BOTM-2).
func (b *body) leaf(depth int, name, text string) { b.leafAttrs(depth, name, "", text) }

// leafAttrs is leaf with raw attribute text (`MVIN="A" FLIN="I"`), for the reference records
// whose repeated children carry attributes.
func (b *body) leafAttrs(depth int, name, attrs, text string) {
	b.indent(depth)
	b.WriteString("<" + name)
	if attrs != "" {
		b.WriteString(" " + attrs)
	}
	b.WriteString(">")
	_ = xml.EscapeText(&b.Builder, []byte(text)) // a strings.Builder never fails
	b.WriteString("</" + name + ">\n")
}

// timeLeaf writes a body time, or nothing when t is zero (the field is absent).
func (b *body) timeLeaf(depth int, name string, t time.Time) {
	if !t.IsZero() {
		b.leaf(depth, name, FormatTime(t))
	}
}

// open writes <name attr="v" …>; attrs alternate name and value.
func (b *body) open(depth int, name string, attrs ...string) {
	b.indent(depth)
	b.WriteString("<" + name)
	for i := 0; i+1 < len(attrs); i += 2 {
		b.WriteString(" " + attrs[i] + `="`)
		_ = xml.EscapeText(&b.Builder, []byte(attrs[i+1]))
		b.WriteString(`"`)
	}
	b.WriteString(">\n")
}

func (b *body) close(depth int, name string) {
	b.indent(depth)
	b.WriteString("</" + name + ">\n")
}

// meta writes the META block in the samples' field order: SNDR SEQN DTTM TYPE STYP.
func meta(sndr string, seqn int64, dttm time.Time, typ, styp string) string {
	var b body
	b.open(1, "META")
	b.leaf(2, "SNDR", sndr)
	b.leaf(2, "SEQN", strconv.FormatInt(seqn, 10))
	b.leaf(2, "DTTM", formatDTTM(dttm))
	b.leaf(2, "TYPE", typ)
	b.leaf(2, "STYP", styp)
	b.close(1, "META")
	return b.String()
}

// envelope wraps a body (the siblings of META, already indented) into a complete message.
func envelope(sndr string, seqn int64, dttm time.Time, typ, styp, inner string) string {
	return xmlDecl + msgOpen + meta(sndr, seqn, dttm, typ, styp) + inner + "</MSG>"
}

// ADFT renders a SCHD STYP=ADFT message with one FLTR carrying the flight's schedule fields,
// sent by "AODB". Empty optional fields (RENO, TRML, STND) are left out rather than sent
// empty, because ADFT is merged set-only (R-ADFT-1) and an absent field is the
// unambiguous way to say "no value yet".
func ADFT(seqn int64, dttm time.Time, f Flight) string {
	return adft("AODB", seqn, dttm, f)
}

func adft(sndr string, seqn int64, dttm time.Time, f Flight) string {
	var b body
	b.open(1, "SCHD")
	b.leaf(2, "RECS", "1")
	fltr(&b, 2, f)
	b.close(1, "SCHD")
	return envelope(sndr, seqn, dttm, "SCHD", "ADFT", b.String())
}

// fltr writes one FLTR in the SCHD sample's field order.
func fltr(b *body, depth int, f Flight) {
	b.open(depth, "FLTR")
	d := depth + 1
	b.leaf(d, "FLID", f.FLID)
	b.leaf(d, "ALCD", f.ALCD)
	b.leaf(d, "FLNO", f.FLNO)
	b.leaf(d, "MVIN", f.MVIN)
	b.leaf(d, "SODT", FormatTime(f.SODT))
	b.leaf(d, "FLTY", f.FLTY)
	b.leaf(d, "FLIN", f.FLIN)
	rout(b, d, routeTimes(f.MVIN, f.SODT, f.Route))
	for _, kv := range [][2]string{{"ACFT", f.ACFT}, {"RENO", f.RENO}, {"TRML", f.TRML}, {"STND", f.STND}, {"MAID", f.MAID}} {
		if kv[1] != "" {
			b.leaf(d, kv[0], kv[1])
		}
	}
	b.WriteString(f.Extra)
	b.close(depth, "FLTR")
}

// rout writes ROUT elements numbered from 1.
func rout(b *body, depth int, pts []routePoint) { routeElements(b, depth, "ROUT", pts) }

// routeElements writes route points (ROUT or ERUT) numbered from 1.
func routeElements(b *body, depth int, name string, pts []routePoint) {
	for i, p := range pts {
		b.open(depth, name, "RTNO", strconv.Itoa(i+1))
		b.leaf(depth+1, "APCD", p.apcd)
		b.timeLeaf(depth+1, "SCAT", p.scat)
		b.timeLeaf(depth+1, "SCDT", p.scdt)
		b.close(depth, name)
	}
}

// FLOP renders a FLOP message sent by "AODB": the envelope and
// <FLOP><FLID/><FFID/>body</FLOP>. body is raw XML (the caller escapes its text) and is
// inserted verbatim; a trailing newline is added when missing.
func FLOP(seqn int64, dttm time.Time, flid, ffid, styp string, body string) string {
	return flop("AODB", seqn, dttm, flid, ffid, styp, body)
}

func flop(sndr string, seqn int64, dttm time.Time, flid, ffid, styp, inner string) string {
	var b body
	b.open(1, "FLOP")
	b.leaf(2, "FLID", flid)
	b.leaf(2, "FFID", ffid)
	b.WriteString(inner)
	if inner != "" && !strings.HasSuffix(inner, "\n") {
		b.WriteByte('\n')
	}
	b.close(1, "FLOP")
	return envelope(sndr, seqn, dttm, "FLOP", styp, b.String())
}
