package flight

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Schedule snapshots, SCHD DNLD and RESP (R-SCHD-1): a
// snapshot replaces. Within the operation days it covers, the flights it omits are deleted and
// the fields its records omit are cleared. This file holds the whole-package check, the scope
// and the record → full state merge; snapshot_plan.go turns a checked package and the stored
// flights into per-flight decisions and batches.

// Refusal codes: why a whole schedule package is refused. The pump makes the message
// DEAD(PROTOCOL) with Refusal.String() as the reason and writes nothing of it (INV-4).
const (
	RefuseNotSnapshot   = "not-a-snapshot"
	RefuseRECSMissing   = "recs-missing"
	RefuseRECSMismatch  = "recs-mismatch"
	RefuseMissingFLID   = "missing-flid"
	RefuseDuplicateFLID = "duplicate-flid"
	RefuseNoDay         = "no-operation-day"
	RefuseCrossDay      = "cross-day"
)

// Refusal is why a schedule package cannot be applied at all.
type Refusal struct {
	Code string
	// Record is the 1-based position of the FLTR at fault, as in the codec's paths; 0 when the
	// package as a whole is at fault.
	Record int
	FLID   string
	Detail string
}

// String is the reason recorded with DEAD(PROTOCOL): the code, then where (the FLTR path and
// its FLID), then why. Upstream values are quoted and cut short, so a hostile FLID or SODT
// can neither forge a line nor bloat the stored reason.
func (r Refusal) String() string {
	var b strings.Builder
	b.WriteString(r.Code)
	b.WriteString(": ")
	if r.Record > 0 {
		fmt.Fprintf(&b, "/MSG/SCHD/FLTR[%d]", r.Record)
		if r.FLID != "" {
			fmt.Fprintf(&b, " FLID %s", quote(r.FLID))
		}
		b.WriteString(": ")
	}
	b.WriteString(r.Detail)
	return b.String()
}

// quote renders an upstream value for a reason: Go-quoted and at most 64 characters.
func quote(s string) string {
	const limit = 64
	if utf8.RuneCountInString(s) > limit {
		r := []rune(s)
		return fmt.Sprintf("%q…", string(r[:limit]))
	}
	return fmt.Sprintf("%q", s)
}

// Package is a schedule snapshot that passed the whole-package check: RECS matches, every
// record has a FLID unique in the package and an operation day. Only ValidatePackage makes
// one, so the rules never plan from an unchecked package.
type Package struct {
	styp    string
	records []PackageRecord
}

// PackageRecord is one checked FLTR.
type PackageRecord struct {
	// Pos is the 1-based FLTR position (the codec's /MSG/SCHD/FLTR[Pos]).
	Pos int
	// Day is the operation day derived from SODT (a UTC midnight, as DayRule.OperationDay).
	Day    time.Time
	Record sis.FlightRecord
}

// STYP is DNLD or RESP.
func (p Package) STYP() string { return p.styp }

// Records are the package's records in package order.
func (p Package) Records() []PackageRecord { return slices.Clone(p.records) }

// ValidatePackage is the whole-package check of R-SCHD-2, run before anything is
// loaded or written. The first failure in document order is returned: the declared count
// first (a package that is not whole must not delete what it seems to omit), then record by
// record its FLID, its uniqueness and its operation day (SODT in the airport zone with the
// day cut-over, the rule ADFT uses). The codec already makes a FLTR without FLID MALFORMED;
// the check repeats it because a snapshot built without the codec must not slip through.
func ValidatePackage(s *sis.Schd, days DayRule) (Package, *Refusal) {
	switch {
	case s == nil:
		return Package{}, &Refusal{Code: RefuseNotSnapshot, Detail: "no SCHD body"}
	case s.STYP != "DNLD" && s.STYP != "RESP":
		// ADFT is a set-only single-flight change (ApplyADFT); replacing with it would delete
		// what it does not name.
		return Package{}, &Refusal{Code: RefuseNotSnapshot, Detail: "SCHD-" + s.STYP + " is not a snapshot: only DNLD and RESP replace"}
	case s.RECS == sis.RECSAbsent:
		return Package{}, &Refusal{Code: RefuseRECSMissing,
			Detail: "RECS not sent: without the declared count a truncated package cannot be told from a whole one, and a snapshot deletes what it omits"}
	case s.RECS != len(s.Records):
		return Package{}, &Refusal{Code: RefuseRECSMismatch,
			Detail: fmt.Sprintf("RECS declares %d records, the package carries %d FLTR", s.RECS, len(s.Records))}
	}
	first := make(map[string]int, len(s.Records))
	recs := make([]PackageRecord, 0, len(s.Records))
	for i, rec := range s.Records {
		pos := i + 1
		if rec.FLID == "" {
			return Package{}, &Refusal{Code: RefuseMissingFLID, Record: pos, Detail: "FLTR without FLID: the flight is not identified"}
		}
		if at, dup := first[rec.FLID]; dup {
			return Package{}, &Refusal{Code: RefuseDuplicateFLID, Record: pos, FLID: rec.FLID,
				Detail: fmt.Sprintf("FLID repeated (first at FLTR[%d]): which record is the flight's state is ambiguous", at)}
		}
		first[rec.FLID] = pos
		day, ok := days.day(rec.Scalars["SODT"].Value)
		if !ok {
			return Package{}, &Refusal{Code: RefuseNoDay, Record: pos, FLID: rec.FLID, Detail: noDay(rec.Scalars["SODT"])}
		}
		recs = append(recs, PackageRecord{Pos: pos, Day: day, Record: rec})
	}
	return Package{styp: s.STYP, records: recs}, nil
}

func noDay(sodt sis.Field) string {
	switch {
	case !sodt.Present:
		return "SODT not sent: the operation day cannot be derived"
	case sodt.Value == "":
		return "SODT sent empty: the operation day cannot be derived"
	case len(sodt.Value) == 4:
		return "SODT " + quote(sodt.Value) + " is a seasonal time without a date: the operation day cannot be derived"
	}
	return "SODT " + quote(sodt.Value) + " is not a date: the operation day cannot be derived"
}

// CheckCrossDay refuses a package that moves a stored flight to another operation day
// (R-SCHD-2): a flight's day is never re-derived (Q23), and the scope of deletions is
// keyed on it. A DELETED flight counts as well: reviving it on another day would re-derive
// its day. A stored flight without a day takes the package's. stored must hold the flights
// with the package's FLIDs (others are ignored); the first conflict in package order wins.
func CheckCrossDay(p Package, stored []Flight) *Refusal {
	byFLID := make(map[string]Flight, len(stored))
	for _, f := range stored {
		if _, dup := byFLID[f.FLID]; !dup {
			byFLID[f.FLID] = f
		}
	}
	for _, r := range p.records {
		s, ok := byFLID[r.Record.FLID]
		if !ok || s.OperationDay == nil || dayKey(*s.OperationDay) == dayKey(r.Day) {
			continue
		}
		state := ""
		if s.State == Deleted {
			state = " (deleted)"
		}
		return &Refusal{Code: RefuseCrossDay, Record: r.Pos, FLID: r.Record.FLID,
			Detail: fmt.Sprintf("the stored flight%s belongs to operation day %s, the package puts it on %s; an operation day is never re-derived",
				state, dayKey(*s.OperationDay), dayKey(r.Day))}
	}
	return nil
}

// dayKey names an operation day. Days are dates: the stored ones and DayRule's are UTC
// midnights, a request range's may be midnights of another zone, so the calendar date in the
// value's own location is what compares.
func dayKey(t time.Time) string { return t.Format(time.DateOnly) }

func dateOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// DayRange is the operation days a request (RQFD) asked for, both ends included; a RESP
// replaces exactly these days (R-SCHD-1, R-SCHD-3).
type DayRange struct{ First, Last time.Time }

// MaxScopeDays bounds a RESP's range: a request wider than a year is a defect of the request,
// and its scope would make the deletion candidates the whole store.
const MaxScopeDays = 366

// Scope is the set of operation days a snapshot replaces: a stored flight of one of these
// days that the package omits is deleted; flights of other days are never deleted by
// omission.
type Scope struct{ days []time.Time }

// Scope returns the days the package replaces. A DNLD covers the days of its own records; a
// RESP covers the range of the request it answers (request), whatever days its records
// carry: the request is what the answer is complete for. request must be nil for a DNLD and
// set for a RESP; the pump matches a RESP to its request before the rules run (a RESP without
// an open request is SKIPPED, G-RESP-GUARD), so an error here is a wiring defect, not the
// message's.
func (p Package) Scope(request *DayRange) (Scope, error) {
	switch p.styp {
	case "DNLD":
		if request != nil {
			return Scope{}, errors.New("schedule scope: a DNLD covers its records' days, not a request range")
		}
		var days []time.Time
		for _, r := range p.records {
			days = append(days, dateOf(r.Day))
		}
		slices.SortFunc(days, time.Time.Compare)
		return Scope{days: slices.CompactFunc(days, time.Time.Equal)}, nil
	case "RESP":
		if request == nil {
			return Scope{}, errors.New("schedule scope: a RESP needs the range of the request it answers")
		}
		first, last := dateOf(request.First), dateOf(request.Last)
		if last.Before(first) {
			return Scope{}, fmt.Errorf("schedule scope: request range %s..%s ends before it starts", dayKey(first), dayKey(last))
		}
		n := int(last.Sub(first).Hours()/24) + 1
		if n > MaxScopeDays {
			return Scope{}, fmt.Errorf("schedule scope: request range %s..%s is %d days, more than %d", dayKey(first), dayKey(last), n, MaxScopeDays)
		}
		days := make([]time.Time, 0, n)
		for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
			days = append(days, d)
		}
		return Scope{days: days}, nil
	}
	return Scope{}, errors.New("schedule scope: the package was not checked by ValidatePackage")
}

// Days are the scope's operation days, ascending, as UTC midnights.
func (s Scope) Days() []time.Time { return slices.Clone(s.days) }

// Contains reports whether an operation day is in the scope; a flight without a day (nil) is
// in no scope.
func (s Scope) Contains(day *time.Time) bool {
	if day == nil {
		return false
	}
	_, ok := slices.BinarySearchFunc(s.days, dateOf(*day), time.Time.Compare)
	return ok
}

// String lists the days for logs.
func (s Scope) String() string {
	keys := make([]string, len(s.days))
	for i, d := range s.days {
		keys[i] = dayKey(d)
	}
	return strings.Join(keys, ",")
}

// Masters lists the FLIDs a loader must still add to what it loaded for a package (the scope
// days' flights and the package's FLIDs): every flight a MAID names, in a record or in a
// loaded flight, that is neither loaded nor in the package. Together with the children of
// every loaded flight (by MAID) they close the code-share neighbourhood PlanSnapshot needs:
// a master's MAFL is derived from all its children, and deleting a master deletes them.
func (p Package) Masters(loaded []Flight) []string {
	have := make(map[string]bool, len(loaded)+len(p.records))
	for _, f := range loaded {
		have[f.FLID] = true
	}
	for _, r := range p.records {
		have[r.Record.FLID] = true
	}
	want := map[string]bool{}
	for _, r := range p.records {
		if m := r.Record.Scalars["MAID"].Value; m != "" && !have[m] {
			want[m] = true
		}
	}
	for _, f := range loaded {
		if m := f.Scalars["MAID"]; IsChild(f) && !have[m] {
			want[m] = true
		}
	}
	out := make([]string, 0, len(want))
	for m := range want {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// elementTags are the scalars set by their element's own rule (fdiv, fret, turnaround)
// rather than tag by tag.
var elementTags = []string{"FDIV", "FDIV_DDES", "FDIV_DDIR", "FRET", "FRET_REID", "TAOP", "TAFL", "TAID"}

// snapshotRecord is the state record rec of a snapshot at message m makes of cur, out of ID
// order too (R-ORDER-5): its word on the existence goes in the life, and a part a newer message
// wrote keeps that message's value; a field the record omits is cleared only when no newer
// message wrote it. A newer deletion stands: the flight keeps its state, only the life changes.
func snapshotRecord(cur *Flight, rec sis.FlightRecord, day time.Time, m int64) (Flight, []string, map[string]int64) {
	next, ignored := snapshotState(cur, rec, day)
	prev := New(rec.FLID)
	if cur != nil {
		prev = *cur
	}
	// say touches the existence alone (State, Prov.Life): the provenance is all it needs of
	// its own, and a snapshot decides thousands of flights.
	life := prev
	life.Prov = prev.Prov.Clone()
	life.say(m, Active)
	// A newer deletion stands (R-ORDER-4): the record's parts go to the details the deleted
	// flight keeps, as in ID order; nothing is published.
	next.State, next.Prov = life.State, life.Prov
	parts := allParts
	if !rec.FFID.Present || rec.FFID.Value == "" {
		// A FLTR carries no FFID: the flight's is kept, not written (snapshotState).
		parts = slices.DeleteFunc(slices.Clone(allParts), func(p string) bool { return p == "FFID" })
	}
	superseded := take(prev, &next, parts, m)
	next.Prov.rebase(m)
	if next.State == Deleted {
		superseded = withState(superseded, next.newestLife())
	}
	return next, ignored, superseded
}

// snapshotState is the full state a record describes, before the version and the derived
// fields are settled, and the tags it carried that are not flight state.
func snapshotState(cur *Flight, rec sis.FlightRecord, day time.Time) (Flight, []string) {
	next := New(rec.FLID)
	if cur != nil {
		next.CreatedAt = cur.CreatedAt
		// A FLTR carries no FFID (docs/sis-format.md): the FLOP envelope's identity is kept, not read as
		// "AODB deleted it", or every daily snapshot would publish a change for every flight
		// that had a FLOP.
		if ffid := cur.Scalars["FFID"]; ffid != "" {
			next.Scalars["FFID"] = ffid
		}
		if cur.OperationDay != nil {
			d := *cur.OperationDay
			next.OperationDay = &d
		}
	}
	if next.OperationDay == nil {
		d := day
		next.OperationDay = &d
	}
	if rec.FFID.Present && rec.FFID.Value != "" {
		next.Scalars["FFID"] = rec.FFID.Value
	}
	var ignored []string
	for tag, v := range rec.Scalars {
		switch {
		case !slices.Contains(Scalars, tag) || tag == BoardingStatus || tag == LastCallStatus:
			ignored = append(ignored, tag)
		case slices.Contains(elementTags, tag):
			// set below, by the element's rule
		case v.Value != "":
			next.Scalars[tag] = v.Value
		}
	}
	// On an empty state the FLOP element rules give the full-state reading: a diversion or a
	// return without its flag, or a turnaround with a part sent empty, is none at all.
	fdiv(&next, rec)
	fret(&next, rec)
	turnaround(&next, rec)
	// Collections are stored as sent, ROUT too (the 4-point cut is FLOP ROUT's, as for ADFT).
	wholeRecordParts(&next, rec)
	return next, reportIgnored(append(ignored, ignoredWhole(rec)...))
}
