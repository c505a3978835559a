package sis

import "time"

// Meta is the META envelope every SIS message carries.
type Meta struct {
	SNDR, TYPE, STYP string
	SEQN             int64
	// SEQNText keeps SEQN exactly as sent (leading zeros included) for audit; identity uses SEQN.
	SEQNText string
	// DTTM is META.DTTM (yyyyMMddHHmmss) read as airport local time (Options.Zone).
	DTTM time.Time
}

// Message is one decoded inbox message.
type Message struct {
	Meta Meta
	Body Body
}

// Body is sealed: exactly the pointer kinds in this package implement it, so a type switch over
// *Flop, *Schd, *RefData, *ResourceStatus, *RQFD, *RQRD, *Eror and *Unsupported is exhaustive.
// Pointer receivers make a `case sis.Flop:` (value) a compile error instead of a silent miss.
type Body interface{ isBody() }

// Field distinguishes "not sent" from "sent empty" (for flight data an empty element means clear,
// R-FLOP-EMPTY; for reference data it means "not available", R-REF-4).
type Field struct {
	Present bool
	// Value is the text as sent with XML white space (space, tab, CR, LF) trimmed at both ends;
	// "" with Present=true means the element (or attribute) was sent empty.
	Value string
}

// FlightRecord is the shape shared by a FLOP body and each SCHD FLTR record.
type FlightRecord struct {
	FLID string
	FFID Field
	// Scalars by storage name: the SIS tag (e.g. "ESTT", "CNCL", "STND"). An element with
	// attributes gives its text under the tag and each attribute under TAG_ATTR:
	// "FDIV","FDIV_DDES","FDIV_DDIR"; "FRET","FRET_REID"; "FLAB","FLAB_ARES".
	Scalars map[string]Field
	// Collections present in the message, keyed "GTDT","CKDT","CLDT","CHDT","PSDT","CHOT",
	// "DELY","ABTM","ROUT","ERUT". A collection that was not sent has no key.
	Collections map[string]*Collection
	// Raw holds SRVT and VIPF inner XML as sent (trimmed), one entry per element, in order (kept,
	// never merged). Any other element that has child elements but is not a known collection
	// (PORT, TIPT, PSHT ...) is kept here the same way rather than dropped.
	Raw map[string][]string
	// Order lists the child tags in the order they appeared (for diagnostics).
	Order []string
}

// Collection is one repeated flight collection as sent.
type Collection struct {
	// NoAllocation is true when the collection was sent as its single …NO="0" element ("no
	// allocation now"), or for DELY as a single bare <DELY/> (no attributes, no text). Items is
	// then empty.
	NoAllocation bool
	// Items in message order; never de-duplicated (the same resource twice is two allocations).
	Items []Item
}

// Item is one element of a collection.
type Item struct {
	// Seq is the sequence attribute value (GTNO, CKNO, CLNO, CHNO, PSNO, CSNO, RTNO, ASNO); ""
	// for DELY and when the attribute was not sent. It is kept as text: upstream may repeat it.
	Seq string
	// Fields holds child elements by tag, plus any attribute other than the sequence attribute
	// by attribute name. For DELY: "CODE","STRT","DURA" (attributes) and "TEXT" (the text,
	// always Present).
	Fields map[string]Field
}

// Flop is TYPE=FLOP with an STYP from the whitelist of R-FLOP-1, a legacy extra (ABTM DELY PADT
// FTSS STND BDPB REMC) or FDEL. Meta.STYP tells which.
type Flop struct{ Record FlightRecord }

// Schd is TYPE=SCHD with STYP DNLD, RESP or ADFT.
type Schd struct {
	STYP string
	// RECS is the declared record count, or RECSAbsent when the message has no RECS element.
	// The whole-package check (declared versus len(Records)) is the processor's decision.
	RECS    int
	Records []FlightRecord
}

// RECSAbsent is the RECS value of a message that did not declare a count.
const RECSAbsent = -1

// RefData is one of the 13 reference categories (R-REF-1) with STYP DNLD, RESP, ADD, UPD
// or DEL.
type RefData struct {
	Category string
	STYP     string
	RECS     int // RECSAbsent when not declared
	Records  []RefRecord
}

// RefRecord is one category record.
type RefRecord struct {
	// Key is the value of the category's key tag (COUC, ITCD, ITOP ...; see RefKeyTag).
	Key string
	// Fields in input order, the key element included; repeated children are kept as ordered
	// entries.
	Fields []RefField
}

// RefField is one child element of a reference record, recursively (SUBC groups).
type RefField struct {
	Tag      string
	Attrs    map[string]string // nil when the element has no attributes
	Value    string            // trimmed text
	Children []RefField
}

// ResourceStatus is TYPE=RSTA (R-RSTA-1). Its record shape is an assumption, see
// docs/codec.md: <RSTA><RTYP/><RSID/><STAT/><STRT/><ENDT/></RSTA> directly under MSG.
type ResourceStatus struct {
	STYP    string
	RECS    int // RECSAbsent when not declared (a DNLD is a single update)
	Records []RSTARecord
}

// RSTARecord is one resource status: RTYP is BELT, CNTR, GATE or STND; STAT is E or D.
type RSTARecord struct {
	RTYP, RSID, STAT string
	// Start and End are the STRT and ENDT elements (validated body times). An absent End means
	// disabled until the next status event.
	Start, End Field
}

// RQFD is a flight-data request: the covered range.
type RQFD struct{ STDB, STDE Field }

// RQRD is a reference-data request for one category.
type RQRD struct{ RTYP string }

// Eror is an EROR message: its child elements by tag.
type Eror struct{ Fields map[string]Field }

// Unsupported is any other TYPE or STYP: legal, never MALFORMED (R-IDENT-3).
type Unsupported struct{ Reason string }

func (*Flop) isBody()           {}
func (*Schd) isBody()           {}
func (*RefData) isBody()        {}
func (*ResourceStatus) isBody() {}
func (*RQFD) isBody()           {}
func (*RQRD) isBody()           {}
func (*Eror) isBody()           {}
func (*Unsupported) isBody()    {}
