package flight

import (
	"cmp"
	"slices"
	"time"
)

// Cause is why a flight is in a snapshot plan.
type Cause string

// Causes.
const (
	// CauseRecord: the package carries the flight; its record is the whole state (C-26).
	CauseRecord Cause = "record"
	// CauseOmitted: a stored flight of a scope day the package does not carry: deleted (INV-15b).
	CauseOmitted Cause = "omitted"
	// CauseCascade: a code-share child of a master the package deletes, deleted with it by the
	// FDEL rule (R-CODESHARE-4), whatever its own day.
	CauseCascade Cause = "cascade"
	// CauseCodeShare: a master whose MAFL the package's changes to its children move, or, when
	// unchanged, the active master of a planned child, projected again (as Decide does).
	CauseCodeShare Cause = "code-share"
)

// SnapshotFlight is the decision for one flight of a snapshot.
type SnapshotFlight struct {
	FLID  string
	Cause Cause
	// Pos is the FLTR position for CauseRecord, else 0.
	Pos int
	// Group names the flight's code-share group (the FLID of its first flight in plan order):
	// a group is never split across batches.
	Group string
	// Decision is the flight's next state and events; Changed false means nothing to write,
	// the state is still projected.
	Decision Decision
}

// SnapshotInput is everything PlanSnapshot decides on, loaded in the domain transaction.
type SnapshotInput struct {
	MsgID   int64
	Now     time.Time
	Package Package
	Scope   Scope
	// Stored holds the current states of: every flight of the scope days (deleted ones
	// included), every flight with one of the package's FLIDs whatever its day, the masters
	// Package.Masters names, and every flight whose MAID names one of those (the children).
	// Missing children would give a master a wrong MAFL and escape its deletion's cascade.
	// Order does not matter; a FLID given twice is taken once.
	Stored []Flight
	// VersionFloors holds, for package FLIDs absent from Stored, the floor of a FLID the
	// history sweep archived (Input.VersionFloor); absent means 0.
	VersionFloors map[string]int64
	// Archived holds, for package FLIDs absent from Stored, the last message of the flight the
	// history sweep moved out (Input.Archived); absent means 0.
	Archived map[string]int64
}

// Plan is a snapshot's per-flight decisions.
type Plan struct {
	Scope Scope
	// Flights are in a deterministic order that depends neither on the order of Stored nor on
	// map order: the package's records in package order, then the other flights by FLID, each
	// code-share group pulled together at the place of its first flight.
	Flights []SnapshotFlight
	// WithMaster lists, in package order, the records of code-share children whose master is
	// deleted at the package's ID (the package omits it, or it was deleted before): the package
	// contradicts itself, and the child is deleted with its master, its record's fields kept in
	// its details (R-CODESHARE-5); the processor reports them.
	WithMaster []string
	// Superseded lists, in package order, the records of FLIDs the history sweep moved out
	// after a newer message: nothing is planned for them (R-ORDER-5).
	Superseded []string
}

// DefaultBatchSize is schd.batch-size's default: changed flights per transaction.
const DefaultBatchSize = 200

// Batch is a run of whole code-share groups written in one transaction with its events.
type Batch []SnapshotFlight

// Outcome is the batch in the shape every flight rule returns: the changed states and their
// events to write in the batch's transaction, and every state to project afterwards.
func (b Batch) Outcome() Outcome {
	var o Outcome
	for _, f := range b {
		switch {
		case f.Decision.Changed:
			o.Writes = append(o.Writes, f.Decision.Next)
			o.Events = append(o.Events, f.Decision.Events...)
		case f.Decision.Recorded:
			o.Recorded = append(o.Recorded, f.Decision.Next)
		}
		o.Project = append(o.Project, f.Decision.Next)
	}
	return o
}

// Changed counts the flights the plan writes.
func (p Plan) Changed() int {
	n := 0
	for _, f := range p.Flights {
		if f.Decision.Changed {
			n++
		}
	}
	return n
}

// Batches cuts the plan, in order, into batches of at most n changed flights (n <= 0 means
// DefaultBatchSize). A code-share group is never split: a master's deletion and its children's
// cascade are one atomic change (R-CODESHARE-4), and a master's MAFL is committed with the
// children it is derived from, so a crash between two batches leaves no group half applied
// and the re-run finds it whole and unchanged. A group with more than n changed flights is a
// batch of its own. Unchanged flights ride with their group: nothing to write, only to
// project.
func (p Plan) Batches(n int) []Batch {
	if n <= 0 {
		n = DefaultBatchSize
	}
	var out []Batch
	var cur Batch
	changed := 0
	for i := 0; i < len(p.Flights); {
		j, group := i, 0
		for ; j < len(p.Flights) && p.Flights[j].Group == p.Flights[i].Group; j++ {
			if p.Flights[j].Decision.Changed {
				group++
			}
		}
		if len(cur) > 0 && changed+group > n {
			out = append(out, cur)
			cur, changed = nil, 0
		}
		cur = append(cur, p.Flights[i:j]...)
		changed += group
		i = j
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// planned is one flight's final state before its decision is settled.
type planned struct {
	cause      Cause
	rec        *PackageRecord
	next       Flight
	ignored    []string
	superseded map[string]int64
	ended      bool   // an omitted flight that was active at the package's ID
	via        string // the master of a cascaded child
}

// PlanSnapshot decides a whole checked package against the stored flights (R-SCHD-1 to
// R-SCHD-4): the cross-day check first, then every record's full state, the deletion of
// the scope days' flights the package omits with the code-share cascade, and the MAFL of every
// master whose children move. All final states are known before any is settled, so a master
// whose children the package changes gets one new version, not one per child, and its MAFL is
// derived from its children as they will be. A flight already at its snapshot state produces
// no version and no event. On a refusal nothing may be written.
func PlanSnapshot(in SnapshotInput) (Plan, *Refusal) {
	p := in.Package
	if p.styp == "" {
		return Plan{}, &Refusal{Code: RefuseNotSnapshot, Detail: "the package was not checked by ValidatePackage"}
	}
	if r := CheckCrossDay(p, in.Stored); r != nil {
		return Plan{}, r
	}
	stored := make(map[string]Flight, len(in.Stored))
	for _, f := range in.Stored {
		if _, dup := stored[f.FLID]; !dup {
			stored[f.FLID] = f
		}
	}
	storedIDs := sortedKeys(stored)

	plan := map[string]*planned{}
	var superseded []string
	for i := range p.records {
		r := &p.records[i]
		var cur *Flight
		if s, ok := stored[r.Record.FLID]; ok {
			cur = &s
		} else if in.Archived[r.Record.FLID] > in.MsgID {
			superseded = append(superseded, r.Record.FLID)
			continue
		}
		next, ignored, sup := snapshotRecord(cur, r.Record, r.Day, in.MsgID)
		plan[r.Record.FLID] = &planned{cause: CauseRecord, rec: r, next: next, ignored: ignored, superseded: sup}
	}
	for _, id := range storedIDs {
		if s := stored[id]; plan[id] == nil && in.Scope.Contains(s.OperationDay) {
			next, ended := end(s, in.MsgID)
			plan[id] = &planned{cause: CauseOmitted, next: next, ended: ended}
		}
	}
	prevChildren := childrenOf(storedIDs, func(id string) Flight { return stored[id] })
	current := func(id string) (Flight, bool) {
		if e := plan[id]; e != nil {
			return e.next, true
		}
		f, ok := stored[id]
		return f, ok
	}
	// The cascade of ApplyFDEL's callers (Decide): a master this package deletes takes its
	// children active at the package's ID with it; a re-run, with everything already deleted,
	// only projects them again, and a child revived since the master's deletion is not deleted
	// again. Out of ID order (R-ORDER-7) the children's lives follow their masters' deletions
	// as they named them: a record may change what its flight named, and a master's record may
	// bring it back before a newer deletion, which then takes its children.
	for _, id := range sortedKeys(plan) {
		e := plan[id]
		// codeShare changes the existence alone, on a life of its own: a copy of the struct
		// keeps e.next as it was when nothing changed, without a copy of every part.
		if next := e.next; codeShare(&next, mastersOf(next, stored[id], current)...) {
			e.next = next
		}
	}
	for _, id := range storedIDs {
		e := plan[id]
		if e == nil || e.cause == CauseCascade || IsChild(e.next) {
			continue
		}
		for _, c := range prevChildren[id] {
			if plan[c.FLID] != nil {
				continue // a record (see WithMaster) or a flight of the scope deleted on its own
			}
			if next := c.Clone(); codeShare(&next, mastersOf(next, c, current)...) {
				plan[c.FLID] = &planned{cause: CauseCascade, next: next, via: id}
			} else if c.State == Deleted && e.cause == CauseOmitted {
				plan[c.FLID] = &planned{cause: CauseCascade, next: c, via: id}
			}
		}
	}
	final := func(id string) Flight {
		if e := plan[id]; e != nil {
			return e.next
		}
		return stored[id]
	}
	all := sortedKeys(plan)
	for _, id := range storedIDs {
		if plan[id] == nil {
			all = append(all, id)
		}
	}
	slices.Sort(all)
	nextChildren := childrenOf(all, final)
	// The masters the planned flights point at, before and after: their MAFL may move.
	for _, id := range sortedKeys(plan) {
		for _, m := range masterRefs(stored, plan[id].next, id) {
			if plan[m] != nil {
				continue
			}
			ms, ok := stored[m]
			if !ok {
				continue // dangling MAID: the child is planned, there is just no projection
			}
			moved := !slices.Equal(deriveMAFL(ms, prevChildren[m]), deriveMAFL(ms, nextChildren[m]))
			if moved || ms.State == Active {
				plan[m] = &planned{cause: CauseCodeShare, next: ms.Clone()}
			}
		}
	}

	flights := make([]SnapshotFlight, 0, len(plan))
	for _, id := range sortedKeys(plan) {
		e := plan[id]
		fin := Input{MsgID: in.MsgID, STYP: p.styp, Now: in.Now}
		var d Decision
		switch e.cause {
		case CauseRecord:
			fin.Record = e.rec.Record
			prev, ok := stored[id]
			if !ok {
				prev = New(id)
				fin.VersionFloor = in.VersionFloors[id]
			}
			d = settle(prev, e.next, fin, prevChildren[id], nextChildren[id])
			d.Ignored = e.ignored
			d.Superseded = e.superseded
			if via := viaOf(d.Next, in.MsgID); via != "" && d.Changed {
				d.Events = Events(prev, d.Next, fin, via) // deleted with its master (R-CODESHARE-5)
			}
		case CauseOmitted, CauseCascade:
			// the FDEL rule, with the words e.next took of the cascade (R-ORDER-7)
			s := stored[id]
			fin.Children = prevChildren[id]
			d = settle(s, e.next, fin, prevChildren[id], prevChildren[id])
			if e.via != "" && d.Changed {
				d.Events = Events(s, d.Next, fin, e.via)
			}
		case CauseCodeShare:
			s := stored[id]
			d = settle(s, e.next, fin, prevChildren[id], nextChildren[id])
		}
		sf := SnapshotFlight{FLID: id, Cause: e.cause, Decision: d}
		if e.rec != nil {
			sf.Pos = e.rec.Pos
		}
		flights = append(flights, sf)
	}
	return Plan{Scope: in.Scope, Flights: order(flights, stored, len(p.records)), WithMaster: withMaster(p, plan, in.MsgID),
		Superseded: superseded}, nil
}

// mastersOf are the masters a flight names in next or named in stored, as current has them.
func mastersOf(next, stored Flight, current func(string) (Flight, bool)) []Flight {
	var out []Flight
	for _, id := range []string{next.Scalars["MAID"], stored.Scalars["MAID"]} {
		if m, ok := current(id); ok && id != "" && id != next.FLID && !slices.ContainsFunc(out, func(f Flight) bool { return f.FLID == id }) {
			out = append(out, m)
		}
	}
	return out
}

// childrenOf indexes the flights of ids by the master their MAID names.
func childrenOf(ids []string, state func(string) Flight) map[string][]Flight {
	out := map[string][]Flight{}
	for _, id := range ids {
		if f := state(id); IsChild(f) {
			out[f.Scalars["MAID"]] = append(out[f.Scalars["MAID"]], f)
		}
	}
	return out
}

// masterRefs are the masters flight id points at before (stored) and after (next).
func masterRefs(stored map[string]Flight, next Flight, id string) []string {
	var out []string
	if s, ok := stored[id]; ok && IsChild(s) {
		out = append(out, s.Scalars["MAID"])
	}
	if IsChild(next) && !slices.Contains(out, next.Scalars["MAID"]) {
		out = append(out, next.Scalars["MAID"])
	}
	return out
}

// order sorts the plan: records by package position, then the rest by FLID, and groups the
// flights linked by a MAID (before or after) at the place of their first member. The groups
// are the connected components of those links, so a child moving between two masters binds
// both to it.
func order(flights []SnapshotFlight, stored map[string]Flight, records int) []SnapshotFlight {
	rank := make(map[string]int, len(flights))
	var others []string
	for _, f := range flights {
		if f.Cause == CauseRecord {
			rank[f.FLID] = f.Pos - 1
		} else {
			others = append(others, f.FLID)
		}
	}
	slices.Sort(others)
	for i, id := range others {
		rank[id] = records + i
	}
	parent := make(map[string]string, len(flights))
	var root func(string) string
	root = func(id string) string {
		for parent[id] != id {
			parent[id] = parent[parent[id]]
			id = parent[id]
		}
		return id
	}
	union := func(a, b string) {
		ra, rb := root(a), root(b)
		if ra == rb {
			return
		}
		if rank[rb] < rank[ra] {
			ra, rb = rb, ra
		}
		parent[rb] = ra // the root is the member first in order
	}
	for _, f := range flights {
		parent[f.FLID] = f.FLID
	}
	for _, f := range flights {
		for _, m := range masterRefs(stored, f.Decision.Next, f.FLID) {
			if _, planned := parent[m]; planned {
				union(f.FLID, m)
			}
		}
	}
	for i := range flights {
		flights[i].Group = root(flights[i].FLID)
	}
	slices.SortFunc(flights, func(a, b SnapshotFlight) int {
		return cmp.Or(cmp.Compare(rank[a.Group], rank[b.Group]), cmp.Compare(rank[a.FLID], rank[b.FLID]))
	})
	return flights
}

// withMaster are the records a master's deletion took (R-CODESHARE-5): their own word at the
// package's ID became the master's.
func withMaster(p Package, plan map[string]*planned, msgID int64) []string {
	var out []string
	for _, r := range p.records {
		e := plan[r.Record.FLID]
		if e == nil {
			continue
		}
		if i := slices.IndexFunc(e.next.Prov.Life, func(l Life) bool { return l.Msg == msgID }); i >= 0 && e.next.Prov.Life[i].Via != "" {
			out = append(out, r.Record.FLID)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
