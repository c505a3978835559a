package flight

import (
	"slices"
	"time"
)

// ApplySnapshot is what PlanSnapshot, which production runs on a whole package, decides for one
// record, for the tests of the full-state rule: it merges one checked snapshot record into its
// flight, the record being the flight's whole schedule state (C-26). Unlike ADFT (set-only) and
// FLOP (only what the STYP owns), a field, collection or raw element the record does not carry,
// or carries empty, is cleared. A deleted flight comes back ACTIVE; a flight without an
// operation day takes day (the record's, from ValidatePackage), an existing one is kept
// (PlanSnapshot refuses a conflict first). A record equal to the stored state changes nothing:
// no version, no event, so a re-run of the whole package is silent. in.Children are the
// flight's children as they will be; PlanSnapshot, which also changes them, derives the MAFL on
// each side itself.
func ApplySnapshot(cur *Flight, in Input, day time.Time) Decision {
	prev := New(in.Record.FLID)
	if cur != nil {
		prev = *cur
	}
	next, ignored, superseded := snapshotRecord(cur, in.Record, day, in.MsgID)
	d := finish(prev, next, in)
	d.Ignored = ignored
	d.Superseded = superseded
	return d
}

// STYPs lists the FLOP STYPs that have a rule, FDEL included, sorted.
func STYPs() []string {
	out := []string{"FDEL"}
	for s := range flopRules {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
