package flight

import (
	"maps"
	"slices"
)

// Kind is the kind of flight message a record came in.
type Kind int

// Kinds.
const (
	KindFLOP Kind = iota // FLOP with an STYP of R-FLOP-1's table or a legacy extra
	KindFDEL             // FLOP STYP=FDEL
	KindADFT             // SCHD STYP=ADFT
)

// Group is the code-share neighbourhood of one target, loaded in the same transaction
// (R-CODESHARE-2: the MAFL and the state write that produces it share one read snapshot).
type Group struct {
	// Masters holds, by FLID, the flights the target points at with MAID before and after the
	// message, when they exist (a dangling MAID has no entry).
	Masters map[string]Flight
	// Siblings holds, by master FLID, the flights whose MAID is that master, as loaded.
	Siblings map[string][]Flight
}

// Outcome is everything one record decided: the states to write with their events, the states
// to project, or a skip.
type Outcome struct {
	Skip    string
	Ignored []string
	// Writes are the changed states, target first; Events go with them in the same transaction.
	Writes []Flight
	Events []Event
	// Recorded are the states whose provenance alone changed: written without a version or an
	// event (R-ORDER-2).
	Recorded []Flight
	// Superseded names the target's parts a newer message wrote (Decision.Superseded).
	Superseded map[string]int64
	// Project lists the current states of every flight the record touched, changed or not: a
	// re-run after a crash before the terminal commit decides "no change" but must still bring
	// the Redis projection up to date.
	Project []Flight
}

// Decide applies one record to its target and derives the code-share consequences: a master
// whose MAFL changed gets a new version and its own events, and deleting a master deletes its
// children in the same outcome (R-CODESHARE-4).
func Decide(kind Kind, cur *Flight, in Input, g Group, days DayRule) Outcome {
	var d Decision
	switch kind {
	case KindFDEL:
		d = ApplyFDEL(cur, in)
	case KindADFT:
		d = ApplyADFT(cur, in, days)
	default:
		d = ApplyFLOP(cur, in)
	}
	if d.Skip != "" {
		return Outcome{Skip: d.Skip, Ignored: d.Ignored}
	}
	out := Outcome{Ignored: d.Ignored, Superseded: d.Superseded}
	if d.Next.FLID == "" {
		return out // FDEL of an unknown flight: nothing to change, nothing to project
	}
	// The masters' deletions, as the target named them (R-ORDER-7).
	named := make([]Flight, 0, len(g.Masters))
	for _, id := range slices.Sorted(maps.Keys(g.Masters)) {
		named = append(named, g.Masters[id])
	}
	if next := d.Next.Clone(); codeShare(&next, named...) {
		d = resettle(cur, next, in, d)
		if via := viaOf(d.Next, in.MsgID); via != "" && d.Changed {
			// A schedule of a child under a deleted master: deleted with it (R-CODESHARE-5).
			prev := New(next.FLID)
			if cur != nil {
				prev = *cur
			}
			d.Events = Events(prev, d.Next, in, via)
		}
	}
	if !IsChild(d.Next) {
		d = cascade(&out, cur, d, in)
	}
	switch {
	case d.Changed:
		out.Writes = append([]Flight{d.Next}, out.Writes...)
		out.Events = append(slices.Clone(d.Events), out.Events...)
	case d.Recorded:
		out.Recorded = append([]Flight{d.Next}, out.Recorded...)
	}
	out.Project = append([]Flight{d.Next}, out.Project...)

	// Masters the target pointed at before or points at now: their MAFL may have moved.
	masters := map[string]bool{}
	if cur != nil && IsChild(*cur) {
		masters[cur.Scalars["MAID"]] = true
	}
	if IsChild(d.Next) {
		masters[d.Next.Scalars["MAID"]] = true
	}
	for _, id := range slices.Sorted(maps.Keys(masters)) {
		m, ok := g.Masters[id]
		if !ok {
			continue // dangling MAID: the child is processed, there is just no projection
		}
		if md, changed := reproject(m, g.Siblings[id], d.Next, in); changed {
			out.Writes = append(out.Writes, md.Next)
			out.Events = append(out.Events, md.Events...)
			out.Project = append(out.Project, md.Next)
		} else if m.State == Active {
			out.Project = append(out.Project, md.Next)
		}
	}

	return out
}

// cascade deletes with a master the code-share children that were active at its deletions
// (R-CODESHARE-4): no "master gone, child left" half state. Out of ID order a deletion may
// arrive after a newer schedule brought the master back: its children stay deleted, as in ID
// order, unless a newer word of their own says otherwise, and the master's MAFL is derived
// from what is left (R-ORDER-7).
func cascade(out *Outcome, cur *Flight, d Decision, in Input) Decision {
	master := d.Next.FLID
	after := make([]Flight, 0, len(in.Children))
	for _, c := range in.Children {
		next := c.Clone()
		if c.FLID == master || !codeShare(&next, d.Next) {
			after = append(after, c)
			if c.State == Deleted && d.Next.State == Deleted && c.FLID != master {
				out.Project = append(out.Project, c) // a re-run: deleted with the master before
			}
			continue
		}
		cd := settle(c, next, in, nil, nil)
		switch {
		case cd.Changed:
			cd.Events = Events(c, cd.Next, in, master)
			out.Writes = append(out.Writes, cd.Next)
			out.Events = append(out.Events, cd.Events...)
		case cd.Recorded:
			out.Recorded = append(out.Recorded, cd.Next)
		}
		if cd.Next.State == Deleted {
			out.Project = append(out.Project, cd.Next)
		}
		after = append(after, cd.Next)
	}
	if d.Next.State != Active || slices.Equal(d.Next.MAFL, deriveMAFL(d.Next, after)) {
		return d
	}
	// The master stands, children it had are gone: its MAFL moved (R-CODESHARE-3).
	return resettle(cur, d.Next, in, d, after...)
}

// resettle decides again, from the stored state cur (nil for a new flight), a state a rule's
// decision d was changed into after it was settled, keeping what d reported. children, when
// given, are the flight's children as they will be.
func resettle(cur *Flight, next Flight, in Input, d Decision, children ...Flight) Decision {
	prev := New(next.FLID)
	if cur != nil {
		prev = *cur
	}
	after := in.Children
	if children != nil {
		after = children
	}
	nd := settle(prev, next, in, in.Children, after)
	nd.Ignored, nd.Superseded, nd.Ended = d.Ignored, d.Superseded, d.Ended
	return nd
}

// reproject recomputes master m's MAFL with the child's new state among its siblings. A
// changed MAFL changes the master's published document, so the master gets a new version
// (the outbox keeps a KAFKA:schd row only for a version not older than the stored one) and
// its own KAFKA:msg + KAFKA:schd events (R-CODESHARE-3).
func reproject(m Flight, siblings []Flight, child Flight, in Input) (Decision, bool) {
	prev := m.Clone()
	prev.MAFL = deriveMAFL(prev, siblings)
	after := slices.Clone(siblings)
	if i := slices.IndexFunc(after, func(f Flight) bool { return f.FLID == child.FLID }); i >= 0 {
		after[i] = child
	} else {
		after = append(after, child)
	}
	next := prev.Clone()
	next.MAFL = deriveMAFL(next, after)
	if slices.Equal(prev.MAFL, next.MAFL) {
		return Decision{Next: prev}, false
	}
	stamp(&next, prev.Version+1, in)
	return Decision{Next: next, Changed: true, Events: Events(prev, next, in, child.FLID)}, true
}

// Published returns f as it is projected and published: a master carries the MAFL derived from
// children, the flights whose MAID names it (R-CODESHARE-1). Re-projecting a stored state
// needs it because MAFL is never stored.
func Published(f Flight, children []Flight) Flight {
	p := f.Clone()
	p.MAFL = deriveMAFL(p, children)
	return p
}

// IsChild reports whether f is a code-share child: its MAID names another flight. A MAID equal
// to the flight's own FLID is a self-reference and makes nothing a child (R-CODESHARE-1).
func IsChild(f Flight) bool {
	maid := f.Scalars["MAID"]
	return maid != "" && maid != f.FLID
}

// deriveMAFL is a master's MAFL: its active children (FLID + FLNO), ordered by FLID so the
// projection is byte-stable whatever the arrival order or FLNO changes (R-CODESHARE-2). Only
// an active master carries it; nil when it has no children.
func deriveMAFL(master Flight, children []Flight) []Share {
	if master.State != Active || IsChild(master) {
		return nil
	}
	var out []Share
	for _, c := range children {
		if c.State == Active && c.FLID != master.FLID && c.Scalars["MAID"] == master.FLID {
			out = append(out, Share{FLID: c.FLID, FLNO: c.Scalars["FLNO"]})
		}
	}
	slices.SortFunc(out, func(a, b Share) int {
		if a.FLID < b.FLID {
			return -1
		}
		if a.FLID > b.FLID {
			return 1
		}
		return 0
	})
	return out
}
