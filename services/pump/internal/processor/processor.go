// Package processor holds the pump's processors: transaction coordinators that load the
// current flight state, call the pure rules of package flight, and write the result with its
// outbox events (seed 003 §2).
package processor

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
)

// Route is the one place that dispatches on the message kind (seed 003 §5.2 step 4).
func Route(days flight.DayRule) pump.Router {
	flights := Flights{Days: days}
	return func(m *sis.Message) (pump.Processor, string) {
		switch b := m.Body.(type) {
		case *sis.Flop:
			return flights, ""
		case *sis.Schd:
			if b.STYP == "ADFT" {
				return flights, ""
			}
			return nil, "SCHD-" + b.STYP + " has no processor in this version"
		case *sis.RefData:
			return nil, b.Category + "-" + b.STYP + " has no processor in this version"
		case *sis.ResourceStatus:
			return nil, "RSTA-" + b.STYP + " has no processor in this version"
		case *sis.Unsupported:
			return nil, b.Reason
		default:
			return nil, fmt.Sprintf("%s-%s is not handled by this system", m.Meta.TYPE, m.Meta.STYP)
		}
	}
}

// Flights applies FLOP, FDEL and SCHD-ADFT messages: one flight per record, all in the
// caller's transaction.
type Flights struct {
	Days flight.DayRule
}

// Apply implements pump.Processor.
func (f Flights) Apply(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
	var records []sis.FlightRecord
	switch b := in.Message.Body.(type) {
	case *sis.Flop:
		records = []sis.FlightRecord{b.Record}
	case *sis.Schd:
		records = b.Records
	default:
		return pump.Result{}, fmt.Errorf("flights processor got %T", in.Message.Body)
	}
	var res pump.Result
	for _, rec := range records {
		cur, err := flightstore.Load(ctx, tx, rec.FLID, true)
		if err != nil {
			return res, err
		}
		fin := flight.Input{MsgID: in.MsgID, STYP: in.Message.Meta.STYP, Now: in.Now, Record: rec}
		var d flight.Decision
		switch {
		case in.Message.Meta.TYPE == "SCHD":
			d = flight.ApplyADFT(cur, fin, f.Days)
		case in.Message.Meta.STYP == "FDEL":
			d = flight.ApplyFDEL(cur, fin)
		default:
			d = flight.ApplyFLOP(cur, fin)
		}
		if d.Skip != "" {
			return pump.Result{Skip: d.Skip}, nil
		}
		if d.Changed {
			if err := flightstore.Save(ctx, tx, d.Next); err != nil {
				return res, err
			}
			events := make([]outbox.NewEvent, len(d.Events))
			for i, e := range d.Events {
				events[i] = outbox.NewEvent{Target: e.Target, PartitionKey: e.FLID, Type: e.Type, Version: e.Version,
					Payload: e.Payload, MsgID: in.MsgID, Trace: in.Trace}
			}
			if err := outbox.Add(ctx, tx, events, in.Now); err != nil {
				return res, err
			}
		}
		// The projection is written even when nothing changed: a re-run after a crash between
		// the domain commit and the terminal commit must still bring Redis up to date.
		if d.Changed || cur != nil {
			res.Project = append(res.Project, d.Next)
		}
	}
	return res, nil
}
