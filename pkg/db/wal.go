package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueueAsyncCommit queues, first into a batch sent outside a transaction, the setting that
// lets the batch's implicit transaction commit without waiting for its WAL flush
// (synchronous_commit off for that transaction only). Only for a commit whose loss in a server
// crash a re-run repairs, and that nothing outside PostgreSQL acts on before WaitFlushed says
// it is durable: a later commit that waits for its flush flushes this one too, since the WAL
// is written in order.
func QueueAsyncCommit(b *pgx.Batch) {
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
}

// CommitAsync lets tx commit without waiting for its WAL flush, like QueueAsyncCommit; the
// setting goes out with tx's COMMIT when tx is Pipelined (Defer), so it costs no round trip.
func CommitAsync(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{}
	QueueAsyncCommit(b)
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

// flushPoll is the longest pause between two looks at the flush position: the server's WAL
// writer flushes an asynchronous commit within 3 × wal_writer_delay (600 ms by default), any
// synchronous commit sooner.
const flushPoll = 20 * time.Millisecond

// WaitFlushed returns once the server has flushed its WAL up to lsn, so every commit before
// it survives a server crash, or when ctx ends. It only reads: the flush is the server's own
// (the next synchronous commit of any session, or the WAL writer).
func WaitFlushed(ctx context.Context, q Executor, lsn LSN) error {
	pause := time.Millisecond
	for {
		var flushed bool
		if err := q.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, string(lsn)).Scan(&flushed); err != nil {
			return fmt.Errorf("wal flush position: %w", err)
		}
		if flushed {
			return nil
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
