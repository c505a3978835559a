package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/pgtest"
)

// An asynchronous commit is durable once WaitFlushed returns for a position taken after it.
func TestWaitFlushedPassesAnAsynchronousCommit(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	d.Exec(t, `CREATE TABLE t (v int)`)
	ctx := t.Context()
	if _, err := d.Pool.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), 1; INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	lsn, err := db.InsertLSN(ctx, d.Pool)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := db.WaitFlushed(wctx, d.Pool, lsn, time.Hour); err != nil {
		t.Fatal(err)
	}
	var flushed bool
	if err := d.Pool.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, string(lsn)).Scan(&flushed); err != nil || !flushed {
		t.Errorf("flush position past %s: %v, %v; want true", lsn, flushed, err)
	}
}

// The WAL behind an open transaction's records is not flushed by the WAL writer; Flush
// flushes it.
func TestFlushPassesAnOpenTransactionsRecords(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	d.Exec(t, `CREATE TABLE t (v int)`)
	ctx := t.Context()
	open, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = open.Rollback(context.Background()) }()
	if _, err := open.Exec(ctx, `INSERT INTO t SELECT generate_series(1, 100)`); err != nil {
		t.Fatal(err)
	}
	lsn, err := db.InsertLSN(ctx, d.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx, d.Pool); err != nil {
		t.Fatal(err)
	}
	var flushed bool
	if err := d.Pool.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, string(lsn)).Scan(&flushed); err != nil || !flushed {
		t.Errorf("flush position past %s after Flush: %v, %v; want true", lsn, flushed, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lsn, err = db.InsertLSN(ctx, d.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.WaitFlushed(wctx, d.Pool, lsn, 10*time.Millisecond); err != nil {
		t.Errorf("WaitFlushed with an open transaction: %v; want the forced flush", err)
	}
}

// A position the server has not reached keeps WaitFlushed waiting until its context ends.
func TestWaitFlushedWaitsForThePosition(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := db.WaitFlushed(ctx, d.Pool, "FFFFFFFF/FFFFFFFF", time.Hour)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFlushed on an unreached position = %v; want the deadline", err)
	}
}

// QueueAsyncCommit turns synchronous_commit off for the batch's own implicit transaction: the
// statements behind it in the batch run with it off, the connection's next statement with the
// server's setting again. (That the commit then skips its flush wait is PostgreSQL's part.)
func TestQueueAsyncCommitLastsForTheBatch(t *testing.T) {
	d := pgtest.New(t)
	conn, err := d.Pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	setting := func() string {
		var s string
		if err := conn.QueryRow(t.Context(), `SELECT current_setting('synchronous_commit')`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := setting(); s != "on" {
		t.Fatalf("server setting %q, want on", s)
	}
	b := &pgx.Batch{}
	db.QueueAsyncCommit(b)
	var inBatch string
	b.Queue(`SELECT current_setting('synchronous_commit')`).QueryRow(func(row pgx.Row) error { return row.Scan(&inBatch) })
	if err := conn.SendBatch(t.Context(), b).Close(); err != nil {
		t.Fatal(err)
	}
	if inBatch != "off" {
		t.Errorf("in the batch %q, want off", inBatch)
	}
	if s := setting(); s != "on" {
		t.Errorf("after the batch %q, want on again", s)
	}
}

// CommitAsync's setting goes out with a Pipelined transaction's COMMIT and lasts for that
// transaction only.
func TestCommitAsyncLastsForTheTransaction(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	conn, err := d.Pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var atCommit, after string
	err = db.WithTx(t.Context(), db.Pipelined(conn.Conn(), nil), func(tx pgx.Tx) error {
		if err := db.CommitAsync(t.Context(), tx); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`SELECT current_setting('synchronous_commit')`).QueryRow(func(row pgx.Row) error { return row.Scan(&atCommit) })
		return db.Defer(t.Context(), tx, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(t.Context(), `SELECT current_setting('synchronous_commit')`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if atCommit != "off" || after != "on" {
		t.Errorf("synchronous_commit at the commit %q, after it %q; want off, then on again", atCommit, after)
	}
}
