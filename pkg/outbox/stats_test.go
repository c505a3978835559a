package outbox_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestStats(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }

	t.Run("empty has every target", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		got, err := outbox.Stats(t.Context(), db.Pool, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{outbox.TargetMsg, outbox.TargetSchd} {
			s, ok := got[target]
			if !ok {
				t.Errorf("no entry for %s", target)
			}
			if s.Pending != 0 || s.Dead != 0 || s.OldestPendingAt != nil || s.OldestPendingAge != 0 {
				t.Errorf("%s = %+v, want zero", target, s)
			}
		}
	})

	t.Run("counts per target", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		event := func(target, key, state string, created, updated time.Time) {
			t.Helper()
			var sent *time.Time
			if state == "SENT" {
				sent = &updated
			}
			db.Exec(t, `INSERT INTO msg_event (target, partition_key, event_type, state_version, state, created_at,
				updated_at, sent_at) VALUES ($1, $2, 'UPSERT', 1, $3, $4, $5, $6)`, target, key, state, created, updated, sent)
		}
		// KAFKA:msg: the oldest pending was written 10 minutes ago; a failed attempt since then
		// does not make it look younger. The older SENT and DEAD rows do not count as pending.
		event(outbox.TargetMsg, "F1", "SENT", ago(time.Hour), ago(time.Hour))
		event(outbox.TargetMsg, "F1", "DEAD", ago(30*time.Minute), ago(20*time.Minute))
		event(outbox.TargetMsg, "F2", "PENDING", ago(10*time.Minute), ago(time.Second))
		event(outbox.TargetMsg, "F3", "PENDING", ago(time.Minute), ago(time.Minute))
		// KAFKA:schd: the row of F4 was first written two days ago and replaced a minute ago;
		// its age is the replacement's.
		event(outbox.TargetSchd, "F4", "PENDING", ago(48*time.Hour), ago(time.Minute))
		event(outbox.TargetSchd, "F5", "DEAD", ago(48*time.Hour), ago(time.Hour))
		event(outbox.TargetSchd, "F6", "SENT", ago(48*time.Hour), ago(time.Hour))

		got, err := outbox.Stats(t.Context(), db.Pool, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Errorf("targets = %v, want exactly KAFKA:msg and KAFKA:schd", got)
		}
		msg := got[outbox.TargetMsg]
		if msg.Pending != 2 || msg.Dead != 1 || msg.OldestPendingAge != 10*time.Minute ||
			msg.OldestPendingAt == nil || !msg.OldestPendingAt.Equal(ago(10*time.Minute)) {
			t.Errorf("KAFKA:msg = %+v, want 2 pending (oldest 10m), 1 dead", msg)
		}
		schd := got[outbox.TargetSchd]
		if schd.Pending != 1 || schd.Dead != 1 || schd.OldestPendingAge != time.Minute {
			t.Errorf("KAFKA:schd = %+v, want 1 pending (oldest 1m), 1 dead", schd)
		}
	})
}
