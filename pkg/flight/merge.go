package flight

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Event targets and types of the outbox (seed 003 §8).
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
}

// Decision is what a rule decided: the next full state and its events, or a skip reason.
type Decision struct {
	Next    Flight
	Changed bool
	Events  []Event
	// Skip, when set, makes the message SKIPPED with this reason and changes nothing.
	Skip string
}

// Skip reasons for a flight message whose target cannot take it (seed 003 §12.2 leaves the
// outcome open; see docs/flight-domain.md).
const (
	SkipUnknownFlight = "unknown-flight"
	SkipDeletedFlight = "deleted-flight"
)

// DayRule derives a flight's operation day from its SODT (seed 003 §11.2).
type DayRule struct {
	Zone *time.Location
	// Cutover is the local time of day before which a flight belongs to the previous day.
	Cutover time.Duration
}

// OperationDay returns the operation day of a local schedule time.
func (r DayRule) OperationDay(sodt time.Time) time.Time {
	local := sodt.In(r.Zone).Add(-r.Cutover)
	d := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
	return d
}

// ApplyFLOP merges a dynamic operational update (seed 003 §12.2): only the fields and
// collections the message carries change; an empty tag clears; a carried collection replaces
// the stored one whole, in message order.
func ApplyFLOP(cur *Flight, in Input) Decision {
	switch {
	case cur == nil:
		return Decision{Skip: SkipUnknownFlight}
	case cur.State == Deleted:
		return Decision{Skip: SkipDeletedFlight}
	}
	next := cur.Clone()
	mergeRecord(&next, in.Record, true)
	return finish(*cur, next, in)
}

// ApplyADFT merges a single-flight schedule add/change with the conservative set-only rule
// (seed 003 §12.3): fields present are set, fields absent stay, and an empty tag does not
// clear. A new flight gets its operation day from SODT.
func ApplyADFT(cur *Flight, in Input, days DayRule) Decision {
	var prev, next Flight
	if cur == nil {
		prev = New(in.Record.FLID)
		prev.Version = 0
		next = New(in.Record.FLID)
		next.CreatedAt = in.Now
	} else {
		prev = *cur
		next = cur.Clone()
	}
	// A schedule re-adding a deleted FLID brings it back: AODB's schedule is the authority.
	next.State = Active
	mergeRecord(&next, in.Record, false)
	if next.OperationDay == nil {
		if f, ok := in.Record.Scalars["SODT"]; ok && f.Value != "" {
			if t, err := sis.ParseTime(f.Value, days.Zone); err == nil {
				d := days.OperationDay(t)
				next.OperationDay = &d
			}
		}
	}
	return finish(prev, next, in)
}

// ApplyFDEL deletes a flight (seed 003 §12.3): ACTIVE → DELETED once, version bumped, detail
// rows kept, tombstones in the same transaction. A repeated FDEL or an unknown flight changes
// nothing and is still a success.
func ApplyFDEL(cur *Flight, in Input) Decision {
	if cur == nil {
		return Decision{}
	}
	if cur.State == Deleted {
		return Decision{Next: *cur}
	}
	next := cur.Clone()
	next.State = Deleted
	return finish(*cur, next, in)
}

// mergeRecord applies a record's fields to f. clear says whether an empty tag clears the
// field (flight operations) or is ignored (set-only schedule changes).
func mergeRecord(f *Flight, rec sis.FlightRecord, clear bool) {
	if rec.FFID.Present && (rec.FFID.Value != "" || clear) {
		setScalar(f, "FFID", rec.FFID.Value)
	}
	for tag, v := range rec.Scalars {
		if !v.Present || (v.Value == "" && !clear) {
			continue
		}
		setScalar(f, tag, v.Value)
	}
	for tag, c := range rec.Collections {
		items := make([]Item, 0, len(c.Items))
		if !c.NoAllocation {
			for _, it := range c.Items {
				fields := map[string]string{}
				for k, v := range it.Fields {
					if v.Present && v.Value != "" {
						fields[k] = v.Value
					}
				}
				items = append(items, Item{Seq: it.Seq, Fields: fields})
			}
		}
		f.Collections[tag] = items
	}
	for tag, raws := range rec.Raw {
		f.Raw[tag] = slices.Clone(raws)
	}
}

func setScalar(f *Flight, tag, value string) {
	if value == "" {
		delete(f.Scalars, tag)
		return
	}
	f.Scalars[tag] = value
}

// finish bumps the version and derives the events when the content changed; a message that
// changes nothing writes nothing (seed 003 §12.2).
func finish(prev, next Flight, in Input) Decision {
	if prev.Version > 0 && SameContent(prev, next) {
		return Decision{Next: prev}
	}
	next.Version = prev.Version + 1
	next.LastMsgID = in.MsgID
	next.UpdatedAt = in.Now
	if next.CreatedAt.IsZero() {
		next.CreatedAt = in.Now
	}
	return Decision{Next: next, Changed: true, Events: Events(prev, next, in)}
}

// Events are the two events of an accepted change: a KAFKA:msg change notification and the
// KAFKA:schd full state (a TOMBSTONE of both when the flight was deleted).
func Events(prev, next Flight, in Input) []Event {
	if next.State == Deleted {
		note, _ := json.Marshal(map[string]any{
			"FLID": next.FLID, "STATE": Deleted, "STATE_VERSION": next.Version, "MSG_ID": in.MsgID,
			"STYP": in.STYP, "UPDATED_AT": next.UpdatedAt.UTC().Format(time.RFC3339Nano),
		})
		return []Event{
			{Target: TargetMsg, FLID: next.FLID, Type: Tombstone, Version: next.Version, Payload: note},
			{Target: TargetSchd, FLID: next.FLID, Type: Tombstone, Version: next.Version},
		}
	}
	note, _ := json.Marshal(map[string]any{
		"FLID": next.FLID, "STATE": next.State, "STATE_VERSION": next.Version, "MSG_ID": in.MsgID,
		"STYP": in.STYP, "CHANGED": Changed(prev, next), "UPDATED_AT": next.UpdatedAt.UTC().Format(time.RFC3339Nano),
	})
	return []Event{
		{Target: TargetMsg, FLID: next.FLID, Type: Upsert, Version: next.Version, Payload: note},
		{Target: TargetSchd, FLID: next.FLID, Type: Upsert, Version: next.Version, Payload: Document(next)},
	}
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
	for k, items := range next.Collections {
		a := Flight{Collections: map[string][]Item{k: items}}
		b := Flight{Collections: map[string][]Item{k: prev.Collections[k]}}
		if _, had := prev.Collections[k]; !had || !SameContent(a, b) {
			set[k] = true
		}
	}
	if prev.State != next.State {
		set["STATE"] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// seqAttr names the sequence attribute of each collection in published documents.
var seqAttr = map[string]string{
	"GTDT": "GTNO", "CKDT": "CKNO", "CLDT": "CLNO", "CHDT": "CHNO", "PSDT": "PSNO", "CHOT": "CSNO",
	"ROUT": "RTNO", "ERUT": "RTNO", "ABTM": "ASNO",
}

// Document is the full published state of a flight (KAFKA:schd and the Redis projection): keys
// are SIS tag names; collections are arrays of objects in stored order; SRVT and VIPF are not
// published.
func Document(f Flight) []byte {
	doc := map[string]any{
		"FLID": f.FLID, "STATE": f.State, "STATE_VERSION": f.Version,
		"UPDATED_AT": f.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	if f.OperationDay != nil {
		doc["OPERATION_DAY"] = f.OperationDay.Format(time.DateOnly)
	}
	for k, v := range f.Scalars {
		doc[k] = v
	}
	for k, items := range f.Collections {
		arr := make([]map[string]string, 0, len(items))
		for _, it := range items {
			o := maps.Clone(it.Fields)
			if o == nil {
				o = map[string]string{}
			}
			if a := seqAttr[k]; a != "" && it.Seq != "" {
				o[a] = it.Seq
			}
			arr = append(arr, o)
		}
		doc[k] = arr
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("flight document of %s: %v", f.FLID, err)) // only strings and numbers: cannot fail
	}
	return b
}
