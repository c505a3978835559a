package flightstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// A flight (or a member of its code-share group) whose last change came from a message that is
// not terminal yet stays current: that message's re-run must find what it changed. Candidates
// and the re-check under the pipeline lock agree.
// Guards R-INV-17.
func TestHistoryKeepsFlightsOfUnfinishedMessages(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	p := historyPolicy(t)
	hour := time.Hour
	msg := func(id int64, state string) {
		finished := any(nil)
		if state != "PENDING" && state != "FAILED" {
			finished = histNow
		}
		pg.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at, finished_at, applied_at)
			VALUES ($1, $2, $3, $3, $4, $3)`, id, state, histNow, finished)
	}
	msg(1, "PENDING")
	msg(2, "FAILED")
	msg(3, "SUCCEEDED")
	msg(4, "DEAD")
	msg(5, "FAILED")
	for _, f := range []struct {
		histFlight
		last int64
	}{
		{histFlight{flid: "PEND", day: "2026-03-05", actt: "05MAR260910", updated: hour}, 1},
		{histFlight{flid: "FAIL", day: "2026-03-05", actt: "05MAR260910", updated: hour}, 2},
		{histFlight{flid: "DONE", day: "2026-03-05", actt: "05MAR260910", updated: hour}, 3},
		{histFlight{flid: "DEAD", day: "2026-03-05", actt: "05MAR260910", updated: hour}, 4},
		{histFlight{flid: "NONE", day: "2026-03-05", actt: "05MAR260910", updated: hour}, 0},
		// a master whose child was changed by an unfinished message: the group stays
		{histFlight{flid: "M", day: "2026-03-05", actt: "05MAR260910", updated: hour}, 3},
		{histFlight{flid: "MC", day: "2026-03-05", actt: "05MAR260910", maid: "M", updated: hour}, 5},
	} {
		insertFlight(t, pg, f.histFlight)
		if f.last != 0 {
			pg.Exec(t, `UPDATE flight_schd SET last_msg_id = $2 WHERE flid = $1`, f.flid, f.last)
		}
	}
	got, err := flightstore.HistoryCandidates(t.Context(), pg.Pool, p, histNow, 100)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "DEAD DONE NONE" {
		t.Fatalf("candidates = %v, want DEAD DONE NONE", got)
	}
	// The re-check: a flight picked while its message was terminal, whose message was put back
	// (a replay) before the sweep locked it, stays.
	pg.Exec(t, `UPDATE proc_state SET state = 'PENDING', finished_at = NULL WHERE msg_id = 3`)
	for _, flid := range []string{"DONE", "PEND", "FAIL", "M", "MC"} {
		if group, err := archive(t, pg, p, flid); err != nil || len(group) != 0 {
			t.Errorf("archive %s = %v, %v; want nothing moved", flid, group, err)
		}
	}
	for _, flid := range []string{"DEAD", "NONE"} {
		if group, err := archive(t, pg, p, flid); err != nil || len(group) != 1 {
			t.Errorf("archive %s = %v, %v; want it moved", flid, group, err)
		}
	}
	if left := flids(t, pg, `SELECT flid FROM flight_schd ORDER BY flid`); left != "DONE FAIL M MC PEND" {
		t.Errorf("current flights = %q", left)
	}
}

func TestArchivedOf(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	p := historyPolicy(t)
	if a, err := flightstore.ArchivedOf(t.Context(), pg.Pool, "A"); err != nil || a != (flightstore.Archived{}) {
		t.Fatalf("archive of a FLID never archived = %+v, %v; want none", a, err)
	}
	insertFlight(t, pg, histFlight{flid: "A", day: "2026-03-05", actt: "05MAR260910", updated: time.Hour}) // version 3
	pg.Exec(t, `UPDATE flight_schd SET last_msg_id = 77 WHERE flid = 'A'`)
	if group, err := archive(t, pg, p, "A"); err != nil || len(group) != 1 {
		t.Fatalf("archive = %v, %v", group, err)
	}
	// The sweep's tombstone is version 4: the floor; the flight's last message is kept.
	a, err := flightstore.ArchivedOf(t.Context(), pg.Pool, "A")
	if err != nil || a != (flightstore.Archived{Floor: 4, LastMsg: 77}) {
		t.Fatalf("archive after an archive at version 3 = %+v, %v; want floor 4, last message 77", a, err)
	}
}
