package flight

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Event targets and types of the outbox (R-OUTBOX-8).
const (
	TargetMsg  = "KAFKA:msg"
	TargetSchd = "KAFKA:schd"
	Upsert     = "UPSERT"
	Tombstone  = "TOMBSTONE"
)

// Event is one outbox event a rule asks for; the processor writes it in the same transaction
// as the state.
type Event struct {
	Target  string
	FLID    string
	Type    string
	Version int64
	Payload []byte // nil for a TOMBSTONE on KAFKA:schd
}

// Input is one decoded flight record and the context the rules need.
type Input struct {
	MsgID  int64
	STYP   string
	Now    time.Time
	Record sis.FlightRecord
	// Children are the flights whose MAID is Record.FLID, loaded in the same transaction as the
	// target: a master's MAFL is derived from them (R-CODESHARE-2).
	Children []Flight
	// VersionFloor is the lowest version the FLID has already used outside the current state
	// (its archived versions and the history sweep's tombstone); a flight created again for
	// that FLID starts above it, so consumers ordering by (FLID, STATE_VERSION) and the
	// KAFKA:schd upsert take the new flight as newer than the tombstone. 0 when the FLID was
	// never archived.
	VersionFloor int64
	// Archived is the last message of the flight the history sweep moved out for this FLID (0
	// when none): a schedule older than it would bring back what newer messages ended
	// (R-ORDER-4).
	Archived int64
}

// Decision is what a rule decided for its target: the next full state and its events, or a
// skip reason.
type Decision struct {
	Next    Flight
	Changed bool
	Events  []Event
	// Skip, when set, makes the message SKIPPED with this reason and changes nothing.
	Skip string
	// Ignored lists the tags the message carried that its STYP does not own (a FLOP changes
	// only what its STYP expresses, R-FLOP-1), or that are not flight state, and the fields of
	// collection items their collection does not keep (GTDT/XYZ, R-FLIGHT-3); they are
	// reported, not merged: sorted, once each, at most MaxIgnored of them and a count of the rest.
	Ignored []string
	// Superseded names the parts the message would have written that a newer message wrote,
	// each with that message (R-ORDER-2); PartState when a newer word on the flight's existence
	// stands.
	Superseded map[string]int64
	// Recorded reports a decision that changed nothing to publish but the provenance: Next's
	// provenance is to be written, without a version or an event.
	Recorded bool
	// Ended reports that the message deleted the flight at its ID (it was active then), even
	// if a newer schedule brought it back: a master's children go with it (R-CODESHARE-4).
	Ended bool
}

// Skip reasons for a flight message whose target cannot take it (R-FLOP-TARGET; the designs leave the
// outcome open; see docs/flight-domain.md).
const (
	SkipUnknownFlight = "unknown-flight"
	SkipDeletedFlight = "deleted-flight"
)

// DayRule derives a flight's operation day from its SODT (R-FLIGHT-4).
type DayRule struct {
	Zone *time.Location
	// Cutover is the local time of day before which a flight belongs to the previous day.
	Cutover time.Duration
}

// OperationDay returns the operation day of a schedule time.
func (r DayRule) OperationDay(sodt time.Time) time.Time {
	zone := r.Zone
	if zone == nil {
		zone = sis.DefaultZone()
	}
	local := sodt.In(zone)
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, zone)
	if local.Sub(midnight) < r.Cutover {
		local = local.AddDate(0, 0, -1)
	}
	return time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
}

// day parses a SODT value into an operation day; ok is false for an absent, empty, seasonal
// (HHmm, no date) or unparsable value.
func (r DayRule) day(sodt string) (time.Time, bool) {
	if len(sodt) != 11 && len(sodt) != 7 {
		return time.Time{}, false
	}
	t, err := sis.ParseTime(sodt, r.Zone)
	if err != nil {
		return time.Time{}, false
	}
	return r.OperationDay(t), true
}

// ApplyFLOP merges a dynamic operational update (R-FLOP-1) with the rule of its STYP:
// only the fields and collections that STYP owns change; an empty tag clears; a carried
// collection replaces the stored one whole, in message order. An unknown or deleted target is
// skipped (docs/flight-domain.md). Out of ID order, the flight must have been active at the
// message's ID, and each part a newer message wrote is left as it is (R-ORDER-2, R-ORDER-3).
func ApplyFLOP(cur *Flight, in Input) Decision {
	r, ok := flopRules[in.STYP]
	switch {
	case !ok:
		// The codec turns an STYP outside the whitelist into *sis.Unsupported; reaching here is
		// a routing bug, and guessing a merge would be the "generic merge" R-FLOP-1 forbids.
		return Decision{Skip: "unsupported: FLOP STYP " + in.STYP + " has no rule"}
	case cur == nil:
		return Decision{Skip: SkipUnknownFlight}
	}
	switch at := cur.stateAt(in.MsgID); {
	case at == Deleted && cur.State == Deleted:
		return Decision{Skip: SkipDeletedFlight}
	case at != Active:
		// The flight did not exist yet, or was deleted, at this message's ID and a newer word
		// brought it back: in ID order the message changed nothing.
		return Decision{Skip: SupersededReason(map[string]int64{PartState: cur.newestLife()})}
	}
	// Active at the message's ID. A newer deletion stands (R-ORDER-4), and the message's parts
	// go to the details the deleted flight keeps, as in ID order; nothing is published.
	next := cur.Clone()
	if in.Record.FFID.Present && in.Record.FFID.Value != "" {
		next.Scalars["FFID"] = in.Record.FFID.Value
	}
	r.apply(&next, in.Record)
	keepRaw(&next, in.Record)
	superseded := take(*cur, &next, r.parts(in.Record), in.MsgID)
	if cur.State == Deleted {
		superseded = withState(superseded, cur.newestLife())
	}
	d := finish(*cur, next, in)
	d.Ignored = r.ignored(in.Record)
	d.Superseded = superseded
	return d.skipIfSuperseded()
}

// withState adds to a superseded list the newer word on the flight's existence, message n.
func withState(superseded map[string]int64, n int64) map[string]int64 {
	if superseded == nil {
		superseded = map[string]int64{}
	}
	superseded[PartState] = n
	return superseded
}

// skipIfSuperseded makes a decision that writes nothing, not even provenance, because newer
// messages wrote everything it would have, a skip (R-ORDER-2).
func (d Decision) skipIfSuperseded() Decision {
	if !d.Changed && !d.Recorded && len(d.Superseded) > 0 {
		d.Skip = SupersededReason(d.Superseded)
	}
	return d
}

// ApplyADFT merges a single-flight schedule add/change with the conservative set-only rule
// (R-ADFT-1): fields present are set, fields absent stay, and an empty tag does not
// clear. A new flight gets its operation day from SODT. Out of ID order its word on the
// flight's existence goes in the flight's life, and a part a newer message wrote is left as
// it is (R-ORDER-2, R-ORDER-4).
func ApplyADFT(cur *Flight, in Input, days DayRule) Decision {
	var prev, next Flight
	if cur == nil {
		if in.Archived > in.MsgID {
			return Decision{Skip: SupersededReason(map[string]int64{PartState: in.Archived})}
		}
		prev = New(in.Record.FLID)
		next = New(in.Record.FLID)
		next.CreatedAt = in.Now
	} else {
		prev = *cur
		next = cur.Clone()
	}
	// A schedule re-adding a deleted FLID brings it back: AODB's schedule is the authority.
	next.say(in.MsgID, Active)
	rec := in.Record
	var ignored []string
	for tag := range rec.Scalars {
		if !slices.Contains(Scalars, tag) || tag == BoardingStatus || tag == LastCallStatus {
			ignored = append(ignored, tag)
		}
	}
	ignored = reportIgnored(append(ignored, ignoredWhole(rec)...))
	// A newer deletion stands (R-ORDER-4): the record's parts go to the details the deleted
	// flight keeps, as in ID order; nothing is published.
	if rec.FFID.Present && rec.FFID.Value != "" {
		next.Scalars["FFID"] = rec.FFID.Value
	}
	parts := recordParts(rec)
	for tag, v := range rec.Scalars {
		if slices.Contains(Scalars, tag) && tag != BoardingStatus && tag != LastCallStatus && v.Present && v.Value != "" {
			next.Scalars[tag] = v.Value
			parts = append(parts, tag)
		}
	}
	wholeRecordParts(&next, rec)
	for tag := range rec.Collections {
		parts = append(parts, tag)
	}
	slices.Sort(parts)
	superseded := take(prev, &next, parts, in.MsgID)
	if next.State == Deleted {
		superseded = withState(superseded, next.newestLife())
	}
	if next.OperationDay == nil {
		if d, ok := days.day(next.Scalars["SODT"]); ok {
			next.OperationDay = &d
		}
	}
	d := finish(prev, next, in)
	d.Ignored = ignored
	d.Superseded = superseded
	return d.skipIfSuperseded()
}

// ApplyFDEL deletes a flight (R-FDEL-1): ACTIVE → DELETED once, version bumped, detail
// rows kept, tombstones in the same transaction. A repeated FDEL or an unknown flight changes
// nothing and is still a success. Out of ID order it deletes what was active at its ID: its
// word goes in the flight's life, where a schedule older than it that arrives later finds it,
// and a newer schedule that brought the flight back stands (R-ORDER-4).
func ApplyFDEL(cur *Flight, in Input) Decision {
	if cur == nil {
		return Decision{}
	}
	prev := *cur
	prev.MAFL = deriveMAFL(prev, in.Children)
	next, ended := end(prev, in.MsgID)
	d := finish(prev, next, in)
	d.Ended = ended
	if ended && next.State == Active {
		d.Superseded = map[string]int64{PartState: next.newestLife()}
	}
	return d
}

// end is f after a deletion at message m: its word goes in the life, whatever the flight's
// state at m, and ended reports whether it was active then (in ID order the deletion took
// effect). A word that finds nothing active still counts once an older schedule that arrives
// later makes the flight active before it.
func end(f Flight, m int64) (next Flight, ended bool) {
	ended = f.stateAt(m) == Active
	next = f.Clone()
	next.say(m, Deleted)
	return next, ended
}

// wholeRecordParts stores what a schedule record (ADFT or a snapshot's) carries whole: its
// collections as sent and its raw SRVT and VIPF.
func wholeRecordParts(next *Flight, rec sis.FlightRecord) {
	for tag, c := range rec.Collections {
		next.Collections[tag] = items(tag, c, nil)
	}
	keepRaw(next, rec)
}

// ignoredWhole lists what a record stored whole (wholeRecordParts) carries that the state
// does not keep: its raw elements other than SRVT and VIPF, and its items' unknown fields.
func ignoredWhole(rec sis.FlightRecord) []string {
	var ignored []string
	for tag := range rec.Raw {
		if !slices.Contains(rawTags, tag) {
			ignored = append(ignored, tag)
		}
	}
	tags := make([]string, 0, len(rec.Collections))
	for tag := range rec.Collections {
		tags = append(tags, tag)
	}
	return append(ignored, unknownFields(rec, tags)...)
}

// keepRaw stores SRVT and VIPF as sent (R-FLIGHT-3: presence and raw content only). Other
// raw elements the codec keeps (PORT, TIPT ...) have no place in the flight state.
func keepRaw(f *Flight, rec sis.FlightRecord) {
	for _, tag := range [...]string{"SRVT", "VIPF"} {
		if raws, ok := rec.Raw[tag]; ok {
			f.Raw[tag] = slices.Clone(raws)
		}
	}
}

// items turns a sent collection tag into stored items: "no allocation now" is an empty
// collection, empty fields are dropped (an empty CHTM deletes that chocks time), and so are the
// fields the collection does not keep (R-FLIGHT-3: its known fields, the columns its detail
// table stores; unknownFields reports them) and those drop names, which the rule does not keep.
func items(tag string, c *sis.Collection, drop []string) []Item {
	out := make([]Item, 0, len(c.Items))
	if c.NoAllocation {
		return out
	}
	known := collections[tag].Fields
	for _, it := range c.Items {
		fields := make(map[string]string, len(known))
		for _, k := range known {
			if v := it.Fields[k]; v.Present && v.Value != "" && !slices.Contains(drop, k) {
				fields[k] = v.Value
			}
		}
		out = append(out, Item{Seq: it.Seq, Fields: fields})
	}
	return out
}

// normalize keeps the derived fields consistent with the facts they come from: the boarding
// and last-call statuses follow BOTM and LACL (set with the time, reset when it is cleared),
// and MAFL exists only on an active master.
func normalize(f *Flight, children []Flight) {
	status := func(timeTag, statusTag, value string) {
		if f.Scalars[timeTag] != "" {
			f.Scalars[statusTag] = value
		} else {
			delete(f.Scalars, statusTag)
		}
	}
	status("BOTM", BoardingStatus, Boarding)
	status("LACL", LastCallStatus, LastCall)
	f.MAFL = deriveMAFL(*f, children)
}

// finish bumps the version and derives the events when the content changed; a message that
// changes nothing writes nothing (R-FLIGHT-5), which is also what makes a re-run after a
// crash between the domain commit and the terminal commit a no-op (G-FLOP-IDEMPOTENT).
func finish(prev, next Flight, in Input) Decision {
	return settle(prev, next, in, in.Children, in.Children)
}

// settle is finish with the MAFL of each side derived from its own children: one message of
// FLOP or ADFT changes only its target, so both sides share in.Children, but a schedule
// snapshot changes a master and its children in the same package (PlanSnapshot).
func settle(prev, next Flight, in Input, prevChildren, nextChildren []Flight) Decision {
	normalize(&next, nextChildren)
	if prev.State != "" {
		prev = prev.Clone() // normalize writes; the caller's state stays as given
		normalize(&prev, prevChildren)
	}
	if prev.State == Deleted && next.State == Deleted {
		// A deleted flight publishes nothing but its deletion (R-FDEL-1): a message older than
		// the deletion changes only the details it keeps, and the provenance (R-ORDER-4).
		kept := next
		kept.Version, kept.LastMsgID, kept.UpdatedAt, kept.Prov.Last = prev.Version, prev.LastMsgID, prev.UpdatedAt, prev.Prov.Last
		return Decision{Next: kept, Recorded: !SameContent(prev, kept) || !prev.Prov.Equal(kept.Prov)}
	}
	if prev.Version > 0 && SameContent(prev, next) {
		// Nothing to publish; what the message wrote of the provenance is still written, or an
		// older message arriving later would take parts this one holds (R-ORDER-2).
		same := prev
		same.Prov = next.Prov
		return Decision{Next: same, Recorded: !prev.Prov.Equal(next.Prov)}
	}
	stamp(&next, max(prev.Version, in.VersionFloor)+1, in)
	if next.CreatedAt.IsZero() {
		next.CreatedAt = in.Now
	}
	return Decision{Next: next, Changed: true, Events: Events(prev, next, in, "")}
}

// stamp gives a changed state its version and its writer (R-FLIGHT-5). Out of ID order the
// writer is the message being applied, older or not: last_msg_id names the message whose
// re-run must find the change (R-RETAIN-6).
func stamp(next *Flight, version int64, in Input) {
	next.Version = version
	next.LastMsgID = in.MsgID
	next.UpdatedAt = in.Now
	next.Prov.Last = in.MsgID
}

// Events are the two events of an accepted change: a KAFKA:msg change notification and the
// KAFKA:schd full state (a TOMBSTONE of both when the flight was deleted). via names the
// code-share child whose change moved a master ("" for the message's own target).
func Events(prev, next Flight, in Input, via string) []Event {
	n := note{
		FLID: next.FLID, State: next.State, Version: next.Version, MsgID: in.MsgID, STYP: in.STYP, Via: via,
		// To the microsecond, as Document: a consumer joining the two sees one time.
		UpdatedAt: next.UpdatedAt.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano),
	}
	if next.State == Deleted {
		return []Event{
			{Target: TargetMsg, FLID: next.FLID, Type: Tombstone, Version: next.Version, Payload: mustJSON(next.FLID, n)},
			{Target: TargetSchd, FLID: next.FLID, Type: Tombstone, Version: next.Version},
		}
	}
	changed := Changed(prev, next)
	n.Changed = &changed
	return []Event{
		{Target: TargetMsg, FLID: next.FLID, Type: Upsert, Version: next.Version, Payload: mustJSON(next.FLID, n)},
		{Target: TargetSchd, FLID: next.FLID, Type: Upsert, Version: next.Version, Payload: Document(next)},
	}
}

// note is the KAFKA:msg change notification. Its fields are in the order of their names, the
// order encoding/json gives a map's keys, which the notification was first written as: the
// bytes stay the same, without a map built and sorted for every event. A tombstone has no
// CHANGED; an upsert always has it, null when nothing a document shows changed.
type note struct {
	Changed   *[]string `json:"CHANGED,omitempty"`
	FLID      string    `json:"FLID"`
	MsgID     int64     `json:"MSG_ID"`
	State     string    `json:"STATE"`
	Version   int64     `json:"STATE_VERSION"`
	STYP      string    `json:"STYP"`
	UpdatedAt string    `json:"UPDATED_AT"`
	Via       string    `json:"VIA,omitempty"`
}

// Changed lists the tags whose value differs between two states, sorted.
func Changed(prev, next Flight) []string {
	set := map[string]bool{}
	for k, v := range next.Scalars {
		if prev.Scalars[k] != v {
			set[k] = true
		}
	}
	for k := range prev.Scalars {
		if _, ok := next.Scalars[k]; !ok {
			set[k] = true
		}
	}
	for _, k := range slices.Concat(slices.Collect(maps.Keys(next.Collections)), slices.Collect(maps.Keys(prev.Collections))) {
		a := Flight{Collections: map[string][]Item{k: next.Collections[k]}}
		b := Flight{Collections: map[string][]Item{k: prev.Collections[k]}}
		_, inA := next.Collections[k]
		_, inB := prev.Collections[k]
		if inA != inB || !SameContent(a, b) {
			set[k] = true
		}
	}
	if !slices.Equal(prev.MAFL, next.MAFL) {
		set["MAFL"] = true
	}
	if prev.State != next.State {
		set["STATE"] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// Document is the full published state of a flight (KAFKA:schd and the Redis projection): keys
// are SIS tag names; collections are arrays of objects in stored order; a master with
// code-share children carries MAFL; SRVT and VIPF are not published. encoding/json sorts map
// keys, so one state always gives the same bytes. UPDATED_AT is cut to the microsecond that
// PostgreSQL keeps: the state the pump holds in memory and the same state read back (the
// consistency check, a rebuild) must give the same bytes.
func Document(f Flight) []byte {
	doc := map[string]any{
		"FLID": f.FLID, "STATE": f.State, "STATE_VERSION": f.Version,
		"UPDATED_AT": f.UpdatedAt.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano),
	}
	if f.OperationDay != nil {
		doc["OPERATION_DAY"] = f.OperationDay.Format(time.DateOnly)
	}
	for k, v := range f.Scalars {
		doc[k] = v
	}
	for k, items := range f.Collections {
		doc[k] = collectionDoc(k, items)
	}
	if len(f.MAFL) > 0 {
		doc["MAFL"] = f.MAFL
	}
	return mustJSON(f.FLID, doc)
}

// Projected is a state as the Redis projection writes it (R-PROJ-1): the version its
// compare-and-set goes by (R-PROJ-2) and its Document, nil for a deleted flight.
type Projected struct {
	FLID     string
	Version  int64
	Document []byte
}

// Project gives states their projected form, building each active one's Document.
func Project(states []Flight) []Projected { return Outcome{Project: states}.Projected() }

// Projected gives the outcome's states to project. A state written with this outcome takes
// the document its KAFKA:schd event carries, which is Document of the same state: a
// snapshot projects thousands of flights, and the document is most of the work of publishing
// one (docs/performance.md). The others' documents are built.
func (o Outcome) Projected() []Projected {
	type key struct {
		flid    string
		version int64
	}
	built := make(map[key][]byte, len(o.Events)/2)
	for _, e := range o.Events {
		if e.Target == TargetSchd && e.Type == Upsert {
			built[key{e.FLID, e.Version}] = e.Payload
		}
	}
	out := make([]Projected, len(o.Project))
	for i, f := range o.Project {
		out[i] = Projected{FLID: f.FLID, Version: f.Version}
		if f.State == Deleted {
			continue
		}
		doc, ok := built[key{f.FLID, f.Version}]
		if !ok {
			doc = Document(f)
		}
		out[i].Document = doc
	}
	return out
}

// collectionDoc is a collection as documents publish it: its items in stored order, each with
// its sequence attribute under the collection's attribute name.
func collectionDoc(tag string, items []Item) []map[string]string {
	arr := make([]map[string]string, 0, len(items))
	for _, it := range items {
		o := maps.Clone(it.Fields)
		if o == nil {
			o = map[string]string{}
		}
		if a := collections[tag].Seq; a != "" && it.Seq != "" {
			o[a] = it.Seq
		}
		arr = append(arr, o)
	}
	return arr
}

func mustJSON(flid string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("flight document of %s: %v", flid, err)) // only strings and numbers: cannot fail
	}
	return b
}
