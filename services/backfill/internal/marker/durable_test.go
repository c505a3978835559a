package marker

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/queue"
)

// R-BACKFILL-10: a terminal state committed without waiting for its WAL flush (③, R-TX-9) is
// durable before its marker is written. Each row is committed asynchronously just before its
// sweep; the server's WAL writer alone would flush it only up to 600 ms later.
// Guards R-INV-10.
func TestMarkerWaitsForTheFlushOfWhatItRead(t *testing.T) {
	s, b := setup(t, Config{})
	var lsn string
	var notDurable []string
	b.fault.during = func(id int64) {
		var flushed bool
		if err := b.pg.Pool.QueryRow(t.Context(), `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, lsn).Scan(&flushed); err != nil {
			t.Error(err)
		}
		if !flushed {
			notDurable = append(notDurable, fmt.Sprintf("%d (committed up to %s)", id, lsn))
		}
	}
	for range 10 {
		id := b.inboxRow(t)
		if err := pgx.BeginFunc(t.Context(), b.pg.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(t.Context(), `SET LOCAL synchronous_commit = off`); err != nil {
				return err
			}
			_, err := tx.Exec(t.Context(), `INSERT INTO proc_state (msg_id, state, enqueued_at, finished_at, backfill_next_at, updated_at)
				VALUES ($1, 'SUCCEEDED', $2, $2, $2, $2)`, id, t0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := b.pg.Pool.QueryRow(t.Context(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		sweep(t, s, b)
		if b.row(t, id).BackfillAt == nil {
			t.Fatalf("row %d not marked", id)
		}
	}
	if len(notDurable) > 0 {
		t.Errorf("markers written while the state they stand on was not flushed: %v", notDurable)
	}
}

// R-BACKFILL-10: a row that changed between the candidate read and its gate is left for the
// next round, whose read waits for the flush of the new version; the other rows are marked.
// Alone it goes through the row-by-row path, with another through the batch.
func TestRowChangedSinceTheReadWaitsForTheNextRound(t *testing.T) {
	for _, rows := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d candidates", rows), func(t *testing.T) {
			s, b := setup(t, Config{})
			var ids []int64
			for range rows {
				id := b.inboxRow(t)
				b.terminal(t, id, queue.Succeeded, t0, t0)
				ids = append(ids, id)
			}
			changed := ids[len(ids)-1]
			s.afterRead = func() { b.pg.Exec(t, `UPDATE proc_state SET updated_at = updated_at WHERE msg_id = $1`, changed) }
			sweep(t, s, b)
			for _, id := range ids[:len(ids)-1] {
				if b.row(t, id).BackfillAt == nil || b.marker(t, id).processed == nil {
					t.Errorf("row %d, unchanged since the read, not marked", id)
				}
			}
			if b.row(t, changed).BackfillAt != nil || b.marker(t, changed).processed != nil {
				t.Errorf("row %d marked in the round whose read it changed after", changed)
			}
			s.afterRead = nil
			sweep(t, s, b)
			if b.row(t, changed).BackfillAt == nil || b.marker(t, changed).processed == nil {
				t.Errorf("row %d not marked by the next round", changed)
			}
		})
	}
}
