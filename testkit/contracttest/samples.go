package contracttest

import (
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
)

// Samples returns events of every type and shape the pump publishes, built by the production
// code (flight.Events, flight.Document): a new flight with scalars, collections (DELY without a
// sequence attribute) and an operation day; a code-share master whose MAFL a child moved (VIA);
// a change that changed nothing a document shows (CHANGED null); and a deletion (a KAFKA:msg
// tombstone note and a KAFKA:schd null value). Each event's FLID is prefix plus a letter.
func Samples(prefix string, now time.Time) []flight.Event {
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	a := flight.New(prefix + "A")
	a.Version, a.UpdatedAt, a.OperationDay = 1, now, &day
	a.Scalars = map[string]string{"FLNO": "CA101", "ALCD": "CA", "ACFT": "320", "SODT": "30NOV260900", "MVIN": "D",
		flight.BoardingStatus: "OPEN"}
	a.Collections = map[string][]flight.Item{
		"GTDT": {{Seq: "1", Fields: map[string]string{"GATE": "A1"}}},
		"ROUT": {{Seq: "1", Fields: map[string]string{"APCD": "PEK"}}, {Seq: "2", Fields: map[string]string{"APCD": "SHA", "SCAT": ""}}},
		"DELY": {{Fields: map[string]string{"CODE": "93", "DURA": "0015"}}},
		"CKDT": {},
	}
	created := flight.Input{MsgID: 11, STYP: "FLOP", Now: now}
	out := flight.Events(flight.Flight{FLID: a.FLID}, a, created, "")

	// A master whose child joined: its own events, VIA the child.
	m := flight.New(prefix + "M")
	m.Version, m.UpdatedAt = 4, now
	m.Scalars = map[string]string{"FLNO": "CA200"}
	moved := m.Clone()
	moved.Version = 5
	moved.MAFL = []flight.Share{{FLID: prefix + "C", FLNO: "ZH200"}}
	out = append(out, flight.Events(m, moved, flight.Input{MsgID: 12, STYP: "FLOP", Now: now}, prefix+"C")...)

	// Nothing a document shows changed (a provenance-only change): CHANGED is null.
	same := moved.Clone()
	same.Version = 6
	out = append(out, flight.Events(moved, same, flight.Input{MsgID: 13, STYP: "ADFT", Now: now}, "")...)

	// A deletion.
	gone := a.Clone()
	gone.Version, gone.State = 2, flight.Deleted
	out = append(out, flight.Events(a, gone, flight.Input{MsgID: 14, STYP: "FDEL", Now: now}, "")...)
	return out
}
