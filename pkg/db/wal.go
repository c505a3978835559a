package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AddCommitAsync adds, first to a batch sent outside a transaction, the setting that
// lets the batch's implicit transaction commit without waiting for its WAL flush
// (synchronous_commit off for that transaction only). Only for a commit whose loss in a server
// crash a re-run repairs, and that nothing outside PostgreSQL acts on before WaitFlushed says
// it is durable: a later commit that waits for its flush flushes this one too, since the WAL
// is written in order.
func AddCommitAsync(b *pgx.Batch) {
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
}

// CommitAsync lets tx commit without waiting for its WAL flush, like AddCommitAsync; the
// setting goes out with tx's COMMIT when tx is Pipelined (Defer), so it costs no round trip.
func CommitAsync(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{}
	AddCommitAsync(b)
	return Defer(ctx, tx, b)
}

// LSN is a position in PostgreSQL's write-ahead log, as the server prints it (pg_lsn).
type LSN string

// InsertLSN returns where the server's next WAL record goes. Every commit that a statement q
// ran before could see lies before it: a transaction's commit record is written before others
// can see the commit.
func InsertLSN(ctx context.Context, q Executor) (LSN, error) {
	var lsn LSN
	if err := q.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return "", fmt.Errorf("wal insert position: %w", err)
	}
	return lsn, nil
}

// flushPoll is the longest pause between two looks at the flush position.
const flushPoll = 20 * time.Millisecond

// WaitFlushed returns once the server has flushed its WAL up to lsn, so every commit before
// it survives a server crash. It first waits patience for the server's own flushes (any
// session's next synchronous commit; in a backlog the pump's next one), then forces one
// (Flush). It never waits for the WAL writer alone: that flushes asynchronous commits, but a
// tail of other records (an open transaction's) can stay unflushed until someone commits.
func WaitFlushed(ctx context.Context, q Executor, lsn LSN, patience time.Duration) error {
	pause, forced := time.Millisecond, false
	for waited := time.Duration(0); ; waited += pause {
		var flushed bool
		if err := q.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, string(lsn)).Scan(&flushed); err != nil {
			return fmt.Errorf("wal flush position: %w", err)
		}
		if flushed {
			return nil
		}
		if !forced && waited >= patience {
			if err := Flush(ctx, q); err != nil {
				return err
			}
			forced = true
			continue // a flush is trusted once the position says so
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for the wal flush to %s: %w", lsn, context.Cause(ctx))
		case <-t.C:
		}
		pause = min(2*pause, flushPoll)
	}
}

// Flush makes the server flush its WAL up to now: one statement whose transaction writes a
// single WAL record (a transactional logical-decoding message, prefix msgx, which changes no
// table; a change-data-capture reader of this database would see it and should skip it) and
// commits with its local flush whatever the session's or role's setting: local, because only
// this server's flush is asked (WaitFlushed reads its position), and a synchronous standby
// that is gone would hold an `on` commit past any timeout. A transaction that writes no
// record of its own would commit without flushing.
func Flush(ctx context.Context, q Executor) error {
	if _, err := q.Exec(ctx, `SELECT set_config('synchronous_commit', 'local', true),
		pg_logical_emit_message(true, 'msgx', 'flush')`); err != nil {
		return fmt.Errorf("flush the wal: %w", err)
	}
	return nil
}
