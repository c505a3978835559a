// Package processor holds the pump's processors: transaction coordinators that load the
// current flight state, call the pure rules of package flight, and write the result with its
// outbox events (R-FLIGHT-6). Nothing here decides a flight rule.
package processor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
)

// Option configures the router and its processors.
type Option func(*settings)

type settings struct {
	reg       prometheus.Registerer
	logger    *slog.Logger
	batchSize int
	// requests is the RESP guard; nil leaves every RESP unapplied.
	requests *Requests
	// maxRecord is kafka.max-message-bytes: a message whose flights' events would not fit in a
	// record of it is refused before it writes anything (0: no bound).
	maxRecord int
	// details is the DetailCache of the flight and schedule processors (nil: Route makes one
	// for both; a processor made alone keeps none, or its own).
	details *flightstore.DetailCache
}

func newSettings(opts []Option) settings {
	st := settings{logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&st)
	}
	if st.requests != nil {
		st.requests.Logger = st.logger
	}
	return st
}

// WithMetrics registers the flight domain's metrics (msgx_flight_skipped_total).
func WithMetrics(reg prometheus.Registerer) Option {
	return func(s *settings) { s.reg = reg }
}

// WithLogger sets where ignored tags and the code-share children a snapshot deletes with their
// master are reported.
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) { s.logger = l }
}

// WithBatchSize sets schd.batch-size: the changed flights a schedule snapshot writes per
// transaction (0 = flight.DefaultBatchSize).
func WithBatchSize(n int) Option {
	return func(s *settings) { s.batchSize = n }
}

// WithMaxMessageBytes sets kafka.max-message-bytes: a message is refused, DEAD(MALFORMED) with
// nothing written, when an event of a flight it changes would not fit in a Kafka record of that
// size (docs/codec.md §6), since the dispatcher could never publish the state it commits.
func WithMaxMessageBytes(n int) Option {
	return func(s *settings) { s.maxRecord = n }
}

// WithRequests sets the RESP guard (req.timeout): a SCHD or reference RESP is applied only when
// it answers an open request of this system, which it then closes.
func WithRequests(timeout time.Duration) Option {
	return func(s *settings) { s.requests = &Requests{Timeout: timeout} }
}

// WithDetailCache sets the details the flight and schedule processors keep of the flights they
// read and wrote (flightstore.DetailCache), for the pump's main to empty at each term (D-18).
func WithDetailCache(c *flightstore.DetailCache) Option {
	return func(s *settings) { s.details = c }
}

// Route is the one place that dispatches on the message kind (R-PUMP-8).
func Route(days flight.DayRule, opts ...Option) pump.Router {
	st := newSettings(opts)
	if st.details == nil {
		// One cache for both: a FLOP after a snapshot finds the details the snapshot wrote.
		opts = append(slices.Clip(opts), WithDetailCache(flightstore.NewDetailCache(0)))
	}
	flights := NewFlights(days, opts...)
	schedule := NewSchedule(days, opts...)
	var guard RequestGuard
	if st.requests != nil {
		guard = st.requests
	}
	refs := NewReference(days.Zone, flights.logger, guard)
	return func(m *sis.Message) (pump.Processor, string) {
		switch b := m.Body.(type) {
		case *sis.Flop:
			return flights, ""
		case *sis.Schd:
			switch b.STYP {
			case "ADFT":
				return flights, ""
			case "DNLD":
				return schedule, ""
			case "RESP":
				// A RESP replaces the days of the request it answers, and only an open request
				// may be answered (G-RESP-GUARD): without the guard it can be neither scoped nor
				// guarded, and applying it unguarded could delete a day's flights on a stale
				// answer.
				if st.requests == nil {
					return nil, "SCHD-RESP needs the request it answers (G-RESP-GUARD), not matched here"
				}
				return schedule, ""
			}
			return nil, "SCHD-" + b.STYP + " has no processor in this version"
		case *sis.RefData, *sis.ResourceStatus:
			return refs, ""
		case *sis.Unsupported:
			return nil, b.Reason
		default:
			return nil, fmt.Sprintf("%s-%s is not handled by this system", m.Meta.TYPE, m.Meta.STYP)
		}
	}
}

// Flights applies FLOP (FDEL included) and SCHD-ADFT messages: one flight per record, all in
// the caller's transaction.
type Flights struct {
	days   flight.DayRule
	logger *slog.Logger
	// maxRecord is kafka.max-message-bytes (0: no bound, WithMaxMessageBytes).
	maxRecord int
	skipped   *prometheus.CounterVec
	// details spares a FLOP the ten-table read of the details the pump read or wrote last
	// (this processor or the schedule processor, which share it through Route), as long as the
	// flight's row is the version they belong to (D-18).
	details *flightstore.DetailCache
}

// NewFlights returns the flight processor.
func NewFlights(days flight.DayRule, opts ...Option) *Flights {
	st := newSettings(opts)
	f := &Flights{
		days:      days,
		logger:    st.logger,
		maxRecord: st.maxRecord,
		details:   st.details,
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_flight_skipped_total",
			Help: "Flight messages skipped by the domain rules, by reason (unknown-flight, deleted-flight)."}, []string{"reason"}),
	}
	if f.details == nil {
		f.details = flightstore.NewDetailCache(0)
	}
	if st.reg != nil {
		st.reg.MustRegister(f.skipped)
	}
	return f
}

// Apply implements pump.Processor.
func (f *Flights) Apply(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
	var records []sis.FlightRecord
	kind := flight.KindFLOP
	switch b := in.Message.Body.(type) {
	case *sis.Flop:
		records = []sis.FlightRecord{b.Record}
		if in.Message.Meta.STYP == "FDEL" {
			kind = flight.KindFDEL
		}
	case *sis.Schd:
		records = b.Records
		kind = flight.KindADFT
	default:
		return pump.Result{}, fmt.Errorf("flights processor got %T", in.Message.Body)
	}
	var res pump.Result
	var skips []string
	for i, rec := range records {
		fin := flight.Input{MsgID: in.MsgID, STYP: in.Message.Meta.STYP, Now: in.Now, Record: rec}
		cur, g, err := f.load(ctx, tx, kind, rec, &fin)
		if err != nil {
			return pump.Result{}, err
		}
		o := flight.Decide(kind, cur, fin, g, f.days)
		if o.Skip != "" {
			f.skipped.WithLabelValues(skipLabel(o.Skip)).Inc()
			if len(records) == 1 {
				// One record: a skip is the whole message's outcome and nothing was written.
				return pump.Result{}, pump.Skip(o.Skip)
			}
			// An ADFT of several flights goes on with the others (R-ORDER-2).
			skips = append(skips, rec.FLID+" "+o.Skip)
			continue
		}
		reason, err := overRecord(f.maxRecord, in, o.Events)
		if err != nil {
			return pump.Result{}, err
		}
		if reason != "" {
			// Rolls back what the records before this one wrote: the message changes nothing.
			return pump.Result{}, pump.OverBound(reason)
		}
		if len(o.Ignored) > 0 {
			f.logger.InfoContext(ctx, "tags and item fields that are not the STYP's or not flight state were not merged", "msg_id", in.MsgID, "flid", rec.FLID,
				"styp", in.Message.Meta.STYP, "ignored", o.Ignored)
		}
		if len(o.Superseded) > 0 {
			f.logger.InfoContext(ctx, "parts a newer message wrote were left as they are", "msg_id", in.MsgID, "flid", rec.FLID,
				"styp", in.Message.Meta.STYP, "superseded", o.Superseded)
		}
		// The record's writes and events in one round trip, which the next record's load sees;
		// the last record's go out with the COMMIT (db.Defer), as nothing reads them before.
		batch := &pgx.Batch{}
		// The target and its children were read with their details and locked by load: only
		// what changed of them is rewritten. Any other flight is written whole.
		stored := map[string]*flight.Flight{}
		if cur != nil {
			stored[cur.FLID] = cur
		}
		for i := range fin.Children {
			stored[fin.Children[i].FLID] = &fin.Children[i]
		}
		for id, m := range g.Masters {
			stored[id] = &m
		}
		// A state written without a version (only its provenance, or the details a deleted
		// flight keeps) is written the same way. The rows with their history rows are one
		// statement, the events with the dispatcher's wake-up another: a FLOP's writes are two
		// statements when its details did not change.
		flightstore.AddUpdates(batch, f.details, stored, slices.Concat(o.Writes, o.Recorded), changes(in, rec.FLID, stored, o))
		events := make([]outbox.NewEvent, len(o.Events))
		for i, e := range o.Events {
			events[i] = outbox.NewEvent{Target: e.Target, PartitionKey: e.FLID, Type: e.Type, Version: e.Version,
				Payload: e.Payload, MsgID: in.MsgID, Trace: in.Trace}
		}
		if err := outbox.AddTo(batch, events, in.Now); err != nil {
			return pump.Result{}, err
		}
		switch {
		case batch.Len() == 0:
		case i == len(records)-1:
			if err := db.Defer(ctx, tx, batch); err != nil {
				return pump.Result{}, fmt.Errorf("write flight %s with %d events: %w", rec.FLID, len(events), err)
			}
		default:
			if err := tx.SendBatch(ctx, batch).Close(); err != nil {
				return pump.Result{}, fmt.Errorf("write flight %s with %d events: %w", rec.FLID, len(events), err)
			}
		}
		res.Project = append(res.Project, o.Projected()...)
	}
	if len(skips) == len(records) {
		return pump.Result{}, pump.Skip(strings.Join(skips, "; "))
	}
	return res, nil
}

// overRecord is the reason a message is refused when one of the events it would write does not
// fit in a Kafka record of maxRecord bytes (kafka.max-message-bytes; 0: no bound), or "". The
// record is measured as the dispatcher will send it: the payload as PostgreSQL's jsonb gives
// it back (outbox.SentBytes), with key, headers and batch overhead counted at their largest
// (kafkarecord.BatchBound). So a state committed here is never one the dispatcher must refuse:
// the codec's bounds (docs/codec.md §6) let no message in whose state can be stored but never
// published (R-IDENT-5).
func overRecord(maxRecord int, in pump.Input, events []flight.Event) (string, error) {
	if maxRecord <= 0 {
		return "", nil
	}
	for _, e := range events {
		if e.Payload == nil {
			continue
		}
		size := outbox.MaxSentBytes(e.Payload)
		if kafkarecord.BatchBound(e.FLID, size, e.Type, in.Trace.State) <= maxRecord {
			continue // the common case: no walk of the payload
		}
		size, err := outbox.SentBytes(e.Payload)
		if err != nil {
			return "", fmt.Errorf("size of the %s event of flight %s: %w", e.Target, e.FLID, err)
		}
		if n := kafkarecord.BatchBound(e.FLID, size, e.Type, in.Trace.State); n > maxRecord {
			what := "change notification"
			if e.Target == flight.TargetSchd {
				what = "document"
			}
			return fmt.Sprintf("over the codec's limits: the %s %s of flight %s would be %d bytes, a Kafka record of up to %d bytes, over the %d of kafka.max-message-bytes",
				e.Target, what, e.FLID, size, n, maxRecord), nil
		}
	}
	return "", nil
}

// skipLabel is a skip reason's label for msgx_flight_skipped_total: its first word, so the
// superseded reasons, which name parts and messages, stay one series.
func skipLabel(reason string) string {
	word, _, _ := strings.Cut(reason, ":")
	return word
}

// changes are the history rows of one record's outcome (R-ORDER-8): one per flight it wrote,
// and one for the target when it wrote nothing but left parts to newer messages. stored holds
// the states the flights had before.
func changes(in pump.Input, target string, stored map[string]*flight.Flight, o flight.Outcome) []flightstore.Change {
	events := map[string][]flightstore.ChangeEvent{}
	for _, e := range o.Events {
		events[e.FLID] = append(events[e.FLID], flightstore.ChangeEvent{Target: e.Target, Type: e.Type, Version: e.Version})
	}
	row := func(f flight.Flight, cause string) flightstore.Change {
		return flightstore.Change{MsgID: in.MsgID, FLID: f.FLID, MsgType: in.Message.Meta.TYPE, STYP: in.Message.Meta.STYP,
			Cause: cause, State: f.State, Version: f.Version, Changes: flight.Diff(stored[f.FLID], f), Events: events[f.FLID], At: in.Now}
	}
	var out []flightstore.Change
	// A FLID written twice is described by its last state, the one flightstore.AddUpdates stores.
	at := map[string]int{}
	for _, f := range slices.Concat(o.Writes, o.Recorded) {
		if _, ok := at[f.FLID]; !ok {
			at[f.FLID] = len(out)
			out = append(out, flightstore.Change{})
		}
		c := row(f, flightstore.CauseTarget)
		switch {
		case f.FLID == target:
			c.Superseded = o.Superseded
		case flight.IsChild(f) && f.Scalars["MAID"] == target:
			c.Cause = flightstore.CauseCascade
		default:
			c.Cause = flightstore.CauseCodeShare
		}
		out[at[f.FLID]] = c
	}
	if _, written := at[target]; !written && len(o.Project) > 0 && o.Project[0].FLID == target {
		// Nothing of the target written: its row says it was touched, and what a newer
		// message held.
		c := row(o.Project[0], flightstore.CauseTarget)
		c.Changes, c.Superseded = nil, o.Superseded
		out = append(out, c)
	}
	return out
}

// Reproject implements pump.Reprojector: the current states of the flights a message whose
// step ① already committed concerns, as they are now, DELETED ones included, without deciding
// anything. Those are its records' FLIDs, the flights its events were written for (a master
// whose MAFL it moved, a former master, cascaded children), the masters of the children among
// them, and the children of a deleted master (deleted with it). A FLID moved to history since
// has nothing left to project: the sweep removed its projection.
func (f *Flights) Reproject(ctx context.Context, tx pgx.Tx, in pump.Input) ([]flight.Flight, error) {
	var flids []string
	switch b := in.Message.Body.(type) {
	case *sis.Flop:
		flids = append(flids, b.Record.FLID)
	case *sis.Schd:
		for _, r := range b.Records {
			flids = append(flids, r.FLID)
		}
	default:
		return nil, fmt.Errorf("flights processor got %T", in.Message.Body)
	}
	events, err := outbox.ByMessage(ctx, tx, in.MsgID)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		flids = append(flids, e.PartitionKey)
	}
	var out []flight.Flight
	seen := map[string]bool{}
	for i := 0; i < len(flids); i++ {
		id := flids[i]
		if seen[id] {
			continue
		}
		seen[id] = true
		cur, err := flightstore.Load(ctx, tx, id, false)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			continue
		}
		if flight.IsChild(*cur) {
			out = append(out, *cur)
			flids = append(flids, cur.Scalars["MAID"])
			continue
		}
		children, err := flightstore.Children(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, flight.Published(*cur, children))
		if cur.State == flight.Deleted {
			for _, c := range children {
				if c.State == flight.Deleted {
					flids = append(flids, c.FLID)
				}
			}
		}
	}
	return out, nil
}

// load reads, in the domain transaction, everything the rules decide on: the target (locked),
// its code-share children, and the masters it points at before and after the message with
// their children (R-CODESHARE-2: the MAFL and the write that produces it share one snapshot).
func (f *Flights) load(ctx context.Context, tx pgx.Tx, kind flight.Kind, rec sis.FlightRecord, in *flight.Input) (*flight.Flight, flight.Group, error) {
	g := flight.Group{Masters: map[string]flight.Flight{}, Siblings: map[string][]flight.Flight{}}
	// The target and its children in one round trip: a FLOP of an unknown or deleted flight,
	// which is skipped, reads its (absent or deleted) children for nothing, a rare waste next
	// to two round trips saved on every message.
	cur, children, err := flightstore.LoadLocked(ctx, tx, f.details, rec.FLID)
	if err != nil {
		return nil, g, err
	}
	if kind == flight.KindFLOP && (cur == nil || cur.State == flight.Deleted) {
		// Skipped, or (older than the deletion) written to the details the deleted flight
		// keeps, which publishes nothing: nothing else to read.
		return cur, g, nil
	}
	if cur == nil && kind == flight.KindADFT {
		// The FLID may have been moved to history: the new flight starts above the versions
		// (and the sweep's tombstone) already published for it, and a schedule older than the
		// flight moved out does not bring it back (R-ORDER-4).
		a, err := flightstore.ArchivedOf(ctx, tx, rec.FLID)
		if err != nil {
			return nil, g, err
		}
		in.VersionFloor, in.Archived = a.Floor, a.LastMsg
	}
	in.Children = children
	var masters []string
	if cur != nil && flight.IsChild(*cur) {
		masters = append(masters, cur.Scalars["MAID"])
	}
	// Only a schedule record sets MAID (no FLOP STYP owns it).
	if m := rec.Scalars["MAID"]; kind == flight.KindADFT && m.Value != "" && m.Value != rec.FLID {
		masters = append(masters, m.Value)
	}
	for _, id := range masters {
		if _, done := g.Masters[id]; done {
			continue
		}
		m, err := flightstore.Load(ctx, tx, id, true)
		if err != nil {
			return nil, g, err
		}
		if m == nil {
			continue // dangling MAID
		}
		g.Masters[id] = *m
		if g.Siblings[id], err = flightstore.Children(ctx, tx, id); err != nil {
			return nil, g, err
		}
	}
	return cur, g, nil
}
