package flightstore

import (
	"maps"
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/msgexchange/msgexchange/pkg/flight"
)

// DetailCache keeps the details (collections and raw content) of the flights one writer read or
// wrote, each with the version of the flight_schd row they belong to: the row's xmin, the
// transaction that wrote that row version. Every writer of a flight's details upserts its
// flight_schd row in the same transaction (SaveMany, AddUpdates; the history sweep
// deletes the row, a version floor rewrites it), so a row whose xmin is the one an entry holds
// has the details the entry holds, and LoadLocked and the bulk loads of a schedule snapshot
// read the rows alone instead of the ten-table detail read (docs/performance.md, "Changes and
// their cost"). An entry whose xmin no longer matches (a
// write by another process or another term, a transaction that rolled back, a restore) is read
// again. An xmin comes back only after 2^32 transactions, decades of this system's traffic, and
// an entry not touched that long has left the bounded cache long before; or after a restore from
// a physical backup, which ends the pump's term, and the pump empties the cache at each term
// (Reset, D-18).
//
// A nil *DetailCache holds nothing: every load reads the details.
type DetailCache struct {
	entries *lru.Cache[string, details]
}

// details are one flight's detail rows as the loads read them back, and the row version they
// belong to.
type details struct {
	xmin        uint32
	collections map[string][]flight.Item
	raw         map[string][]string
}

// DefaultDetailCacheSize is the number of flights a DetailCache holds by default: a busy day's
// flights with room to spare. An entry is a few kilobytes at most.
const DefaultDetailCacheSize = 4096

// NewDetailCache returns a cache of the details of up to size flights, the least recently used
// dropped first (size ≤ 0: DefaultDetailCacheSize).
func NewDetailCache(size int) *DetailCache {
	if size <= 0 {
		size = DefaultDetailCacheSize
	}
	c, err := lru.New[string, details](size)
	if err != nil {
		panic(err) // only for a size ≤ 0, excluded above
	}
	return &DetailCache{entries: c}
}

// Reset empties the cache. A pump calls it at the start of each term: a server restored from a
// physical backup hands out again transaction IDs it had already given, so an xmin kept from
// before the restore could name a row version written after it (D-18).
func (c *DetailCache) Reset() {
	if c != nil {
		c.entries.Purge()
	}
}

// holds reports whether the cache has an entry for flid, whatever its version; it predicts
// whether a load will need the detail read.
func (c *DetailCache) holds(flid string) bool {
	return c != nil && c.entries.Contains(flid)
}

// fill adds to f the details the cache holds for f's row version xmin, and reports whether it
// had them.
func (c *DetailCache) fill(f *flight.Flight, xmin uint32) bool {
	if c == nil {
		return false
	}
	d, ok := c.entries.Get(f.FLID)
	if !ok || d.xmin != xmin {
		return false
	}
	for tag, items := range d.collections {
		for _, it := range items {
			f.Collections[tag] = append(f.Collections[tag], flight.Item{Seq: it.Seq, Fields: maps.Clone(it.Fields)})
		}
	}
	for tag, list := range d.raw {
		f.Raw[tag] = append(f.Raw[tag], list...)
	}
	return true
}

// put records f's details as the row version xmin stores them.
func (c *DetailCache) put(xmin uint32, f flight.Flight) {
	if c == nil {
		return
	}
	col, raw := storedDetails(f)
	c.entries.Add(f.FLID, details{xmin: xmin, collections: col, raw: raw})
}

// storedDetails are f's details as the detail tables keep them and the detail read returns
// them (detailRows, addDetail): the items of the stored collections in order, each with its
// sequence attribute where the table has one and the non-empty fields it has columns for, and
// the raw content by tag.
func storedDetails(f flight.Flight) (map[string][]flight.Item, map[string][]string) {
	col := map[string][]flight.Item{}
	for _, tag := range flight.CollectionTags {
		c := collections[tag]
		for _, it := range f.Collections[tag] {
			st := flight.Item{Fields: make(map[string]string, len(c.fields))}
			if c.seq != "" {
				st.Seq = it.Seq
			}
			for _, fl := range c.fields {
				if v := it.Fields[fl]; v != "" {
					st.Fields[fl] = v
				}
			}
			col[tag] = append(col[tag], st)
		}
	}
	raw := map[string][]string{}
	for tag, list := range f.Raw {
		if len(list) > 0 {
			raw[tag] = slices.Clone(list)
		}
	}
	return col, raw
}
