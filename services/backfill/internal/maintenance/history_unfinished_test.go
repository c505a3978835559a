package maintenance

import (
	"testing"
	"time"
)

// A flight whose last change came from a message stopped between ① and ③ (the pump released
// the pipeline lock: Redis failure, crash) stays current until that message is terminal: its
// re-run must find what it changed.
func TestHistorySweepWaitsForTheMessageThatChangedTheFlight(t *testing.T) {
	c, b := setup(t, nil)
	b.flightRow(t, "PAST", "2026-03-01", "ACTIVE", "01MAR260910", now.Add(-time.Hour))
	b.pg.Exec(t, `INSERT INTO proc_state (msg_id, state, attempts, enqueued_at, updated_at, applied_at, error_class, last_error)
		VALUES (42, 'FAILED', 1, $1, $1, $1, 'INFRA', 'redis projection: down')`, now.Add(-time.Hour))
	b.pg.Exec(t, `UPDATE flight_schd SET last_msg_id = 42 WHERE flid = 'PAST'`)
	c.RunOnce(t.Context(), b.sess)
	if got := b.list(t, `SELECT flid FROM flight_schd`); got != "PAST" {
		t.Fatalf("flight moved while the message that changed it is unfinished: current %q", got)
	}
	b.pg.Exec(t, `UPDATE proc_state SET state = 'SUCCEEDED', finished_at = $1, backfill_next_at = $1 WHERE msg_id = 42`, now)
	c.RunOnce(t.Context(), b.sess)
	if got := b.list(t, `SELECT flid FROM flight_history`); got != "PAST" {
		t.Fatalf("flight not moved once its message finished: history %q", got)
	}
}
