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
	out := Outcome{Ignored: d.Ignored}
	if d.Next.FLID == "" {
		return out // FDEL of an unknown flight: nothing to change, nothing to project
	}
	if d.Changed {
		out.Writes = append(out.Writes, d.Next)
		out.Events = append(out.Events, d.Events...)
	}
	out.Project = append(out.Project, d.Next)

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

	if d.Next.State == Deleted && !IsChild(d.Next) {
		// Deleting a master deletes its code-share children with it: no "master gone, child
		// left" half state. On a re-run the children are already deleted and are only
		// projected again.
		for _, c := range in.Children {
			if !d.Changed || c.State == Deleted || c.Scalars["MAID"] != d.Next.FLID || c.FLID == d.Next.FLID {
				if c.State == Deleted {
					out.Project = append(out.Project, c)
				}
				continue
			}
			cd := ApplyFDEL(&c, Input{MsgID: in.MsgID, STYP: in.STYP, Now: in.Now, Record: in.Record})
			cd.Events = Events(c, cd.Next, in, d.Next.FLID)
			out.Writes = append(out.Writes, cd.Next)
			out.Events = append(out.Events, cd.Events...)
			out.Project = append(out.Project, cd.Next)
		}
	}
	return out
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
	next.Version = prev.Version + 1
	next.LastMsgID = in.MsgID
	next.UpdatedAt = in.Now
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
