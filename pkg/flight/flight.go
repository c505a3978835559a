// Package flight is the flight domain (the R-FLIGHT rules): the authoritative current state of
// one flight and the pure rules that merge a decoded message into it. Nothing here does I/O:
// a processor loads the current state, calls a rule, and writes what the rule returns.
package flight

import (
	"maps"
	"slices"
	"time"
)

// Scalars lists every scalar of the state (R-FLIGHT-3 plus the attribute columns of
// FDIV/FRET/FLAB, BDPB and the derived statuses): each is one flight_schd column, named by
// the tag in lower case. A tag outside this list is not flight state and is never merged.
var Scalars = []string{
	"FFID",
	"ALCD", "ALSC", "FLNO", "MVIN", "SODT", "FLTY", "FLIN", "ACFT", "RENO",
	"TAOP", "TAFL", "TAID", "TRML", "CSOP", "CSFT", "MAID",
	"ESTT", "ACTT", "BOTM", "LACL", "FINT", "APPT", "EGSR", "EGST", "PADT", "NAAT", "NEAT", "PEDT", "FTSS",
	"STND", "PHAG", "FHAG", "MHAG", "CNCL", "REMC", "MAXP", "VIPP", "VIPR", "LBNO", "LBWT", "PAXC", "EXSC", "EXSR",
	"FDIV", "FDIV_DDES", "FDIV_DDIR", "FRET", "FRET_REID", "FLAB", "FLAB_ARES", "BDPB",
	BoardingStatus, LastCallStatus,
}

// State of a flight row.
const (
	Active  = "ACTIVE"
	Deleted = "DELETED"
)

// Item is one element of a collection: its upstream sequence attribute and its fields by tag.
type Item struct {
	Seq    string            `json:"seq,omitempty"`
	Fields map[string]string `json:"fields"`
}

// Flight is the full current state of one FLID. Scalars holds only fields that have a value
// (an empty tag clears, R-FLOP-EMPTY); Collections holds the collections that have ever been
// sent (an empty slice is "no allocation now").
type Flight struct {
	FLID         string
	State        string
	Version      int64
	OperationDay *time.Time // a date in the airport zone; nil when not known
	LastMsgID    int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
	Scalars      map[string]string
	Collections  map[string][]Item
	// Raw is SRVT and VIPF content as sent: kept, never merged or published.
	Raw map[string][]string
	// MAFL is the derived code-share projection of a master (R-CODESHARE-2): never stored,
	// computed from the children in the same transaction; nil on children and deleted flights.
	MAFL []Share
	// Prov is which message last wrote each part (R-ORDER-1): stored, never published.
	Prov Provenance
}

// Share is one element of a master's MAFL: a code-share child that points at it.
type Share struct {
	FLID string `json:"FLID"`
	FLNO string `json:"FLNO"`
}

// New returns an empty active flight.
func New(flid string) Flight {
	return Flight{FLID: flid, State: Active, Scalars: map[string]string{}, Collections: map[string][]Item{}, Raw: map[string][]string{}}
}

// Clone returns a deep copy, so a rule never changes the state it was given.
func (f Flight) Clone() Flight {
	c := f
	c.Scalars = maps.Clone(f.Scalars)
	if c.Scalars == nil {
		c.Scalars = map[string]string{}
	}
	c.Collections = make(map[string][]Item, len(f.Collections))
	for k, items := range f.Collections {
		cp := make([]Item, len(items))
		for i, it := range items {
			cp[i] = Item{Seq: it.Seq, Fields: maps.Clone(it.Fields)}
		}
		c.Collections[k] = cp
	}
	c.Raw = make(map[string][]string, len(f.Raw))
	for k, v := range f.Raw {
		c.Raw[k] = slices.Clone(v)
	}
	c.MAFL = slices.Clone(f.MAFL)
	c.Prov = f.Prov.Clone()
	if f.OperationDay != nil {
		d := *f.OperationDay
		c.OperationDay = &d
	}
	return c
}

// SameContent reports whether two states carry the same business content (scalars,
// collections, raw content, state, operation day and the derived MAFL), ignoring version and
// bookkeeping.
func SameContent(a, b Flight) bool {
	if a.State != b.State || !maps.Equal(a.Scalars, b.Scalars) || !sameDay(a.OperationDay, b.OperationDay) ||
		!slices.Equal(a.MAFL, b.MAFL) {
		return false
	}
	if len(a.Collections) != len(b.Collections) || len(a.Raw) != len(b.Raw) {
		return false
	}
	for k, items := range a.Collections {
		other, ok := b.Collections[k]
		if !ok || len(other) != len(items) {
			return false
		}
		for i := range items {
			if items[i].Seq != other[i].Seq || !maps.Equal(items[i].Fields, other[i].Fields) {
				return false
			}
		}
	}
	for k, v := range a.Raw {
		if !slices.Equal(v, b.Raw[k]) {
			return false
		}
	}
	return true
}

func sameDay(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}
