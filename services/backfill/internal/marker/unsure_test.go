package marker

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/queue"
)

// A marker write that fails unsure (a row lock wait, a client timeout under a table lock) is
// decided by a probe that runs with no transaction open on the lock connection: before, the
// probe ran inside the gate's transaction, and a failed write plus a probe, each up to
// inbox.timeout, could keep the connection idle in a transaction past its lease. The
// verdict is the one it was: a row lock is the row's failure, charged once with the server's
// error; a table that does not answer the probe either is an outage, charged nothing. A row
// that changed while the inbox was probed is left to the next round, and a sweep stopped
// during the probe is no outage.
func TestUnsureFailureIsProbedOutsideTheGate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rows    int  // due rows; with more than one the batch is tried first
		table   bool // LOCK TABLES cminmsgs WRITE instead of a lock on the last row
		bump    bool // the last row changes while the inbox is probed (a replay that finished again)
		stop    bool // the sweep is stopped while the inbox is probed
		charged bool // the last row is charged one attempt
		blocked bool // the round ends as an inbox outage
	}{
		{name: "row lock, one row", rows: 1, charged: true},
		{name: "row lock, a batch", rows: 2, charged: true},
		{name: "table lock", rows: 1, table: true, blocked: true},
		{name: "row lock, the row changed meanwhile", rows: 1, bump: true},
		{name: "table lock, stopping meanwhile", rows: 1, table: true, stop: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, b := setup(t, Config{})
			// inbox.timeout 2 s: a row lock wait gives up after 1 s (innodb_lock_wait_timeout).
			short, err := aodb.Open(b.my.ServiceDSN, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = short.Close() })
			b.fault.real = short
			var ids []int64
			for range tc.rows {
				id := b.inboxRow(t)
				b.terminal(t, id, queue.Succeeded, t0, t0)
				ids = append(ids, id)
			}
			last := ids[len(ids)-1]
			lockInbox(t, b, tc.table, last)

			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			var mu sync.Mutex
			var states []string
			b.fault.probing = func() {
				var st string
				if err := b.pg.Pool.QueryRow(context.Background(), `SELECT state FROM pg_stat_activity WHERE pid = $1`,
					int32(b.sess.PID())).Scan(&st); err != nil {
					t.Error(err)
				}
				mu.Lock()
				states = append(states, st)
				mu.Unlock()
				if tc.bump {
					bctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					defer cancel()
					if _, err := b.pg.Pool.Exec(bctx, `UPDATE proc_state SET updated_at = updated_at WHERE msg_id = $1`, last); err != nil {
						t.Errorf("changing the row during the probe: %v", err)
					}
				}
				if tc.stop {
					stop()
				}
			}
			b.clk.Set(t0.Add(time.Minute))
			if _, err := s.Sweep(ctx, b.sess); (err != nil) != tc.stop {
				t.Fatalf("sweep: %v", err)
			}

			mu.Lock()
			defer mu.Unlock()
			if want := tc.rows; len(states) != want {
				t.Errorf("%d probes, want %d (one per write that failed unsure)", len(states), want)
			}
			for _, st := range states {
				if st != "idle" {
					t.Errorf("the lock connection was %q during a probe, want idle (no transaction open)", st)
				}
			}
			for _, id := range ids[:len(ids)-1] {
				if m := b.marker(t, id); m.processed == nil {
					t.Errorf("row %d, not locked, was not marked row by row after the batch failed", id)
				}
			}
			r := b.row(t, last)
			if r.BackfillAt != nil || r.BackfillAbandonedAt != nil {
				t.Errorf("locked row: backfill_at %v abandoned %v, want neither", r.BackfillAt, r.BackfillAbandonedAt)
			}
			want := 0
			if tc.charged {
				want = 1
			}
			if r.BackfillAttempts != want {
				t.Errorf("locked row: %d attempts, want %d", r.BackfillAttempts, want)
			}
			if got := testutil.ToFloat64(s.metrics.outcomes.WithLabelValues("transient")); got != float64(want) {
				t.Errorf("transient outcomes %v, want %d", got, want)
			}
			if tc.charged {
				var last string
				if err := b.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(backfill_last_error, '') FROM proc_state WHERE msg_id = $1`,
					r.MsgID).Scan(&last); err != nil || !strings.Contains(last, "Lock wait timeout") {
					t.Errorf("locked row's recorded error %q (%v), want the server's lock wait timeout", last, err)
				}
			}
			if blocked := s.blocked.Current() != nil; blocked != tc.blocked {
				t.Errorf("backfill blocked on the inbox: %v, want %v", blocked, tc.blocked)
			}
		})
	}
}

// lockInbox holds, for the rest of the test, a lock that keeps a marker write of row id from
// finishing: the row's own lock, or with table the whole table's (which a probe waits on too).
func lockInbox(t *testing.T, b *bundle, table bool, id int64) {
	t.Helper()
	conn, err := b.my.Admin.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if table {
			_, _ = conn.ExecContext(context.Background(), "UNLOCK TABLES")
		} else {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		}
		_ = conn.Close()
	})
	if table {
		if _, err := conn.ExecContext(t.Context(), "LOCK TABLES cminmsgs WRITE"); err != nil {
			t.Fatal(err)
		}
		return
	}
	var got int64
	if _, err := conn.ExecContext(t.Context(), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(t.Context(), `SELECT CMINMSGS_ID FROM cminmsgs WHERE CMINMSGS_ID = ? FOR UPDATE`, id).Scan(&got); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
}
