package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/inbox"
	"github.com/msgexchange/msgexchange/pkg/mysqltest"
)

// R-BACKFILL-4 for a batch: each row's outcome as Mark would give it, a marker never
// overwritten.
func TestMarkManyOutcomes(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	in := openInbox(t, my, 5*time.Second)
	empty, marked := my.InsertInbox(t, "<MSG/>", nil), my.InsertInbox(t, "<MSG/>", nil)
	earlier := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	if _, err := my.Admin.Exec(`UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ?, CMINMSGS_STATUS = 'LEGACY' WHERE CMINMSGS_ID = ?`, earlier, marked); err != nil {
		t.Fatal(err)
	}
	missing := marked + 100
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	got, err := in.MarkMany(t.Context(), []int64{empty, marked, missing}, at, "PROCESSED")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]inbox.MarkResult{empty: inbox.Marked, marked: inbox.AlreadyMarked, missing: inbox.Missing}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("row %d: outcome %v, want %v", id, got[id], w)
		}
	}
	for id, w := range map[int64]struct {
		at     time.Time
		status string
	}{empty: {at, "PROCESSED"}, marked: {earlier, "LEGACY"}} {
		var p sql.NullTime
		var st string
		if err := my.Admin.QueryRow(`SELECT CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS FROM cminmsgs WHERE CMINMSGS_ID = ?`, id).Scan(&p, &st); err != nil {
			t.Fatal(err)
		}
		if !p.Valid || !p.Time.Equal(w.at) || st != w.status {
			t.Errorf("row %d: marker %v %q, want %v %q", id, p, st, w.at, w.status)
		}
	}
}

// A batch whose row-lock waits add up past the inbox timeout, each wait shorter than the
// server's own lock-wait bound, must not write its markers after the client gave up: the
// backfill would have released the gates by then (R-GATE-1).
func TestAbandonedMarkManyNeverLandsLater(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	in := openInbox(t, my, 2*time.Second) // innodb_lock_wait_timeout 1 s
	var ids []int64
	done := make(chan error, 4)
	for k := range 4 {
		id := my.InsertInbox(t, "<MSG/>", nil)
		ids = append(ids, id)
		blocker, err := my.Admin.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := blocker.Exec(`SELECT CMINMSGS_ID FROM cminmsgs WHERE CMINMSGS_ID = ? FOR UPDATE`, id); err != nil {
			t.Fatal(err)
		}
		// Released one after the other, 900 ms apart: each wait of the batch stays under 1 s.
		go func() {
			time.Sleep(time.Duration(k+1) * 900 * time.Millisecond)
			done <- blocker.Commit()
		}()
	}
	if _, err := in.MarkMany(t.Context(), ids, time.Now(), "PROCESSED"); err == nil {
		t.Fatal("MarkMany succeeded while its rows were locked past the timeout")
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	if n := markers(t, my); n != 0 {
		t.Errorf("%d markers of the abandoned batch landed after the client gave up", n)
	}
}

// A COMMIT the server holds (a backup's BACKUP STAGE BLOCK_COMMIT) past the timeout must not
// land after the client gave up either. The block is server-wide, so it is kept short.
func TestHeldMarkManyCommitNeverLandsLater(t *testing.T) {
	my := mysqltest.New(t)
	in := openInbox(t, my, time.Second)
	ids := []int64{my.InsertInbox(t, "<MSG/>", nil), my.InsertInbox(t, "<MSG/>", nil)}
	release := holdCommits(t, my)
	released := make(chan error, 1)
	go func() {
		time.Sleep(2 * time.Second)
		released <- release()
	}()
	start := time.Now()
	_, err := in.MarkMany(t.Context(), ids, time.Now(), "PROCESSED")
	if err == nil {
		t.Error("MarkMany succeeded while its commit was held")
	}
	if took := time.Since(start); took > 1900*time.Millisecond {
		t.Errorf("MarkMany returned after %s; want it cut off at its 1 s timeout", took)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := markers(t, my); n != 0 {
		t.Errorf("%d markers landed after the held commit was released", n)
	}
}

// markers counts the inbox rows with a processed marker.
func markers(t *testing.T, my *mysqltest.DB) int {
	t.Helper()
	var n int
	if err := my.Admin.QueryRow(`SELECT count(*) FROM cminmsgs WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A COMMIT that starts waiting half-way through the timeout and is released a quarter of a
// second after the client gave up would still land if only the connection were closed (the
// server looks for a closed client once a second while a commit is held): the cut-off call
// settles it by killing its thread, for a batch and for one row alike.
func TestCommitReleasedJustAfterTheTimeoutNeverLands(t *testing.T) {
	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			my := mysqltest.New(t)
			in := openInbox(t, my, time.Second)
			ids := []int64{my.InsertInbox(t, "<MSG/>", nil), my.InsertInbox(t, "<MSG/>", nil)}
			// A row lock delays the statements, so the COMMIT is held from 0.5 s on.
			locker, err := my.Admin.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := locker.Exec(`SELECT CMINMSGS_ID FROM cminmsgs WHERE CMINMSGS_ID = ? FOR UPDATE`, ids[0]); err != nil {
				t.Fatal(err)
			}
			release := holdCommits(t, my)
			start := time.Now()
			released := make(chan error, 1)
			go func() {
				time.Sleep(500 * time.Millisecond)
				_ = locker.Rollback()
				time.Sleep(time.Until(start.Add(1250 * time.Millisecond)))
				released <- release()
			}()
			if batch {
				_, err = in.MarkMany(t.Context(), ids, time.Now(), "PROCESSED")
			} else {
				_, err = in.Mark(t.Context(), ids[0], time.Now(), "PROCESSED")
			}
			if err == nil {
				t.Error("the call succeeded while its commit was held past the timeout")
			}
			if err := <-released; err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			if n := markers(t, my); n != 0 {
				t.Errorf("%d markers landed after the call gave up", n)
			}
		})
	}
}

// holdCommits holds every commit of the server, as a backup does (BACKUP STAGE BLOCK_COMMIT),
// until release is called (at the latest when the test ends).
func holdCommits(t *testing.T, my *mysqltest.DB) (release func() error) {
	t.Helper()
	backup, err := my.Admin.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = backup.Close() })
	for _, q := range []string{"BACKUP STAGE START", "BACKUP STAGE BLOCK_COMMIT"} {
		if _, err := backup.ExecContext(t.Context(), q); err != nil {
			t.Fatal(q, err)
		}
	}
	return func() error {
		_, err := backup.ExecContext(context.Background(), "BACKUP STAGE END")
		return err
	}
}
