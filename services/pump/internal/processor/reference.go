package processor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/reference"
	"github.com/msgexchange/msgexchange/pkg/refstore"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
)

// RequestGuard decides whether a RESP answers an open request of this system (G-RESP-GUARD,
// R-REF-8, R-SCHD-6: matched on the response TYPE against the RQRD's STYP, and for RSTA
// on the RTYP too). It returns "" to apply the RESP, or why it is not applied (the message is
// then SKIPPED with that reason and nothing is written).
type RequestGuard interface {
	AdmitRESP(ctx context.Context, tx pgx.Tx, in pump.Input, scope RESPScope) (string, error)
}

// RESPScope is what a RESP covers: its TYPE (a category or RSTA) and, for RSTA, the RTYPs of
// its records.
type RESPScope struct {
	Type  string
	RTYPs []string
}

// Reference applies the 13 reference categories and RSTA (the R-REF and R-RSTA rules) to ref_master and
// ref_resource_event. Reference data writes no msg_event rows and no projection: it takes no
// part in flight state or Kafka (R-REF-6).
type Reference struct {
	zone   *time.Location
	logger *slog.Logger
	// guard gates every RESP (processor.Requests in msgx-pump: WithRequests). Without one, as in
	// tests of the category rules alone, a RESP is applied like a DNLD.
	guard RequestGuard
}

// NewReference returns the reference processor; body times are read in zone, guard may be nil.
func NewReference(zone *time.Location, logger *slog.Logger, guard RequestGuard) *Reference {
	if zone == nil {
		zone = sis.DefaultZone()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reference{zone: zone, logger: logger, guard: guard}
}

// Apply implements pump.Processor.
func (r *Reference) Apply(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
	switch b := in.Message.Body.(type) {
	case *sis.RefData:
		return r.category(ctx, tx, in, b)
	case *sis.ResourceStatus:
		return r.status(ctx, tx, in, b)
	default:
		return pump.Result{}, fmt.Errorf("reference processor got %T", in.Message.Body)
	}
}

func (r *Reference) category(ctx context.Context, tx pgx.Tx, in pump.Input, d *sis.RefData) (pump.Result, error) {
	op := reference.OpOf(d.STYP)
	var why string
	switch op {
	case reference.Replace:
		why = reference.CheckBatch(d)
	case reference.Upsert, reference.Delete:
		why = reference.CheckIncrement(d)
	default:
		return pump.Result{}, fmt.Errorf("reference processor got %s-%s", d.Category, d.STYP)
	}
	if why != "" {
		return pump.Result{}, pump.Reject(why)
	}
	if err := r.admit(ctx, tx, in, RESPScope{Type: d.Category}); err != nil {
		return pump.Result{}, err
	}
	last, err := refstore.CategoryProgress(ctx, tx, d.Category)
	if err != nil {
		return pump.Result{}, err
	}
	if last > in.MsgID {
		// Only a replay brings an older message after a newer one: applying it would rewind
		// the category (a DNLD would even bring back what a later DEL removed).
		return pump.Result{}, pump.Skip(fmt.Sprintf("superseded: %s is at msg %d", d.Category, last))
	}
	src := refstore.Source{MsgID: in.MsgID, Batch: sis.Identity(in.Message.Meta, false), At: in.Now}
	var dropped []string
	recs := make([]refstore.Record, 0, len(d.Records))
	for _, rec := range d.Records {
		st, err := reference.Store(d.Category, rec)
		if err != nil {
			return pump.Result{}, err
		}
		for _, t := range st.Dropped {
			if !slices.Contains(dropped, t) {
				dropped = append(dropped, t)
			}
		}
		recs = append(recs, refstore.Record{RKey: st.RKey, Payload: st.Payload})
	}
	switch op {
	case reference.Replace:
		removed, err := refstore.Replace(ctx, tx, d.Category, recs, src)
		if err != nil {
			return pump.Result{}, err
		}
		r.logger.InfoContext(ctx, "reference category published", "msg_id", in.MsgID, "rtype", d.Category, "styp", d.STYP,
			"records", len(recs), "removed", removed)
	case reference.Upsert:
		if err := refstore.Upsert(ctx, tx, d.Category, recs, src); err != nil {
			return pump.Result{}, err
		}
	case reference.Delete:
		keys := make([]string, len(recs))
		for i, rec := range recs {
			keys[i] = rec.RKey
		}
		n, err := refstore.Delete(ctx, tx, d.Category, keys)
		if err != nil {
			return pump.Result{}, err
		}
		if int(n) < len(keys) {
			r.logger.InfoContext(ctx, "reference DEL named keys that were not stored", "msg_id", in.MsgID, "rtype", d.Category,
				"keys", len(keys), "deleted", n)
		}
	}
	if len(dropped) > 0 {
		r.logger.DebugContext(ctx, "reference tags left out by R-REF-5", "msg_id", in.MsgID, "rtype", d.Category, "dropped", dropped)
	}
	return pump.Result{}, refstore.Advance(ctx, tx, d.Category, d.STYP, src, op == reference.Replace, len(recs))
}

// status appends the RSTA events. Neither DNLD nor RESP removes a resource's status because
// the message does not mention it (R-RSTA-3).
func (r *Reference) status(ctx context.Context, tx pgx.Tx, in pump.Input, rs *sis.ResourceStatus) (pump.Result, error) {
	events, why := reference.Events(rs, in.MsgID, in.Message.Meta.DTTM, r.zone)
	if why != "" {
		return pump.Result{}, pump.Reject(why)
	}
	scope := RESPScope{Type: "RSTA"}
	for _, e := range events {
		if !slices.Contains(scope.RTYPs, e.RTYP) {
			scope.RTYPs = append(scope.RTYPs, e.RTYP)
		}
	}
	if err := r.admit(ctx, tx, in, scope); err != nil {
		return pump.Result{}, err
	}
	fresh := events[:0:0]
	for _, e := range events {
		last, err := refstore.LastEventMsg(ctx, tx, e.RTYP, e.RSID)
		if err != nil {
			return pump.Result{}, err
		}
		if last > in.MsgID {
			// A replayed older status must not count as sent after the newer one.
			r.logger.InfoContext(ctx, "resource status superseded by a newer message", "msg_id", in.MsgID, "rtyp", e.RTYP,
				"rsid", e.RSID, "newer_msg_id", last)
			continue
		}
		fresh = append(fresh, e)
	}
	if len(fresh) == 0 {
		return pump.Result{}, pump.Skip("superseded: every resource of the message has a newer status")
	}
	return pump.Result{}, refstore.AddEvents(ctx, tx, fresh, sis.Identity(in.Message.Meta, false), in.Now)
}

// admit is the RESP request guard's one call (G-RESP-GUARD): a RESP it does not admit is
// skipped (a pump.Decision). Without a guard every RESP is admitted and applied like a DNLD.
func (r *Reference) admit(ctx context.Context, tx pgx.Tx, in pump.Input, scope RESPScope) error {
	if in.Message.Meta.STYP != "RESP" || r.guard == nil {
		return nil
	}
	skip, err := r.guard.AdmitRESP(ctx, tx, in, scope)
	if err != nil {
		return err
	}
	if skip != "" {
		return pump.Skip(skip)
	}
	return nil
}
