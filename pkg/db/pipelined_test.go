package db_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// A Pipelined transaction runs the same statements as WithTx on a plain connection, in its
// order, in fewer round trips: BEGIN and first with the first batch, the deferred statements
// with the COMMIT, a first single statement carrying BEGIN too. A failed deferred statement stops the COMMIT behind it; first runs even
// when the caller sends nothing; the connection is always left outside a transaction.
func TestPipelinedTransaction(t *testing.T) {
	d := pgtest.New(t)
	d.Exec(t, `CREATE TABLE t (step int, v text)`)
	ctx := context.Background()
	conn, trips := tracedConn(t, d.DSN)
	first := func(v string) *pgx.Batch {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (1, $1)`, v)
		return b
	}
	deferred := func(sql string, args ...any) *pgx.Batch {
		b := &pgx.Batch{}
		b.Queue(sql, args...)
		return b
	}
	for _, tc := range []struct {
		name  string
		v     string // the value first writes
		fn    func(tx pgx.Tx) error
		trips int64
		// rows is what the table holds afterwards, as "step:v" in order
		rows string
		fail bool
	}{
		{"a batch, then the deferred statements", "a", func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t SELECT 2, v || '+' FROM t WHERE step = 1`) // sees first's row
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			if err := db.Defer(ctx, tx, deferred(`INSERT INTO t VALUES (3, 'deferred')`)); err != nil {
				return err
			}
			return db.Defer(ctx, tx, deferred(`INSERT INTO t SELECT 4, count(*)::text FROM t`)) // after the first deferred
		}, 2, "1:a 2:a+ 3:deferred 4:3", false},
		{"a single statement first", "b", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (2, $1)`, "exec")
			return err
		}, 2, "1:b 2:exec", false},
		{"several statements in one string first", "g", func(tx pgx.Tx) error {
			// the simple protocol's, which a batch refuses: BEGIN goes alone before them
			_, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '1s'; INSERT INTO t VALUES (2, current_setting('lock_timeout'))`)
			return err
		}, 3, "1:g 2:1s", false},
		{"a query first", "e", func(tx pgx.Tx) error {
			var v string
			if err := tx.QueryRow(ctx, `SELECT v FROM t WHERE step = 1`).Scan(&v); err != nil { // sees first's row
				return err
			}
			rows, err := tx.Query(ctx, `SELECT v FROM t`)
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			return db.Defer(ctx, tx, deferred(`INSERT INTO t VALUES (2, $1)`, fmt.Sprint(v, n)))
		}, 3, "1:e 2:e1", false},
		{"no row", "f", func(tx pgx.Tx) error {
			var v string
			if err := tx.QueryRow(ctx, `SELECT v FROM t WHERE step = 2`).Scan(&v); !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("scan of no row: %v", err)
			}
			return nil
		}, 2, "1:f", false},
		{"nothing sent", "c", func(pgx.Tx) error { return nil }, 1, "1:c", false},
		{"a deferred statement fails", "d", func(tx pgx.Tx) error {
			if err := tx.SendBatch(ctx, deferred(`INSERT INTO t VALUES (2, 'sent')`)).Close(); err != nil {
				return err
			}
			if err := db.Defer(ctx, tx, deferred(`INSERT INTO t VALUES (3, 'deferred')`)); err != nil {
				return err
			}
			return db.Defer(ctx, tx, deferred(`SELECT msgx_expect(false, 'stop')`))
		}, 3, "", true}, // the rollback after the failed batch is the third
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The second run is counted: pgx prepares a statement it has not seen on the
			// connection in a round trip of its own, once.
			var err error
			for range 2 {
				d.Exec(t, `TRUNCATE t`)
				trips.Reset()
				err = db.WithTx(ctx, db.Pipelined(conn, first(tc.v)), tc.fn)
			}
			if (err != nil) != tc.fail {
				t.Fatalf("err = %v, want failure %v", err, tc.fail)
			}
			if tc.fail && !db.IsExpectFailed(err) {
				t.Errorf("err = %v, want the msgx_expect failure", err)
			}
			wantAfter(t, d, conn, trips, tc.trips, tc.rows)
		})
	}
}

// A context that ends while the COMMIT's batch runs (a deferred statement cancelled by the
// server) rolls the aborted transaction back and keeps the connection, as WithTx does on a
// role's lock connection, which cancels queries instead of cutting the connection.
func TestPipelinedCommitCancelledKeepsTheConnection(t *testing.T) {
	d := pgtest.New(t)
	d.Exec(t, `CREATE TABLE t (v int)`)
	cfg, err := pgx.ParseConfig(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 5 * time.Second}
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = db.WithTx(ctx, db.Pipelined(conn, nil), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, 1); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`SELECT pg_sleep(5)`)
		time.AfterFunc(200*time.Millisecond, cancel)
		return db.Defer(ctx, tx, b)
	})
	if !db.IsStatementTimeout(err) {
		t.Fatalf("err = %v, want the cancelled statement", err)
	}
	if conn.IsClosed() {
		t.Fatal("the connection was closed")
	}
	if s := conn.PgConn().TxStatus(); s != 'I' {
		t.Errorf("connection left in transaction status %c", s)
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 0 {
		t.Errorf("after the cancelled commit: %d rows (%v), want 0", n, err)
	}
}

// PipelinedAfter's before statements run in a transaction of their own, committed ahead of the
// transaction in its first round trip: they stay when the transaction rolls back, their
// transaction-local settings do not reach it, when one fails the transaction's own statements
// never run, and when its callback refuses its result the transaction never commits, whether
// it sent anything or not. The connection is always left outside a transaction.
func TestPipelinedAfter(t *testing.T) {
	d := pgtest.New(t)
	d.Exec(t, `CREATE TABLE t (step int, v text)`)
	ctx := context.Background()
	conn, trips := tracedConn(t, d.DSN)
	errRefused := errors.New("refused")
	var beforeTx, txTx int64
	before := func(ok, refuse bool) *pgx.Batch {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t SELECT 0, set_config('synchronous_commit', 'off', true) WHERE msgx_expect($1, 'before fails')
			RETURNING txid_current()`, ok).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&beforeTx); err != nil {
				return err
			}
			if refuse {
				return errRefused
			}
			return nil
		})
		return b
	}
	first := func() *pgx.Batch {
		b := &pgx.Batch{} // a fresh one each time: pgx keeps a statement's description on its QueuedQuery
		b.Queue(`INSERT INTO t VALUES (1, current_setting('synchronous_commit'))`)
		return b
	}
	write := func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `INSERT INTO t VALUES (2, 'tx') RETURNING txid_current()`).Scan(&txTx)
	}
	errStop := errors.New("stop")
	deferInsert := func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (3, 'deferred')`)
		return db.Defer(ctx, tx, b)
	}
	for _, tc := range []struct {
		name          string
		ok, refuse    bool
		fn            func(tx pgx.Tx) error
		trips         int64
		rows          string
		err           error // the error WithTx returns, nil for none; errExpect for before's failure
		separateTxIDs bool
	}{
		{"committed", true, false, write, 2, "0:off 1:on 2:tx", nil, true},
		{"rolled back after a statement", true, false, func(tx pgx.Tx) error {
			if err := write(tx); err != nil {
				return err
			}
			return errStop
		}, 2, "0:off", errStop, true},
		{"rolled back having sent nothing", true, false, func(pgx.Tx) error { return errStop }, 1, "0:off 1:on", errStop, false}, // first runs, as Pipelined's does
		{"committed having sent nothing", true, false, func(pgx.Tx) error { return nil }, 2, "0:off 1:on", nil, false},
		{"before fails", false, false, write, 2, "", errExpect, false}, // the second is the rollback
		{"before fails, nothing sent", false, false, func(pgx.Tx) error { return errStop }, 2, "", errStop, false},
		{"before's result refused", true, true, write, 2, "0:off", errRefused, false},
		{"before's result refused, nothing sent", true, true, func(pgx.Tx) error { return nil }, 2, "0:off", errRefused, false},
		{"before's result refused, only deferred statements", true, true, deferInsert, 2, "0:off", errRefused, false},
		// the prelude alone first, then the COMMIT's batch
		{"only deferred statements", true, false, deferInsert, 2, "0:off 1:on 3:deferred", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			for range 2 { // the second run is counted, as in TestPipelinedTransaction
				d.Exec(t, `TRUNCATE t`)
				trips.Reset()
				beforeTx, txTx = 0, 0
				err = db.WithTx(ctx, db.PipelinedAfter(conn, before(tc.ok, tc.refuse), first()), tc.fn)
			}
			switch {
			case tc.err == errExpect:
				if !db.IsExpectFailed(err) {
					t.Errorf("err = %v, want before's msgx_expect failure", err)
				}
			case !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil):
				t.Errorf("err = %v, want %v", err, tc.err)
			}
			wantAfter(t, d, conn, trips, tc.trips, tc.rows)
			if tc.separateTxIDs && (beforeTx == 0 || txTx == 0 || beforeTx == txTx) {
				t.Errorf("before ran in transaction %d and the transaction in %d, want two", beforeTx, txTx)
			}
		})
	}
}

// errExpect stands for a msgx_expect failure in TestPipelinedAfter's table.
var errExpect = errors.New("msgx_expect failed")

// tracedConn is a connection to dsn whose round trips are counted, closed when the test ends.
func tracedConn(t *testing.T, dsn string) (*pgx.Conn, *pgtest.RoundTrips) {
	t.Helper()
	trips := pgtest.NewRoundTrips()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tracer = trips
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn, trips
}

// wantAfter checks what a table test's transaction left: its round trips, a connection outside
// any transaction, and table t's rows as "step:v" in order.
func wantAfter(t *testing.T, d *pgtest.DB, conn *pgx.Conn, trips *pgtest.RoundTrips, wantTrips int64, wantRows string) {
	t.Helper()
	if n, _ := trips.Counts(); n != wantTrips {
		t.Errorf("%d round trips, want %d:\n%s", n, wantTrips, strings.Join(trips.Waited(10), "\n"))
	}
	if s := conn.PgConn().TxStatus(); s != 'I' {
		t.Errorf("connection left in transaction status %c", s)
	}
	var rows string
	if err := d.Pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(step || ':' || v, ' ' ORDER BY step), '') FROM t`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != wantRows {
		t.Errorf("table holds %q, want %q", rows, wantRows)
	}
}
