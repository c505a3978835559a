package flightstore_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/testkit/flights"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func item(seq string, kv ...string) flight.Item {
	it := flight.Item{Seq: seq, Fields: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		it.Fields[kv[i]] = kv[i+1]
	}
	return it
}

// rich is a flight that uses every storage shape of R-FLIGHT-3.
func rich(flid string) flight.Flight {
	at := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	f := flight.New(flid)
	f.Version, f.LastMsgID, f.CreatedAt, f.UpdatedAt, f.OperationDay = 4, 42, at, at, &day
	f.Scalars = map[string]string{
		"FFID": "CA-CA101-D-30NOV260900-D", "FLNO": "CA101", "MVIN": "D", "BOTM": "30NOV260825",
		flight.BoardingStatus: flight.Boarding, "FDIV": "WEATHER", "FDIV_DDES": "HKG", "FDIV_DDIR": "TO",
		"FRET_REID": "G", "REMC": "请旅客留意登机口变更",
	}
	f.Collections = map[string][]flight.Item{
		"GTDT": {item("1", "GATE", "A1"), item("1", "GATE", "A1")}, // same resource twice: two allocations
		"CKDT": {},                                                 // no allocation now
		"CHDT": {item("1", "CHUT", "CH21", "CCLS", "X", "CTYP", "D")},
		"DELY": {item("", "CODE", "81", "TEXT", "ATC")},
		"ROUT": {item("1", "APCD", "PEK"), item("2", "APCD", "SHA")},
		"ERUT": {item("1", "APCD", "CAN")}, // same RTNO as ROUT's first point: kept apart
		"ABTM": {item("1", "ABDG", "B12")},
	}
	f.Raw["SRVT"] = []string{"<OPER>X</OPER>", "<OPER>Y</OPER>"}
	return f
}

func TestSaveLoadRoundTrip(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	want := rich("15")
	flights.Write(t, d.Pool, want)
	got, err := flightstore.Load(ctx, d.Pool, "15", false)
	if err != nil || got == nil {
		t.Fatalf("load: %v %v", got, err)
	}
	if !flight.SameContent(*got, want) || got.Version != want.Version || got.LastMsgID != want.LastMsgID {
		t.Fatalf("round trip\n got %+v\nwant %+v", *got, want)
	}
	if !reflect.DeepEqual(got.Collections, want.Collections) {
		t.Errorf("collections\n got %v\nwant %v", got.Collections, want.Collections)
	}
	var ddes, status, ccls string
	if err := d.Pool.QueryRow(ctx, `SELECT fdiv_ddes, boarding_status, (SELECT ccls FROM flight_chdt WHERE flid = '15')
		FROM flight_schd WHERE flid = '15'`).Scan(&ddes, &status, &ccls); err != nil {
		t.Fatal(err)
	}
	if ddes != "HKG" || status != "BOARDING" || ccls != "X" {
		t.Errorf("columns: fdiv_ddes=%q boarding_status=%q chdt.ccls=%q", ddes, status, ccls)
	}

	// A later state replaces the detail rows whole and clears what it no longer has.
	next := want.Clone()
	next.Version++
	delete(next.Scalars, "FDIV")
	delete(next.Scalars, "FDIV_DDES")
	delete(next.Scalars, "FDIV_DDIR")
	next.Collections["GTDT"] = []flight.Item{item("2", "GATE", "B7")}
	next.State = flight.Deleted
	flights.Write(t, d.Pool, next)
	got, err = flightstore.Load(ctx, d.Pool, "15", false)
	if err != nil || !flight.SameContent(*got, next) {
		t.Fatalf("after replace\n got %+v\nwant %+v (%v)", got, next, err)
	}

	if f, err := flightstore.Load(ctx, d.Pool, "nope", false); f != nil || err != nil {
		t.Errorf("unknown flight: %v %v", f, err)
	}
}

func TestChildren(t *testing.T) {
	d := pgtest.New(t)
	child := func(flid, maid string) flight.Flight {
		f := rich(flid)
		f.Scalars["MAID"] = maid
		return f
	}
	flights.Write(t, d.Pool, rich("M"), child("C2", "M"), child("C1", "M"), child("M", "M"), child("X", "OTHER"))
	var got []flight.Flight
	if err := db.WithTx(context.Background(), d.Pool, func(tx pgx.Tx) error {
		var err error
		got, err = flightstore.Children(context.Background(), tx, "M")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].FLID != "C1" || got[1].FLID != "C2" || len(got[0].Collections["GTDT"]) != 2 {
		t.Errorf("children = %+v", got)
	}
}

func TestFLIDsByNumber(t *testing.T) {
	d := pgtest.New(t)
	other := rich("B")
	other.Scalars["FLNO"] = "MU5101"
	nextDay := rich("C")
	day2 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	nextDay.OperationDay = &day2
	flights.Write(t, d.Pool, rich("A2"), rich("A1"), other, nextDay)
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		flno string
		day  time.Time
		want []string
	}{
		{"CA101", day, []string{"A1", "A2"}},
		{"ca101", day, []string{"A1", "A2"}},
		{"CA101", day2, []string{"C"}},
		{"MU5101", day2, nil},
	} {
		got, err := flightstore.FLIDsByNumber(t.Context(), d.Pool, tc.flno, tc.day)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("FLIDsByNumber(%s, %s) = %v, want %v", tc.flno, tc.day.Format(time.DateOnly), got, tc.want)
		}
	}
}

// The provenance is stored with the row and read back as written; a row changed since by a
// writer that does not keep it (a previous release during an upgrade: last_msg_id moved, the
// provenance did not) and a row stored before the column existed are read conservatively,
// every part as written by the row's last message (R-ORDER-1).
func TestProvenanceRoundTripAndConservativeRead(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	f := rich("P1")
	f.Prov = flight.Provenance{Base: 30, Parts: map[string]int64{"ESTT": 40, "FFID": 0}, Life: []flight.Life{{Msg: 30, State: flight.Active}},
		MAID: []flight.Named{{Msg: 30, MAID: ""}}, Last: f.LastMsgID}
	flights.Write(t, d.Pool, f)
	load := func() flight.Flight {
		t.Helper()
		got, err := flightstore.Load(t.Context(), d.Pool, "P1", false)
		if err != nil || got == nil {
			t.Fatalf("load: %v, %v", got, err)
		}
		return *got
	}
	if got := load().Prov; !got.Equal(f.Prov) {
		t.Fatalf("provenance read back %+v, want %+v", got, f.Prov)
	}
	d.Exec(t, `UPDATE flight_schd SET last_msg_id = 77, estt = '30NOV261000' WHERE flid = 'P1'`) // an older writer
	if got := load().Prov; !got.Equal(flight.Conservative(77, flight.Active)) {
		t.Errorf("after a write without provenance: %+v, want everything as of msg 77", got)
	}
	d.Exec(t, `UPDATE flight_schd SET provenance = NULL WHERE flid = 'P1'`) // stored before the column
	if got := load().Prov; !got.Equal(flight.Conservative(77, flight.Active)) {
		t.Errorf("without provenance: %+v, want everything as of msg 77", got)
	}
	many, err := flightstore.LoadMany(t.Context(), d.Pool, nil, []string{"P1"})
	if err != nil || len(many) != 1 || !many[0].Prov.Equal(flight.Conservative(77, flight.Active)) {
		t.Errorf("bulk load: %+v, %v", many, err)
	}
}
