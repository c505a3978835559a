package flight

import (
	"fmt"
	"maps"
	"slices"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Collection is what the state keeps of the items of one collection (R-FLIGHT-3): the
// sequence attribute they carry (published under its SIS name) and their known fields, the
// columns of the collection's detail table. It is the one definition of both: the merge keeps
// only these fields (items) and pkg/flightstore stores exactly these columns, so a state
// stored, reloaded, projected and published is the same state.
type Collection struct {
	// Seq is the sequence attribute's SIS name; "" when the element has none (DELY).
	Seq string
	// Fields are the SIS names of the children and attributes an item keeps; any other is
	// reported as ignored (R-FLIGHT-3).
	Fields []string
}

// collections lists the collections of the state by tag.
var collections = map[string]Collection{
	"GTDT": {Seq: "GTNO", Fields: []string{"GATE", "PGOT", "PGCT", "GOTM", "GCTM", "GTYP"}},
	"CKDT": {Seq: "CKNO", Fields: []string{"CHKC", "CCLS", "PCOT", "PCCT", "COTM", "CCTM", "CTYP"}},
	"CLDT": {Seq: "CLNO", Fields: []string{"BELT", "BCLS", "PCOT", "PCCT", "FBAG", "LBAG", "BTYP"}},
	"CHDT": {Seq: "CHNO", Fields: []string{"CHUT", "CCLS", "PCBT", "PCET", "CBTM", "CETM", "CTYP"}},
	"PSDT": {Seq: "PSNO", Fields: []string{"PSST", "STST", "STET"}},
	"CHOT": {Seq: "CSNO", Fields: []string{"CHTM", "CHID", "CHST"}},
	"DELY": {Fields: []string{"CODE", "STRT", "DURA", "TEXT"}},
	"ABTM": {Seq: "ASNO", Fields: []string{"ABDG", "ABOP", "AOTM"}},
	"ROUT": {Seq: "RTNO", Fields: []string{"APCD", "SCAT", "SCDT"}},
	"ERUT": {Seq: "RTNO", Fields: []string{"APCD", "SCAT", "SCDT"}},
}

// CollectionOf returns the definition of collection tag, and whether tag is one.
func CollectionOf(tag string) (Collection, bool) {
	c, ok := collections[tag]
	return c, ok
}

// CollectionTags are the collections of the state (R-FLIGHT-3), sorted; flightstore stores
// each in a detail table.
var CollectionTags = slices.Sorted(maps.Keys(collections))

// MaxIgnored is how many ignored names a decision reports at most: a record may carry
// thousands of distinct unknown tags (99 items of a collection × 200 in the probe of issue
// #57), and the report is a log line, not a copy of the message, which proc_raw keeps.
const MaxIgnored = 32

// reportIgnored sorts and deduplicates names and keeps the first MaxIgnored of them; a last
// entry says how many more there were.
func reportIgnored(names []string) []string {
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) <= MaxIgnored {
		return names
	}
	more := len(names) - MaxIgnored
	return append(names[:MaxIgnored:MaxIgnored], fmt.Sprintf("… %d more", more))
}

// itemFieldName is how an ignored field of an item is reported: the collection and the
// child or attribute name (the codec keeps both in Item.Fields), GTDT/XYZ.
func itemFieldName(tag, field string) string { return tag + "/" + field }

// unknownFields lists the fields the items of rec's collections tags carry that their
// collection does not keep, each as itemFieldName; items drops them.
func unknownFields(rec sis.FlightRecord, tags []string) []string {
	var out []string
	for _, tag := range tags {
		c, sent := rec.Collections[tag]
		if !sent {
			continue
		}
		known := collections[tag].Fields
		for _, it := range c.Items {
			for k := range it.Fields {
				if !slices.Contains(known, k) {
					out = append(out, itemFieldName(tag, k))
				}
			}
		}
	}
	return out
}
