package flightstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// 20:00 on 10 March in Shanghai: with a 3-day retention, operation days before 7 March are past.
var histNow = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func historyPolicy(t *testing.T) flightstore.HistoryPolicy {
	zone, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	return flightstore.HistoryPolicy{Retention: 3 * 24 * time.Hour, QuietPeriod: 2 * 24 * time.Hour, Zone: zone}
}

type histFlight struct {
	flid, day, state, actt, cncl, maid string
	updated                            time.Duration // before histNow
}

func insertFlight(t *testing.T, pg *pgtest.DB, f histFlight) {
	t.Helper()
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	state := f.state
	if state == "" {
		state = flight.Active
	}
	updated := histNow.Add(-f.updated)
	var deleted *time.Time
	if state == flight.Deleted {
		deleted = &updated
	}
	pg.Exec(t, `INSERT INTO flight_schd (flid, state, state_version, operation_day, created_at, updated_at, deleted_at, actt, cncl, maid, flno)
		VALUES ($1, $2, 3, $3::date, $4, $4, $5, $6, $7, $8, 'CA101')`,
		f.flid, state, nullable(f.day), updated, deleted, nullable(f.actt), nullable(f.cncl), nullable(f.maid))
	pg.Exec(t, `INSERT INTO flight_gtdt (flid, ordinal, gtno, gate) VALUES ($1, 1, '1', 'A1')`, f.flid)
}

func flids(t *testing.T, pg *pgtest.DB, sql string) string {
	t.Helper()
	rows, err := pg.Pool.Query(t.Context(), sql)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, " ")
}

func archive(t *testing.T, pg *pgtest.DB, p flightstore.HistoryPolicy, flid string) ([]flight.Flight, error) {
	t.Helper()
	var out []flight.Flight
	err := db.WithTx(t.Context(), pg.Pool, func(tx pgx.Tx) error {
		if err := leader.LockPipelineTx(t.Context(), tx); err != nil {
			return err
		}
		var err error
		out, err = flightstore.Archive(t.Context(), tx, p, flid, histNow)
		return err
	})
	return out, err
}

func TestHistorySweepMovesExactlyTheFinishedFlights(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	p := historyPolicy(t)
	hour, day := time.Hour, 24*time.Hour
	for _, f := range []histFlight{
		{flid: "P_DEL", day: "2026-03-05", state: flight.Deleted, updated: hour},
		{flid: "P_ACTT", day: "2026-03-05", actt: "05MAR260910", updated: hour},
		{flid: "P_CNCL", day: "2026-03-06", cncl: "05MAR260800", updated: hour},
		{flid: "P_QUIET", day: "2026-03-05", updated: 3 * day},
		{flid: "P_BUSY", day: "2026-03-05", updated: hour},                           // past, no evidence, not quiet
		{flid: "EDGE", day: "2026-03-07", state: flight.Deleted, updated: 3 * day},   // not past the retention
		{flid: "RECENT", day: "2026-03-09", state: flight.Deleted, updated: 3 * day}, // not past
		{flid: "NODAY_DEL", state: flight.Deleted, updated: 4 * day},                 // no day: deleted long ago
		{flid: "NODAY_ACT", updated: 30 * day},                                       // no day, not deleted: kept
		{flid: "M1", day: "2026-03-05", actt: "05MAR260900", updated: hour},          // master, with its child over
		{flid: "C1", day: "2026-03-05", actt: "05MAR260900", maid: "M1", updated: hour},
		{flid: "M2", day: "2026-03-05", actt: "05MAR260900", updated: hour}, // master, with a child not over
		{flid: "C2", day: "2026-03-05", maid: "M2", updated: hour},
		{flid: "C3", day: "2026-03-05", actt: "05MAR260900", maid: "GONE", updated: hour}, // dangling child
		{flid: "SELF", day: "2026-03-05", actt: "05MAR260900", maid: "SELF", updated: hour},
	} {
		insertFlight(t, pg, f)
	}
	got, err := flightstore.HistoryCandidates(t.Context(), pg.Pool, p, histNow, 100)
	if err != nil {
		t.Fatal(err)
	}
	const want = "NODAY_DEL C3 M1 P_ACTT P_DEL P_QUIET SELF P_CNCL"
	if strings.Join(got, " ") != want {
		t.Fatalf("candidates = %s\nwant         %s", strings.Join(got, " "), want)
	}
	if limited, _ := flightstore.HistoryCandidates(t.Context(), pg.Pool, p, histNow, 2); len(limited) != 2 {
		t.Errorf("limit 2 gave %v", limited)
	}
	for _, flid := range got {
		group, err := archive(t, pg, p, flid)
		if err != nil {
			t.Fatalf("archive %s: %v", flid, err)
		}
		if flid == "M1" && (len(group) != 2 || group[0].FLID != "C1" || group[1].FLID != "M1") {
			t.Errorf("archive M1 moved %v, want C1 then M1", group)
		}
	}
	if left := flids(t, pg, `SELECT flid FROM flight_schd ORDER BY flid`); left != "C2 EDGE M2 NODAY_ACT P_BUSY RECENT" {
		t.Errorf("current flights left = %s", left)
	}
	if hist := flids(t, pg, `SELECT flid FROM flight_history ORDER BY flid`); hist != "C1 C3 M1 NODAY_DEL P_ACTT P_CNCL P_DEL P_QUIET SELF" {
		t.Errorf("history = %s", hist)
	}
	if orphans := flids(t, pg, `SELECT flid FROM flight_gtdt WHERE flid NOT IN (SELECT flid FROM flight_schd) ORDER BY flid`); orphans != "" {
		t.Errorf("detail rows left behind: %s", orphans)
	}
	var snap []byte
	if err := pg.Pool.QueryRow(t.Context(), `SELECT snapshot FROM flight_history WHERE flid = 'P_ACTT'`).Scan(&snap); err != nil {
		t.Fatal(err)
	}
	var back flight.Flight
	if err := json.Unmarshal(snap, &back); err != nil {
		t.Fatal(err)
	}
	if back.Scalars["ACTT"] != "05MAR260910" || back.Version != 3 || len(back.Collections["GTDT"]) != 1 || back.Collections["GTDT"][0].Fields["GATE"] != "A1" {
		t.Errorf("snapshot does not hold the full state: %s", snap)
	}
}

// If the history write fails, nothing of the flight is deleted.
// Guards R-INV-17.
func TestHistoryWriteFailureDeletesNothing(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	p := historyPolicy(t)
	insertFlight(t, pg, histFlight{flid: "M", day: "2026-03-01", actt: "01MAR260900", updated: time.Hour})
	insertFlight(t, pg, histFlight{flid: "C", day: "2026-03-01", actt: "01MAR260900", maid: "M", updated: time.Hour})
	// The master's history row cannot be written: its key is taken.
	pg.Exec(t, `INSERT INTO flight_history (flid, state_version, state, snapshot, archived_at) VALUES ('M', 3, 'ACTIVE', '{}', $1)`, histNow)
	if _, err := archive(t, pg, p, "M"); err == nil {
		t.Fatal("archive succeeded with a failing history write")
	}
	if left := flids(t, pg, `SELECT flid FROM flight_schd ORDER BY flid`); left != "C M" {
		t.Errorf("flights left = %q, want both (the child's move is rolled back too)", left)
	}
	if details := flids(t, pg, `SELECT flid FROM flight_gtdt ORDER BY flid`); details != "C M" {
		t.Errorf("detail rows left = %q, want both", details)
	}
	if hist := flids(t, pg, `SELECT flid || ':' || snapshot::text FROM flight_history ORDER BY flid`); hist != "M:{}" {
		t.Errorf("history = %q, want only the pre-existing row", hist)
	}
}

// A flight that changed after it was picked is not moved: the policy is re-checked on the
// locked row.
func TestArchiveRechecks(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	p := historyPolicy(t)
	insertFlight(t, pg, histFlight{flid: "Q", day: "2026-03-01", updated: 5 * 24 * time.Hour})
	got, err := flightstore.HistoryCandidates(t.Context(), pg.Pool, p, histNow, 10)
	if err != nil || fmt.Sprint(got) != "[Q]" {
		t.Fatalf("candidates = %v, %v", got, err)
	}
	pg.Exec(t, `UPDATE flight_schd SET updated_at = $1, state_version = 4 WHERE flid = 'Q'`, histNow)
	group, err := archive(t, pg, p, "Q")
	if err != nil || len(group) != 0 {
		t.Fatalf("archive of a flight updated meanwhile = %v, %v; want nothing", group, err)
	}
	if left := flids(t, pg, `SELECT flid FROM flight_schd`); left != "Q" {
		t.Errorf("flights left = %q", left)
	}
}

func TestDeleteSnapLog(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	cutoff := histNow.Add(-90 * 24 * time.Hour)
	old, recent := cutoff.Add(-time.Hour), cutoff.Add(time.Hour)
	for i, r := range []struct {
		scopeEnd any
		recv     time.Time
	}{
		{"2025-11-01", old}, // 1: eligible
		{nil, old},          // 2: eligible
		{"2026-04-01", old}, // 3: covers a kept day
		{"2025-11-01", recent},
		{"2025-11-01", old}, // 5: eligible
	} {
		pg.Exec(t, `INSERT INTO schd_snap_log (id, msg_id, styp, outcome, scope_end, recv_at) VALUES ($1, 1, 'DNLD', 'APPLIED', $2::date, $3)`,
			i+1, r.scopeEnd, r.recv)
	}
	for _, want := range []int64{2, 1, 0} {
		n, err := flightstore.DeleteSnapLog(context.Background(), pg.Pool, cutoff, 2)
		if err != nil || n != want {
			t.Fatalf("batch deleted %d, %v; want %d", n, err, want)
		}
	}
	if left := flids(t, pg, `SELECT id::text FROM schd_snap_log ORDER BY id`); left != "3 4" {
		t.Errorf("left = %q, want 3 4", left)
	}
}
