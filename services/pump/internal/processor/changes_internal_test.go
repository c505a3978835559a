package processor

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
)

// TestChangesDescribeWhatIsStored: a record's history rows (R-ORDER-8) are one per flight,
// each describing the state flightstore.AddUpdates stores for it: a FLID written twice by its
// last state, in the place of its first; and the target's row when nothing of it was written.
func TestChangesDescribeWhatIsStored(t *testing.T) {
	in := pump.Input{MsgID: 9, Message: &sis.Message{Meta: sis.Meta{TYPE: "FLOP", STYP: "EUDT"}}, Now: time.Unix(0, 0)}
	state := func(flid string, v int64) flight.Flight {
		f := flight.New(flid)
		f.State, f.Version = flight.Active, v
		return f
	}
	got := changes(in, "T", nil, flight.Outcome{
		Writes:   []flight.Flight{state("T", 2), state("M", 5)},
		Recorded: []flight.Flight{state("T", 3)},
	})
	if len(got) != 2 || got[0].FLID != "T" || got[0].Version != 3 || got[0].Cause != flightstore.CauseTarget ||
		got[1].FLID != "M" || got[1].Version != 5 {
		t.Fatalf("changes = %+v; want T at its last state (version 3), then M", got)
	}

	untouched := changes(in, "T", nil, flight.Outcome{Project: []flight.Flight{state("T", 4)}, Superseded: map[string]int64{"ETOT": 12}})
	if len(untouched) != 1 || untouched[0].FLID != "T" || untouched[0].Changes != nil || untouched[0].Superseded["ETOT"] != 12 {
		t.Fatalf("changes of a target left to a newer message = %+v; want its row with what the newer message held", untouched)
	}
}
