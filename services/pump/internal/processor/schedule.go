package processor

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
)

// Schedule applies SCHD DNLD snapshots (the R-SCHD rules): the package
// replaces the operation days it covers. The rules are flight.ValidatePackage and
// flight.PlanSnapshot; this coordinator loads what they decide on in bulk, writes the plan in
// batches (pump.Result.Then) and appends the schedule trail. docs/schedule.md describes it.
type Schedule struct {
	days      flight.DayRule
	batchSize int
	logger    *slog.Logger
	// maxRecord is kafka.max-message-bytes (0: no bound, WithMaxMessageBytes).
	maxRecord int
	// guard gates a RESP (G-RESP-GUARD); without it a RESP is not applied.
	guard *Requests
	// details spares a package the detail read of the flights this pump read or wrote last,
	// as long as their rows are the versions they belong to (D-18).
	details *flightstore.DetailCache
}

// NewSchedule returns the schedule snapshot processor.
func NewSchedule(days flight.DayRule, opts ...Option) *Schedule {
	st := newSettings(opts)
	return &Schedule{days: days, batchSize: st.batchSize, logger: st.logger, maxRecord: st.maxRecord, guard: st.requests, details: st.details}
}

// Apply implements pump.Processor for a DNLD: the whole-package check before anything is read,
// then the shared snapshot path with the records' own days as the scope.
func (s *Schedule) Apply(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
	b, ok := in.Message.Body.(*sis.Schd)
	if !ok {
		return pump.Result{}, fmt.Errorf("schedule processor got %T", in.Message.Body)
	}
	pkg, refusal := flight.ValidatePackage(b, s.days)
	if refusal != nil {
		return pump.Result{}, s.refuse(in, b.STYP, len(b.Records), flight.Scope{}, pump.Reject(refusal.String()))
	}
	if pkg.STYP() == "RESP" {
		return s.applyRESP(ctx, tx, in, pkg)
	}
	scope, err := pkg.Scope(nil)
	if err != nil {
		return pump.Result{}, err
	}
	return s.apply(ctx, tx, in, pkg, scope, nil)
}

// applyRESP applies a RESP only when it answers an open RQFD whose range covers its records'
// days and that was sent before it (G-RESP-GUARD); its scope is that request's range, and the
// request becomes DONE in the transaction of the last batch, with applied_at. An unmatched RESP
// is SKIPPED with the guard's reason and changes nothing.
func (s *Schedule) applyRESP(ctx context.Context, tx pgx.Tx, in pump.Input, pkg flight.Package) (pump.Result, error) {
	if s.guard == nil {
		return pump.Result{}, fmt.Errorf("schedule processor: a RESP needs the request guard")
	}
	a := request.Answer{Type: request.TypeRQFD, DTTM: in.Message.Meta.DTTM}
	for _, r := range pkg.Records() {
		if a.From.IsZero() || r.Day.Before(a.From) {
			a.From = r.Day
		}
		if r.Day.After(a.To) {
			a.To = r.Day
		}
	}
	matched, skip, err := s.guard.match(ctx, tx, in, []request.Answer{a})
	if err != nil {
		return pump.Result{}, err
	}
	if skip != "" {
		return pump.Result{}, pump.Skip(skip)
	}
	req := matched[0]
	scope, err := pkg.Scope(&flight.DayRange{First: *req.From, Last: *req.To})
	if err != nil {
		return pump.Result{}, err
	}
	return s.apply(ctx, tx, in, pkg, scope, func(ctx context.Context, tx pgx.Tx) error { return s.guard.done(ctx, tx, in, matched) })
}

// apply is the part DNLD and RESP share once the scope is known: load, plan, and the first
// batch in tx; the other batches as the pump's further steps. On a refusal nothing is written.
//
// last, when set, runs in the transaction of the last batch (the one that records applied_at):
// a RESP closes its request there, once the whole package is committed.
func (s *Schedule) apply(ctx context.Context, tx pgx.Tx, in pump.Input, pkg flight.Package, scope flight.Scope,
	last func(ctx context.Context, tx pgx.Tx) error) (pump.Result, error) {
	sin, err := s.load(ctx, tx, in, pkg, scope)
	if err != nil {
		return pump.Result{}, err
	}
	plan, refusal := flight.PlanSnapshot(sin)
	if refusal != nil {
		return pump.Result{}, s.refuse(in, pkg.STYP(), len(sin.Package.Records()), scope, pump.Reject(refusal.String()))
	}
	// Every batch's events are known before the first is written: a package with one state
	// that could never be published writes nothing (R-IDENT-5).
	for _, f := range plan.Flights {
		reason, err := overRecord(s.maxRecord, in, f.Decision.Events)
		if err != nil {
			return pump.Result{}, err
		}
		if reason != "" {
			return pump.Result{}, s.refuse(in, pkg.STYP(), len(sin.Package.Records()), scope, pump.OverBound(reason))
		}
	}
	s.report(ctx, in, plan)
	stored := make(map[string]*flight.Flight, len(sin.Stored))
	for i := range sin.Stored {
		stored[sin.Stored[i].FLID] = &sin.Stored[i]
	}
	batches := plan.Batches(s.batchSize)
	trail := trailOf(in, pkg, plan, len(batches))
	res := pump.Result{Trail: func(ctx context.Context, q db.Executor) error { return flightstore.AppendSnapLog(ctx, q, trail) }}
	if last == nil {
		last = func(context.Context, pgx.Tx) error { return nil }
	}
	if len(batches) == 0 {
		// An empty DNLD covers no day; a RESP whose days are already as it says writes nothing.
		return res, last(ctx, tx)
	}
	if res.Project, err = s.write(ctx, tx, in, batches[0], stored); err != nil {
		return pump.Result{}, err
	}
	if len(batches) == 1 {
		return res, last(ctx, tx)
	}
	for i, b := range batches[1:] {
		res.Then = append(res.Then, func(ctx context.Context, tx pgx.Tx) ([]flight.Projected, error) {
			states, err := s.write(ctx, tx, in, b, stored)
			if err == nil && i == len(batches)-2 {
				err = last(ctx, tx)
			}
			return states, err
		})
	}
	return res, nil
}

// scopeOfApplied is the scope an applied package had: a DNLD's own days, a RESP's the range of
// the request it closed (none when it closed none).
func (s *Schedule) scopeOfApplied(ctx context.Context, tx pgx.Tx, in pump.Input, pkg flight.Package) (flight.Scope, error) {
	if pkg.STYP() != "RESP" {
		return pkg.Scope(nil)
	}
	reqs, err := request.AnsweredBy(ctx, tx, in.MsgID)
	if err != nil || len(reqs) == 0 || reqs[0].From == nil || reqs[0].To == nil {
		return flight.Scope{}, err
	}
	return pkg.Scope(&flight.DayRange{First: *reqs[0].From, Last: *reqs[0].To})
}

// load reads, in the caller's transaction, everything PlanSnapshot decides on
// (flight.SnapshotInput.Stored): the flights of the scope days, DELETED ones included, the
// package's FLIDs whatever their day, the masters Package.Masters names, the children of all of
// those, and the version floors of the package FLIDs that are not stored. Each is one bulk
// read, so the round trips do not grow with the package.
func (s *Schedule) load(ctx context.Context, tx pgx.Tx, in pump.Input, pkg flight.Package, scope flight.Scope) (flight.SnapshotInput, error) {
	sin := flight.SnapshotInput{MsgID: in.MsgID, Now: in.Now, Package: pkg, Scope: scope}
	stored, err := flightstore.LoadDays(ctx, tx, s.details, scope.Days())
	if err != nil {
		return sin, err
	}
	have := make(map[string]bool, len(stored))
	add := func(fs []flight.Flight) {
		for _, f := range fs {
			if !have[f.FLID] {
				have[f.FLID] = true
				stored = append(stored, f)
			}
		}
	}
	for _, f := range stored {
		have[f.FLID] = true
	}
	var missing []string
	for _, r := range pkg.Records() {
		if !have[r.Record.FLID] {
			missing = append(missing, r.Record.FLID)
		}
	}
	others, err := flightstore.LoadMany(ctx, tx, s.details, missing)
	if err != nil {
		return sin, err
	}
	add(others)
	masters, err := flightstore.LoadMany(ctx, tx, s.details, pkg.Masters(stored))
	if err != nil {
		return sin, err
	}
	add(masters)
	ids := make([]string, 0, len(stored))
	for _, f := range stored {
		ids = append(ids, f.FLID)
	}
	children, err := flightstore.ChildrenOfMany(ctx, tx, s.details, ids)
	if err != nil {
		return sin, err
	}
	add(children)
	var absent []string
	for _, id := range missing {
		if !have[id] {
			absent = append(absent, id)
		}
	}
	// A FLID the history sweep archived starts above its tombstone, as for ADFT, and is not
	// brought back by a package older than the flight moved out (R-ORDER-5).
	archived, err := flightstore.ArchivedOfMany(ctx, tx, absent)
	if err != nil {
		return sin, err
	}
	sin.VersionFloors, sin.Archived = map[string]int64{}, map[string]int64{}
	for id, a := range archived {
		sin.VersionFloors[id], sin.Archived[id] = a.Floor, a.LastMsg
	}
	sin.Stored = stored
	return sin, nil
}

// write saves one batch's changed flights, and those whose provenance alone changed, and adds
// their events (KAFKA:msg and KAFKA:schd per change, tombstones for deletions) and their
// history rows in tx, and returns every state of the batch to project. stored holds the
// flights as the package found them.
func (s *Schedule) write(ctx context.Context, tx pgx.Tx, in pump.Input, b flight.Batch, stored map[string]*flight.Flight) ([]flight.Projected, error) {
	o := b.Outcome()
	// A state whose details are the stored ones has its row alone written, in the round trip
	// of the events: a snapshot re-sent unchanged records its parts for thousands of flights,
	// and a daily schedule mostly changes a flight's scalars, while its details are most of
	// the rows a full write deletes and inserts again.
	var full, rows []flight.Flight
	for _, set := range [][]flight.Flight{o.Writes, o.Recorded} {
		for _, f := range set {
			if s := stored[f.FLID]; s != nil && flightstore.SameDetails(*s, f) {
				rows = append(rows, f)
			} else {
				full = append(full, f)
			}
		}
	}
	if err := flightstore.SaveMany(ctx, tx, s.details, full); err != nil {
		return nil, err
	}
	batch := &pgx.Batch{}
	flightstore.AddRows(batch, s.details, rows, scheduleChanges(in, b, stored))
	if err := outbox.AddTo(batch, newEvents(in, o.Events), in.Now); err != nil {
		return nil, err
	}
	if batch.Len() > 0 {
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return nil, fmt.Errorf("add %d events and the history of %d flights: %w", len(o.Events), len(b), err)
		}
	}
	return o.Projected(), nil
}

// scheduleChanges are the history rows of a batch (R-ORDER-8): one per flight it wrote or
// whose parts newer messages held.
func scheduleChanges(in pump.Input, b flight.Batch, stored map[string]*flight.Flight) []flightstore.Change {
	var out []flightstore.Change
	for _, f := range b {
		d := f.Decision
		if !d.Changed && !d.Recorded && len(d.Superseded) == 0 {
			continue
		}
		c := flightstore.Change{MsgID: in.MsgID, FLID: f.FLID, MsgType: in.Message.Meta.TYPE, STYP: in.Message.Meta.STYP,
			Cause: string(f.Cause), State: d.Next.State, Version: d.Next.Version, Changes: flight.Diff(stored[f.FLID], d.Next),
			Superseded: d.Superseded, At: in.Now}
		for _, e := range d.Events {
			c.Events = append(c.Events, flightstore.ChangeEvent{Target: e.Target, Type: e.Type, Version: e.Version})
		}
		out = append(out, c)
	}
	return out
}

// newEvents are the rules' events as outbox rows of the message.
func newEvents(in pump.Input, events []flight.Event) []outbox.NewEvent {
	out := make([]outbox.NewEvent, len(events))
	for i, e := range events {
		out[i] = outbox.NewEvent{Target: e.Target, PartitionKey: e.FLID, Type: e.Type, Version: e.Version,
			Payload: e.Payload, MsgID: in.MsgID, Trace: in.Trace}
	}
	return out
}

// refuse is d, the decision of a whole-package refusal (DEAD(PROTOCOL) for a refusal of the
// rules, DEAD(MALFORMED) for a state over the codec's limits), with its trail row.
func (s *Schedule) refuse(in pump.Input, styp string, records int, scope flight.Scope, d *pump.Decision) *pump.Decision {
	trail := flightstore.SnapLog{MsgID: in.MsgID, STYP: styp, Records: records, Scope: scope.Days(),
		Outcome: flightstore.SnapRefused, Reason: d.Reason, At: in.Now}
	return d.WithTrail(func(ctx context.Context, q db.Executor) error {
		return flightstore.AppendSnapLog(ctx, q, trail)
	})
}

// report logs what the plan keeps that the operator may want to know: records that stay
// code-share children of a master the package deletes, and tags that are not flight state.
// One line each per package, not per record: a package has thousands.
func (s *Schedule) report(ctx context.Context, in pump.Input, plan flight.Plan) {
	if len(plan.WithMaster) > 0 {
		s.logger.WarnContext(ctx, "schedule snapshot carries code-share children of masters it deletes: deleted with them",
			"msg_id", in.MsgID, "children", len(plan.WithMaster), "flids", first(plan.WithMaster, 20))
	}
	if len(plan.Superseded) > 0 {
		s.logger.InfoContext(ctx, "schedule snapshot records of flights moved to history after a newer message were not applied",
			"msg_id", in.MsgID, "records", len(plan.Superseded), "flids", first(plan.Superseded, 20))
	}
	superseded := 0
	for _, f := range plan.Flights {
		if len(f.Decision.Superseded) > 0 {
			superseded++
		}
	}
	if superseded > 0 {
		s.logger.InfoContext(ctx, "schedule snapshot left parts a newer message wrote as they are", "msg_id", in.MsgID,
			"flights", superseded)
	}
	var tags []string
	records := 0
	for _, f := range plan.Flights {
		if len(f.Decision.Ignored) > 0 {
			records++
			tags = append(tags, f.Decision.Ignored...)
		}
	}
	if records > 0 {
		slices.Sort(tags)
		s.logger.InfoContext(ctx, "tags that are not flight state were not merged", "msg_id", in.MsgID, "styp", in.Message.Meta.STYP,
			"records", records, "ignored", slices.Compact(tags))
	}
}

func first(ids []string, n int) []string { return ids[:min(len(ids), n)] }

// trailOf is the trail row of an applied package: what this run wrote. A re-run after a crash
// between batches counts as unchanged what the earlier run committed.
func trailOf(in pump.Input, pkg flight.Package, plan flight.Plan, batches int) flightstore.SnapLog {
	var applied, deleted, unchanged int
	for _, f := range plan.Flights {
		switch {
		case !f.Decision.Changed:
			unchanged++
		case f.Decision.Next.State == flight.Deleted:
			deleted++
		default:
			applied++
		}
	}
	return flightstore.SnapLog{MsgID: in.MsgID, STYP: pkg.STYP(), Records: len(pkg.Records()),
		Applied: &applied, Deleted: &deleted, Unchanged: &unchanged, Batches: &batches,
		Scope: plan.Scope.Days(), Outcome: flightstore.SnapApplied, At: in.Now}
}

// Reproject implements pump.Reprojector for a package whose last batch committed: the current
// states of its records' FLIDs, of every flight its events name (deletions, cascades, masters
// whose MAFL it moved) and of the deleted flights of its scope days, with the masters of the
// children among them (MAFL derived) and the deleted children of a deleted master, as they are
// now and deciding nothing. The only write is the trail row (R-SCHD-5).
func (s *Schedule) Reproject(ctx context.Context, tx pgx.Tx, in pump.Input) ([]flight.Flight, error) {
	b, ok := in.Message.Body.(*sis.Schd)
	if !ok {
		return nil, fmt.Errorf("schedule processor got %T", in.Message.Body)
	}
	var scope flight.Scope
	if pkg, refusal := flight.ValidatePackage(b, s.days); refusal == nil {
		var err error
		if scope, err = s.scopeOfApplied(ctx, tx, in, pkg); err != nil {
			return nil, err
		}
	}
	days, err := flightstore.LoadDays(ctx, tx, nil, scope.Days())
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, r := range b.Records {
		want[r.FLID] = true
	}
	events, err := outbox.ByMessage(ctx, tx, in.MsgID)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		want[e.PartitionKey] = true
	}
	byFLID := map[string]flight.Flight{}
	for _, f := range days {
		if f.State == flight.Deleted || want[f.FLID] {
			byFLID[f.FLID] = f
		}
	}
	if err := loadInto(ctx, tx, byFLID, keysNotIn(want, byFLID)); err != nil {
		return nil, err
	}
	masters := map[string]bool{}
	for _, f := range byFLID {
		if flight.IsChild(f) {
			masters[f.Scalars["MAID"]] = true
		}
	}
	if err := loadInto(ctx, tx, byFLID, keysNotIn(masters, byFLID)); err != nil {
		return nil, err
	}
	var parents []string
	for id, f := range byFLID {
		if !flight.IsChild(f) {
			parents = append(parents, id)
		}
	}
	slices.Sort(parents)
	children, err := flightstore.ChildrenOfMany(ctx, tx, nil, parents)
	if err != nil {
		return nil, err
	}
	childrenOf := map[string][]flight.Flight{}
	for _, c := range children {
		childrenOf[c.Scalars["MAID"]] = append(childrenOf[c.Scalars["MAID"]], c)
	}
	out := make([]flight.Flight, 0, len(byFLID))
	seen := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(byFLID)) {
		f := byFLID[id]
		seen[id] = true
		if flight.IsChild(f) {
			out = append(out, f)
			continue
		}
		out = append(out, flight.Published(f, childrenOf[id]))
	}
	for _, id := range parents {
		if byFLID[id].State != flight.Deleted {
			continue
		}
		for _, c := range childrenOf[id] {
			if c.State == flight.Deleted && !seen[c.FLID] {
				seen[c.FLID] = true
				out = append(out, c)
			}
		}
	}
	trail := flightstore.SnapLog{MsgID: in.MsgID, STYP: b.STYP, Records: len(b.Records), Scope: scope.Days(),
		Outcome: flightstore.SnapReprojected, At: in.Now}
	if err := flightstore.AppendSnapLog(ctx, tx, trail); err != nil {
		return nil, err
	}
	return out, nil
}

// loadInto adds the stored states of flids to byFLID (unknown FLIDs have nothing to add: a
// FLID moved to history meanwhile has no projection left either).
func loadInto(ctx context.Context, tx pgx.Tx, byFLID map[string]flight.Flight, flids []string) error {
	fs, err := flightstore.LoadMany(ctx, tx, nil, flids)
	if err != nil {
		return err
	}
	for _, f := range fs {
		byFLID[f.FLID] = f
	}
	return nil
}

func keysNotIn(set map[string]bool, have map[string]flight.Flight) []string {
	var out []string
	for id := range set {
		if _, ok := have[id]; !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
