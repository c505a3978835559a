package flight

import (
	"slices"
	"strings"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Derived status fields (R-FLOP-STATUS: BOTM and LACL "set a status when non-empty, reset it
// when empty"). They are not SIS tags, so their names say what they are; absent is the reset
// state.
const (
	BoardingStatus = "BOARDING_STATUS"
	Boarding       = "BOARDING"
	LastCallStatus = "LAST_CALL_STATUS"
	LastCall       = "LAST_CALL"
)

// rule is the merge of one FLOP STYP: the scalar and collection tags it owns and how it
// applies them.
type rule struct {
	scalars     []string
	collections []string
	// custom replaces the default "present sets, empty clears" for the owned scalars.
	custom func(f *Flight, rec sis.FlightRecord)
	// whole: the first scalar is an element whose presence decides all the scalars (fdiv, fret);
	// link: one of the scalars sent empty decides all of them (turnaround). Either way the
	// scalars are one part of the order rule's (R-ORDER-2) when so decided.
	whole, link bool
}

// flopRules is the table of R-FLOP-1 plus the legacy extras; FDEL has its own path. Its keys
// must equal the codec's FLOP whitelist minus FDEL (TestRulesCoverCodecWhitelist).
var flopRules = map[string]rule{
	// SIS 3.19–3.43.
	"ACFT": {scalars: []string{"ACFT"}},
	"ACTT": {scalars: []string{"ACTT"}},
	"BOTM": {scalars: []string{"BOTM"}},
	"CHOT": {collections: []string{"CHOT"}},
	"FLTY": {scalars: []string{"FLTY"}},
	"CKDT": {collections: []string{"CKDT"}},
	"CLDT": {collections: []string{"CLDT"}},
	"CHDT": {collections: []string{"CHDT"}},
	"CNCL": {scalars: []string{"CNCL"}},
	"ESTT": {scalars: []string{"ESTT"}},
	"FDIV": {scalars: []string{"FDIV", "FDIV_DDES", "FDIV_DDIR"}, custom: fdiv, whole: true},
	"FINT": {scalars: []string{"FINT"}},
	"FLIN": {scalars: []string{"FLIN"}},
	"FRET": {scalars: []string{"FRET", "FRET_REID"}, custom: fret, whole: true},
	"GTDT": {collections: []string{"GTDT"}},
	"LACL": {scalars: []string{"LACL"}},
	"MAXP": {scalars: []string{"MAXP"}},
	"HNAG": {scalars: []string{"FHAG", "PHAG", "MHAG"}},
	"PSDT": {collections: []string{"PSDT"}},
	"RENO": {scalars: []string{"RENO"}},
	"ROUT": {collections: []string{"ROUT"}, custom: rout},
	"TAOP": {scalars: []string{"TAOP", "TAFL", "TAID"}, custom: turnaround, link: true},
	"TRML": {scalars: []string{"TRML"}},
	"VIPP": {scalars: []string{"VIPP", "VIPR"}},
	// Legacy extras: plain fields or collections of the XSD's FLOP section.
	"ABTM": {collections: []string{"ABTM"}},
	"DELY": {collections: []string{"DELY"}},
	"PADT": {scalars: []string{"PADT"}},
	"FTSS": {scalars: []string{"FTSS"}},
	"STND": {scalars: []string{"STND"}},
	"BDPB": {scalars: []string{"BDPB"}},
	"REMC": {scalars: []string{"REMC"}},
}

func (r rule) apply(f *Flight, rec sis.FlightRecord) {
	if r.custom != nil {
		r.custom(f, rec)
		return
	}
	for _, tag := range r.scalars {
		if v, ok := rec.Scalars[tag]; ok && v.Present {
			setScalar(f, tag, v.Value)
		}
	}
	for _, tag := range r.collections {
		if c, ok := rec.Collections[tag]; ok {
			f.Collections[tag] = items(tag, c, nil)
		}
	}
}

// parts are the parts the rule writes for rec (R-ORDER-2): those its merge decides, whether
// it sets or clears them. Each sent tag is its own part, except that an element (FDIV, FRET)
// sent decides all of its tags, and a turnaround with a part sent empty decides all three.
func (r rule) parts(rec sis.FlightRecord) []string {
	out := recordParts(rec)
	sent := func(tag string) bool { v, ok := rec.Scalars[tag]; return ok && v.Present }
	whole := r.whole && sent(r.scalars[0])
	if r.link {
		whole = slices.ContainsFunc(r.scalars, func(t string) bool { return sent(t) && rec.Scalars[t].Value == "" })
	}
	for _, t := range r.scalars {
		if whole || sent(t) {
			out = append(out, t)
		}
	}
	for _, t := range r.collections {
		if _, ok := rec.Collections[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// ignored lists the tags of rec this rule does not own (FLID and FFID are identity, always
// expected; SRVT and VIPF are kept raw by every rule) and the unknown fields of the items of
// the collections it owns (R-FLIGHT-3).
func (r rule) ignored(rec sis.FlightRecord) []string {
	var out []string
	for tag := range rec.Scalars {
		if !slices.Contains(r.scalars, tag) {
			out = append(out, tag)
		}
	}
	for tag := range rec.Collections {
		if !slices.Contains(r.collections, tag) {
			out = append(out, tag)
		}
	}
	for tag := range rec.Raw {
		if tag != "SRVT" && tag != "VIPF" {
			out = append(out, tag)
		}
	}
	return reportIgnored(append(out, unknownFields(rec, r.collections)...))
}

func setScalar(f *Flight, tag, value string) {
	if value == "" {
		delete(f.Scalars, tag)
		return
	}
	f.Scalars[tag] = value
}

// fdiv maps the diversion element (SIS 3.30): DDES is the diversion destination and the flag
// itself, so an empty or missing DDES clears the whole diversion; otherwise the element is
// taken whole (text = reason, DDES, DDIR; an attribute not sent is cleared).
func fdiv(f *Flight, rec sis.FlightRecord) {
	element(f, rec, "FDIV", "FDIV_DDES", "FDIV_DDIR")
}

// fret maps the return element (SIS 3.33) the same way: REID is the flag, the text the reason.
func fret(f *Flight, rec sis.FlightRecord) {
	element(f, rec, "FRET", "FRET_REID")
}

// element applies an attribute-plus-text element whose first attribute is its flag.
func element(f *Flight, rec sis.FlightRecord, tag, flag string, others ...string) {
	el, sent := rec.Scalars[tag]
	if !sent || !el.Present {
		return
	}
	all := append([]string{tag, flag}, others...)
	if rec.Scalars[flag].Value == "" {
		for _, t := range all {
			delete(f.Scalars, t)
		}
		return
	}
	for _, t := range all {
		setScalar(f, t, rec.Scalars[t].Value)
	}
}

// turnaround maps TAOP/TAFL/TAID (SIS 3.41): the three name one link to the other leg, so any
// of them sent empty disconnects the turnaround and clears all three.
func turnaround(f *Flight, rec sis.FlightRecord) {
	tags := [...]string{"TAOP", "TAFL", "TAID"}
	for _, t := range tags {
		if v, ok := rec.Scalars[t]; ok && v.Present && v.Value == "" {
			for _, c := range tags {
				delete(f.Scalars, c)
			}
			return
		}
	}
	for _, t := range tags {
		if v, ok := rec.Scalars[t]; ok && v.Present {
			setScalar(f, t, v.Value)
		}
	}
}

// routPoints is how many ROUT points the state keeps (SIS 3.40: RMS keeps 4).
const routPoints = 4

// rout maps a route update (SIS 3.40): without SCAT/SCDT, and only four points: a departure
// keeps the first four (the next stops), an arrival the last four (the stops before home).
func rout(f *Flight, rec sis.FlightRecord) {
	c, ok := rec.Collections["ROUT"]
	if !ok {
		return
	}
	pts := items("ROUT", c, []string{"SCAT", "SCDT"})
	if len(pts) > routPoints {
		if Movement(*f) == "A" {
			pts = pts[len(pts)-routPoints:]
		} else {
			pts = pts[:routPoints]
		}
	}
	f.Collections["ROUT"] = pts
}

// Movement returns a flight's MVIN ("A" arrival, "D" departure), falling back on the third
// part of its FFID (ALCD-FLNO-MVIN-SODT-FLIN) when MVIN was never sent; "" when neither tells.
func Movement(f Flight) string {
	if m := f.Scalars["MVIN"]; m != "" {
		return m
	}
	if parts := strings.Split(f.Scalars["FFID"], "-"); len(parts) >= 3 {
		return parts[2]
	}
	return ""
}
