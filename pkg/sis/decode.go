package sis

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Options bound and localise decoding. The zero value is usable: a zero or negative bound is
// its default below, which is also the registry's (codec.max-bytes, codec.max-depth,
// codec.max-text take these constants as their defaults).
type Options struct {
	// MaxBytes bounds the message (DefaultMaxBytes).
	MaxBytes int
	MaxDepth int // DefaultMaxDepth
	// MaxText bounds every value: each element's text and each attribute's value, trimmed, in
	// bytes (DefaultMaxText).
	MaxText int
	Zone    *time.Location // airport zone; DefaultZone (UTC+8, Asia/Shanghai) when nil
	// MaxElements bounds the number of elements and attributes together (default one per 16
	// bytes of MaxBytes, at least 4,096, when 0 or negative: 524,288 at 8 MiB). Memory grows
	// with that count, not only with the byte count: 8 MiB of "<a/>" would be two million
	// elements, while SIS averages about 18 bytes per element.
	MaxElements int
}

// The decoder's default bounds.
const (
	// DefaultMaxBytes: a generated 2,000-flight SCHD DNLD is about 1.8 MB, so the default
	// admits four times that.
	DefaultMaxBytes = 8 << 20
	DefaultMaxDepth = 64
	// DefaultMaxText: the longest SIS fields (remarks) are a few hundred characters; a longer
	// value would be stored, projected and published as it is.
	DefaultMaxText = 4 << 10
	// bytesPerElement derives the default element bound from MaxBytes; minElements keeps it
	// usable when MaxBytes is small.
	bytesPerElement = 16
	minElements     = 4096
)

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxText <= 0 {
		o.MaxText = DefaultMaxText
	}
	if o.MaxElements <= 0 {
		o.MaxElements = max(o.MaxBytes/bytesPerElement, minElements)
	}
	if o.Zone == nil {
		o.Zone = DefaultZone()
	}
	return o
}

// Decode decodes text read from the inbox column. The text is already characters: an
// encoding="GBK" declaration is not applied again (BytesToText did that before storing).
//
// The error, when not nil, is a *DecodeError: MALFORMED for an illegal message, CODEC_ERROR for a
// well-formed one this codec cannot interpret (docs/codec.md). When a message has both kinds of
// defect, MALFORMED is reported, since no codec change would make it processable.
func Decode(text string, opts Options) (*Message, error) {
	o := opts.withDefaults()
	if len(text) > o.MaxBytes {
		return nil, malformed("/", fmt.Sprintf("message is %d bytes, over the limit of %d (codec.max-bytes)", len(text), o.MaxBytes), nil)
	}
	if !utf8.ValidString(text) {
		return nil, malformed("/", fmt.Sprintf("invalid UTF-8 at byte offset %d", invalidUTF8At(text)), nil)
	}
	// A byte-order mark may survive a charset conversion upstream; encoding/xml would read it as
	// text before the root element.
	text = strings.TrimPrefix(text, "\ufeff")
	t, err := parseTree(text, limits{maxDepth: o.MaxDepth, maxNodes: o.MaxElements, maxText: o.MaxText})
	if err != nil {
		return nil, err
	}
	d := &decoder{t: t, zone: o.Zone}
	msg, derr := d.message()
	if derr != nil {
		return nil, derr
	}
	if d.codecErr != nil {
		return nil, d.codecErr
	}
	return msg, nil
}

func invalidUTF8At(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// decoder interprets a parsed tree. MALFORMED findings end decoding at once; the first
// CODEC_ERROR is remembered and reported only if nothing MALFORMED is found later.
type decoder struct {
	t        *tree
	zone     *time.Location
	codecErr *DecodeError
}

func (d *decoder) codec(path, reason string, cause error) {
	if d.codecErr == nil {
		d.codecErr = codecError(path, reason, cause)
	}
}

func (d *decoder) node(i int32) *node { return d.t.at(i) }

func (d *decoder) message() (*Message, *DecodeError) {
	root := d.node(0)
	if root.name != "MSG" {
		return nil, malformed("/"+root.name, fmt.Sprintf("root element is <%s>, not <MSG>", root.name), nil)
	}
	meta := int32(-1)
	for c := root.first; c >= 0; c = d.node(c).next {
		if d.node(c).name == "META" {
			if meta >= 0 {
				return nil, malformed("/MSG/META", "more than one META element", nil)
			}
			meta = c
		}
	}
	if meta < 0 {
		return nil, malformed("/MSG", "no META element", nil)
	}
	m, err := d.meta(meta)
	if err != nil {
		return nil, err
	}
	body, err := d.body(m)
	if err != nil {
		return nil, err
	}
	return &Message{Meta: m, Body: body}, nil
}

func (d *decoder) meta(i int32) (Meta, *DecodeError) {
	var vals [5]string
	var seen [5]bool
	names := [5]string{"SNDR", "SEQN", "DTTM", "TYPE", "STYP"}
	for c := d.node(i).first; c >= 0; c = d.node(c).next {
		n := d.node(c)
		k := -1
		for j, name := range names {
			if n.name == name {
				k = j
				break
			}
		}
		if k < 0 {
			// META may grow fields; none of the ones we do not know affects identity or dispatch.
			continue
		}
		path := "/MSG/META/" + n.name
		if seen[k] {
			return Meta{}, malformed(path, "repeated "+n.name+": the message identity is ambiguous", nil)
		}
		if d.t.hasChildren(c) {
			return Meta{}, malformed(path, n.name+" must be text, not elements", nil)
		}
		seen[k], vals[k] = true, trim(n.text)
	}
	for k, name := range names {
		if !seen[k] {
			return Meta{}, malformed("/MSG/META/"+name, "required META field "+name+" is missing", nil)
		}
		if vals[k] == "" {
			return Meta{}, malformed("/MSG/META/"+name, "required META field "+name+" is empty", nil)
		}
	}
	m := Meta{SNDR: vals[0], SEQNText: vals[1], TYPE: vals[3], STYP: vals[4]}
	seqn, ok := parseUint(vals[1])
	if !ok {
		return Meta{}, malformed("/MSG/META/SEQN", fmt.Sprintf("SEQN %q is not a non-negative integer", vals[1]), nil)
	}
	m.SEQN = int64(seqn)
	dttm, ok := parseDTTM(vals[2], d.zone)
	if !ok {
		return Meta{}, malformed("/MSG/META/DTTM", fmt.Sprintf("DTTM %q is not yyyyMMddHHmmss", vals[2]), nil)
	}
	m.DTTM = dttm
	return m, nil
}

// parseUint accepts ASCII digits only (no sign, no spaces) that fit in an int64.
func parseUint(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || int64(int(v)) != v {
		return 0, false
	}
	return int(v), true
}

func (d *decoder) body(m Meta) (Body, *DecodeError) {
	switch m.TYPE {
	case "FLOP":
		if !flopSTYP(m.STYP) {
			return &Unsupported{Reason: "FLOP STYP " + m.STYP + " is not in the FLOP whitelist (R-FLOP-1)"}, nil
		}
		b, err := d.single("FLOP")
		if err != nil {
			return nil, err
		}
		rec, err := d.flight(b, "/MSG/FLOP")
		if err != nil {
			return nil, err
		}
		return &Flop{Record: rec}, nil
	case "SCHD":
		switch m.STYP {
		case "DNLD", "RESP", "ADFT":
			return d.schd(m.STYP)
		}
		return &Unsupported{Reason: "SCHD STYP " + m.STYP + " is not DNLD, RESP or ADFT"}, nil
	case "RSTA":
		switch m.STYP {
		case "DNLD", "RESP":
			return d.rsta(m.STYP)
		}
		return &Unsupported{Reason: "RSTA STYP " + m.STYP + " is not DNLD or RESP"}, nil
	case "RQFD":
		if m.STYP != "NONE" {
			return &Unsupported{Reason: "RQFD STYP " + m.STYP + " is not NONE"}, nil
		}
		return d.rqfd()
	case "RQRD":
		return d.rqrd()
	case "EROR":
		return d.eror()
	}
	if RefKeyTag(m.TYPE) != "" {
		switch m.STYP {
		case "DNLD", "RESP", "ADD", "UPD", "DEL":
			return d.refData(m.TYPE, m.STYP)
		}
		return &Unsupported{Reason: m.TYPE + " STYP " + m.STYP + " is not DNLD, RESP, ADD, UPD or DEL"}, nil
	}
	return &Unsupported{Reason: "TYPE " + m.TYPE + " is not supported"}, nil
}

// flopSTYP is the FLOP whitelist of R-FLOP-1 (FDEL included) plus the legacy extras.
func flopSTYP(s string) bool {
	switch s {
	case "ACFT", "ACTT", "BOTM", "CHOT", "FLTY", "CKDT", "CLDT", "CHDT", "CNCL", "ESTT", "FDEL",
		"FDIV", "FINT", "FLIN", "FRET", "GTDT", "LACL", "MAXP", "HNAG", "PSDT", "RENO", "ROUT",
		"TAOP", "TRML", "VIPP",
		"ABTM", "DELY", "PADT", "FTSS", "STND", "BDPB", "REMC":
		return true
	}
	return false
}

// single finds the one body element named tag under MSG. A second body is MALFORMED (which one
// would be the message?); any other unknown sibling is a CODEC_ERROR.
func (d *decoder) single(tag string) (int32, *DecodeError) {
	found := int32(-1)
	root := d.node(0)
	if trim(root.text) != "" {
		d.codec("/MSG", "unexpected text directly under MSG", nil)
	}
	for c := root.first; c >= 0; c = d.node(c).next {
		switch d.node(c).name {
		case "META":
		case tag:
			if found >= 0 {
				return -1, malformed("/MSG/"+tag, "more than one "+tag+" body", nil)
			}
			found = c
		default:
			d.codec("/MSG/"+d.node(c).name, "unexpected element beside the "+tag+" body", nil)
		}
	}
	if found < 0 {
		return -1, malformed("/MSG/"+tag, "payload missing: no "+tag+" element for TYPE "+tag, nil)
	}
	return found, nil
}

// leafFields reads an element's children as text fields (RQFD, RQRD, EROR bodies). When allowed
// is not empty, any other child is a CODEC_ERROR.
func (d *decoder) leafFields(i int32, path string, allowed ...string) map[string]Field {
	out := make(map[string]Field)
	if trim(d.node(i).text) != "" {
		d.codec(path, "unexpected text in "+d.node(i).name, nil)
	}
	for c := d.node(i).first; c >= 0; c = d.node(c).next {
		n := d.node(c)
		p := path + "/" + n.name
		if len(allowed) > 0 && !contains(allowed, n.name) {
			d.codec(p, "unexpected element in "+d.node(i).name, nil)
			continue
		}
		if d.t.hasChildren(c) {
			d.codec(p, n.name+" has child elements where text was expected", nil)
			continue
		}
		if _, dup := out[n.name]; dup {
			d.codec(p, "repeated "+n.name, nil)
			continue
		}
		out[n.name] = Field{Present: true, Value: trim(n.text)}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (d *decoder) rqfd() (Body, *DecodeError) {
	b, err := d.single("RQFD")
	if err != nil {
		return nil, err
	}
	f := d.leafFields(b, "/MSG/RQFD", "STDB", "STDE")
	r := &RQFD{STDB: f["STDB"], STDE: f["STDE"]}
	d.checkTime("/MSG/RQFD/STDB", "STDB", r.STDB)
	d.checkTime("/MSG/RQFD/STDE", "STDE", r.STDE)
	return r, nil
}

func (d *decoder) rqrd() (Body, *DecodeError) {
	b, err := d.single("RQRD")
	if err != nil {
		return nil, err
	}
	f := d.leafFields(b, "/MSG/RQRD", "RTYP")
	if f["RTYP"].Value == "" {
		return nil, malformed("/MSG/RQRD/RTYP", "RQRD without a category (RTYP missing or empty)", nil)
	}
	return &RQRD{RTYP: f["RTYP"].Value}, nil
}

func (d *decoder) eror() (Body, *DecodeError) {
	b, err := d.single("EROR")
	if err != nil {
		return nil, err
	}
	return &Eror{Fields: d.leafFields(b, "/MSG/EROR")}, nil
}

// checkTime records a CODEC_ERROR when a sent, non-empty time-typed value is not a SIS time.
// Empty stays legal: for flight data it means clear.
func (d *decoder) checkTime(path, tag string, f Field) {
	if err := d.timeErr(f); err != nil {
		d.badTime(path, tag, f, err)
	}
}

// timeErr is checkTime's test alone, so hot loops build the path only on failure.
func (d *decoder) timeErr(f Field) error {
	if !f.Present || f.Value == "" {
		return nil
	}
	_, err := ParseTime(f.Value, d.zone)
	return err
}

func (d *decoder) badTime(path, tag string, f Field, err error) {
	d.codec(path, fmt.Sprintf("%s value %q is not a known time format (ddMMMyyHHmm, ddMMMyy, HHmm)", tag, f.Value), err)
}

// recs parses a RECS element: a non-negative integer, else CODEC_ERROR.
func (d *decoder) recs(i int32, path string) int {
	if d.t.hasChildren(i) {
		d.codec(path, "RECS has child elements where a count was expected", nil)
		return RECSAbsent
	}
	v := trim(d.node(i).text)
	n, ok := parseUint(v)
	if !ok {
		d.codec(path, fmt.Sprintf("RECS %q is not a non-negative integer", v), nil)
		return RECSAbsent
	}
	return n
}

func indexed(base, tag string, k int) string {
	return base + "/" + tag + "[" + strconv.Itoa(k) + "]"
}
