package inbox_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/inbox"
	"github.com/msgexchange/msgexchange/pkg/mysqltest"
)

// MarkMany gives each row Mark's outcome in one statement when every row was unmarked, and in
// two otherwise; an earlier marker is never overwritten, and the marker's time is whole
// seconds whatever the server does with a fraction.
func TestMarkMany(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	in, err := inbox.Open(my.ServiceDSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	at := time.Date(2026, 3, 1, 12, 0, 0, 700_000_000, time.UTC) // MySQL would round it up
	earlier := time.Date(2026, 2, 1, 8, 0, 0, 0, time.UTC)
	marker := func(id int64) (processed *time.Time, status string) {
		t.Helper()
		if err := my.Admin.QueryRowContext(t.Context(), `SELECT CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS FROM cminmsgs
			WHERE CMINMSGS_ID = ?`, id).Scan(&processed, &status); err != nil {
			t.Fatal(err)
		}
		return processed, status
	}
	rows := func(n int) []int64 {
		var ids []int64
		for range n {
			ids = append(ids, my.InsertInbox(t, "<MSG/>", nil))
		}
		return ids
	}

	t.Run("all unmarked", func(t *testing.T) {
		ids := rows(3)
		got, err := in.MarkMany(t.Context(), ids, at, "PROCESSED")
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if got[id] != inbox.Marked {
				t.Errorf("row %d: %v, want Marked", id, got[id])
			}
			if p, s := marker(id); p == nil || !p.Equal(at.Truncate(time.Second)) || s != "PROCESSED" {
				t.Errorf("row %d marker %v %q, want %s PROCESSED", id, p, s, at.Truncate(time.Second))
			}
		}
	})

	t.Run("marked earlier, gone, and a try that already landed", func(t *testing.T) {
		ids := rows(4)
		fresh, already, landed := ids[0], ids[1], ids[2]
		gone := ids[3] + 1000
		if _, err := my.Admin.ExecContext(t.Context(), `UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ?, CMINMSGS_STATUS = 'LEGACY'
			WHERE CMINMSGS_ID = ?`, earlier, already); err != nil {
			t.Fatal(err)
		}
		// An earlier try of this very write whose answer was lost: written, then tried again.
		if _, err := in.Mark(t.Context(), landed, at, "PROCESSED"); err != nil {
			t.Fatal(err)
		}
		got, err := in.MarkMany(t.Context(), []int64{fresh, already, landed, gone, ids[3]}, at, "PROCESSED")
		if err != nil {
			t.Fatal(err)
		}
		want := map[int64]inbox.MarkResult{fresh: inbox.Marked, already: inbox.AlreadyMarked, landed: inbox.Marked,
			gone: inbox.Missing, ids[3]: inbox.Marked}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("row %d: %v, want %v", id, got[id], w)
			}
		}
		if p, s := marker(already); p == nil || !p.Equal(earlier) || s != "LEGACY" {
			t.Errorf("earlier marker became %v %q, want it kept", p, s)
		}
	})
}
