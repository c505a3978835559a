package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
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

// The records of an open transaction are not flushed by the WAL writer; Flush flushes them,
// whatever the session's synchronous_commit says.
func TestFlushPassesAnOpenTransactionsRecords(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	lsn := openTransaction(t, d)
	conn, err := d.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if !flushedPast(t, d, lsn) {
		t.Errorf("flush position behind %s after Flush", lsn)
	}
}

// WaitFlushed forces the flush once its patience is over: the WAL writer alone would leave an
// open transaction's records unflushed.
func TestWaitFlushedForcesTheFlush(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	lsn := openTransaction(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := db.WaitFlushed(ctx, d.Pool, lsn, 10*time.Millisecond); err != nil {
		t.Fatalf("WaitFlushed behind an open transaction: %v; want the forced flush", err)
	}
	if !flushedPast(t, d, lsn) {
		t.Errorf("flush position behind %s after WaitFlushed", lsn)
	}
}

// openTransaction leaves a transaction with WAL records of its own open on a connection of
// its own, and returns the insert position behind them.
func openTransaction(t *testing.T, d *pgtest.DB) db.LSN {
	t.Helper()
	d.Exec(t, `CREATE TABLE t (v int)`)
	open, err := d.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = open.Rollback(context.Background()) })
	if _, err := open.Exec(t.Context(), `INSERT INTO t SELECT generate_series(1, 1000)`); err != nil {
		t.Fatal(err)
	}
	lsn, err := db.InsertLSN(t.Context(), d.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

func flushedPast(t *testing.T, d *pgtest.DB, lsn db.LSN) bool {
	t.Helper()
	var flushed bool
	if err := d.Pool.QueryRow(t.Context(), `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, string(lsn)).Scan(&flushed); err != nil {
		t.Fatal(err)
	}
	return flushed
}

// A position the server has not reached keeps WaitFlushed waiting until its context ends,
// the forced flush included: it forces one flush once its patience is over, and trusts it
// only when the position says so.
func TestWaitFlushedWaitsForThePosition(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	cfg, err := pgx.ParseConfig(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	trips := pgtest.NewRoundTrips()
	cfg.Tracer = trips
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = db.WaitFlushed(ctx, conn, "FFFFFFFF/FFFFFFFF", 50*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFlushed on an unreached position = %v; want the deadline", err)
	}
	flushes := 0
	for _, line := range trips.Top(10) {
		if strings.Contains(line, "pg_logical_emit_message") {
			flushes++
			if !strings.HasPrefix(strings.TrimSpace(line), "1 ") {
				t.Errorf("forced flushes: %s; want one", line)
			}
		}
	}
	if flushes != 1 {
		t.Errorf("forced flush statements %v; want one after the patience", trips.Top(10))
	}
}

// AddCommitAsync turns synchronous_commit off for the batch's own implicit transaction: the
// statements behind it in the batch run with it off, the connection's next statement with the
// server's setting again. (That the commit then skips its flush wait is PostgreSQL's part.)
func TestAddCommitAsyncLastsForTheBatch(t *testing.T) {
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
	db.AddCommitAsync(b)
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
