package reference

import (
	"fmt"
	"slices"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// rule is what R-REF-5 says of one category's record.
type rule struct {
	// ignore lists the tags that do not enter the model (SIS declares them unused upstream).
	ignore []string
	// lists are the children that may repeat: always stored as an array, in input order, even
	// when the record carries one.
	lists []string
	// first are repeatable children of which only the first is kept, stored as a single value.
	first []string
	// truncate cuts a tag's text to at most this many characters (runes: names are Chinese).
	truncate map[string]int
	// keep filters a list's values: entries whose text is not in the set are dropped.
	keep map[string][]string
}

// OrgCategories are the OCAT values an ORGN record keeps (R-REF-5: passenger handling,
// maintenance, ground handling). PAX HANDLER and RAMP HANDLER are the samples' values;
// MAINTENANCE is assumed (no sample carries it), see docs/reference-data.md.
func OrgCategories() []string { return []string{"PAX HANDLER", "MAINTENANCE", "RAMP HANDLER"} }

// StandGroupLen is the length SLST's STGP is cut to (R-REF-5).
const StandGroupLen = 8

var rules = map[string]rule{
	"COUL": {ignore: []string{"COUN"}, first: []string{"REGC"}},
	"ARPT": {ignore: []string{"ANAM", "ACTY", "ICCD", "BDIS", "ATYP", "HAUL"}, lists: []string{"ABBR"}},
	"AIRL": {lists: []string{"TRML", "OGRP", "SUBC"}},
	"AIRC": {ignore: []string{"DESC", "CHAP", "MFWT", "MTWT", "MHTM", "MABR"}},
	"REGN": {ignore: []string{"OWID", "MFWT", "MTWT"}},
	"ORGN": {ignore: []string{"ONAM"}, lists: []string{"OCAT"}, keep: map[string][]string{"OCAT": OrgCategories()}},
	"FLTL": {ignore: []string{"FDES", "FCML", "CTYP"}},
	"TLST": {ignore: []string{"TNAM", "TCAT", "TPAX"}},
	"GLST": {},
	"SLST": {ignore: []string{"STNM", "MABS", "FEPU"}, truncate: map[string]int{"STGP": StandGroupLen}},
	// CLST and CHLT share CCOD/CNMC/CTML/CCAT: CLST drops its CCAT, CHLT keeps its own.
	"CLST": {ignore: []string{"CTNM", "CCAT"}},
	"BLST": {ignore: []string{"BTNM", "BCAT"}},
	"CHLT": {},
}

// Stored is one record as it is kept in ref_master.
type Stored struct {
	RKey string
	// Payload is the record by SIS tag name: a single child is its text (a child with
	// attributes or children of its own is an object), a repeatable child is an array in input
	// order. An empty element is "" (data not available), never an absent key.
	Payload map[string]any
	// Dropped says what R-REF-5 left out, for the log: ignored tags, filtered values
	// ("OCAT=CARGO"), later repeats of a first-only tag ("REGC#2"), truncations ("STGP>8").
	Dropped []string
}

// Store applies the R-REF-5 and R-REF-9 rules of rtype to one record. rtype must be one of the 13
// categories; the record must carry its key (the codec guarantees it).
func Store(rtype string, rec sis.RefRecord) (Stored, error) {
	r, ok := rules[rtype]
	if !ok {
		return Stored{}, fmt.Errorf("reference: %q is not a reference category", rtype)
	}
	key := sis.RefKeyTag(rtype)
	out := Stored{RKey: rec.Key}
	var kept []sis.RefField
	seen := map[string]int{}
	for _, f := range rec.Fields {
		seen[f.Tag]++
		switch {
		case f.Tag == key:
		case slices.Contains(r.ignore, f.Tag):
			if seen[f.Tag] == 1 {
				out.Dropped = append(out.Dropped, f.Tag)
			}
			continue
		case slices.Contains(r.first, f.Tag) && seen[f.Tag] > 1:
			out.Dropped = append(out.Dropped, fmt.Sprintf("%s#%d", f.Tag, seen[f.Tag]))
			continue
		}
		if values, ok := r.keep[f.Tag]; ok && !slices.Contains(values, f.Value) {
			out.Dropped = append(out.Dropped, f.Tag+"="+f.Value)
			continue
		}
		if n, ok := r.truncate[f.Tag]; ok {
			if runes := []rune(f.Value); len(runes) > n {
				f.Value = string(runes[:n])
				out.Dropped = append(out.Dropped, fmt.Sprintf("%s>%d", f.Tag, n))
			}
		}
		kept = append(kept, f)
	}
	out.Payload = object(kept, r.lists)
	// A list whose every entry was filtered out is still a list the record sent: an empty array
	// says "none of the kept kinds", which an absent key would not.
	for tag := range r.keep {
		if _, ok := out.Payload[tag]; !ok && seen[tag] > 0 {
			out.Payload[tag] = []any{}
		}
	}
	return out, nil
}

// object turns fields into a map by tag. A tag in lists, or any tag that occurs more than once,
// becomes an array in input order, so a repeat that no rule foresaw is kept rather than lost.
func object(fields []sis.RefField, lists []string) map[string]any {
	count := map[string]int{}
	for _, f := range fields {
		count[f.Tag]++
	}
	m := make(map[string]any, len(count))
	for _, f := range fields {
		v := value(f)
		if count[f.Tag] > 1 || slices.Contains(lists, f.Tag) {
			arr, _ := m[f.Tag].([]any)
			m[f.Tag] = append(arr, v)
			continue
		}
		m[f.Tag] = v
	}
	return m
}

// TextKey holds the text of an element that also has attributes or children.
const TextKey = "TEXT"

// value is a leaf's text, or for an element with attributes or children an object of its
// attributes, its children (by the same rules, nested groups such as SUBC) and its text under
// TEXT. An attribute named like one of the children is kept under "@" + its name.
func value(f sis.RefField) any {
	if len(f.Attrs) == 0 && len(f.Children) == 0 {
		return f.Value
	}
	m := object(f.Children, nil)
	for k, v := range f.Attrs {
		if _, clash := m[k]; clash {
			k = "@" + k
		}
		m[k] = v
	}
	if f.Value != "" || len(f.Children) == 0 {
		m[TextKey] = f.Value
	}
	return m
}
