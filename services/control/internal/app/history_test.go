package app_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// TestFlightHistoryStatesEveryMessage (issue #56, smaller finding): a message that wrote a flight
// shows its state in flight-history although its processing record does not name the flight (a
// schedule message about many flights) and no event of it is kept (retention deleted the sent
// ones): flight-history said UNSPECIFIED where get-message said SUCCEEDED.
func TestFlightHistoryStatesEveryMessage(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pg.Exec(t, `INSERT INTO proc_state (msg_id, state, msg_type, msg_styp, enqueued_at, finished_at, backfill_at, updated_at)
		VALUES (2, 'SUCCEEDED', 'SCHD', 'ADFT', $1, $1, $1, $1)`, at)
	pg.Exec(t, `INSERT INTO proc_state (msg_id, state, msg_type, msg_styp, last_error, enqueued_at, finished_at, backfill_at, updated_at, flid)
		VALUES (3, 'SKIPPED', 'FLOP', 'ESTT', 'superseded', $1, $1, $1, $1, 'F9')`, at)
	pg.Exec(t, `INSERT INTO flight_change (msg_id, flid, msg_type, styp, cause, state, version, changes, superseded, events, written_at)
		VALUES (2, 'F9', 'SCHD', 'ADFT', 'target', 'ACTIVE', 1, '{"ESTT":{"old":"","new":"01MAR261200"}}', '{}', '[]', $1)`, at)
	in := startWith(t, pg, "control-history-states", at, nil, nil)
	waitActive(t, in)
	env := msgxctlEnv(t, in)
	out, errOut, code := msgxctl(t, env, "flight-history", "F9")
	t.Logf("msgxctl flight-history F9:\n%s", out)
	if code != 0 || !regexp.MustCompile(`(?m)^msg 2\s.*\bSUCCEEDED\b`).MatchString(out) || !regexp.MustCompile(`(?m)^msg 3\s.*\bSKIPPED\b`).MatchString(out) ||
		regexp.MustCompile(`UNSPECIFIED`).MatchString(out) {
		t.Errorf("exit %d: %s\n%s; want message 2 SUCCEEDED and 3 SKIPPED", code, errOut, out)
	}
}
