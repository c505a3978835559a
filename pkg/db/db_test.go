package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// A context that ends while the transaction's work runs must not reach COMMIT: pgx closes the
// connection when COMMIT fails, which on a role's lock connection drops the role.
func TestWithTxEndedContextKeepsTheConnection(t *testing.T) {
	d := pgtest.New(t)
	d.Exec(t, `CREATE TABLE t (v int)`)
	cause := errors.New("term ended")
	for _, tc := range []struct {
		name string
		end  func(ctx context.Context) (context.Context, func())
		want error
	}{
		{"cancelled", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(ctx)
			return ctx, func() { cancel(cause) }
		}, cause},
		{"deadline", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			return ctx, func() { <-ctx.Done(); cancel() }
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := pgx.Connect(t.Context(), d.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close(context.Background()) }()
			ctx, end := tc.end(t.Context())
			err = db.WithTx(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
					return err
				}
				end()
				return nil
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("WithTx = %v, want %v", err, tc.want)
			}
			if conn.IsClosed() {
				t.Fatal("the connection was closed")
			}
			var n int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM t`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d rows committed, want none", n)
			}
		})
	}
}

func TestWithTxCommits(t *testing.T) {
	d := pgtest.New(t)
	d.Exec(t, `CREATE TABLE t (v int)`)
	if err := db.WithTx(t.Context(), d.Pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(t.Context(), `INSERT INTO t VALUES (1)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.Pool.QueryRow(t.Context(), `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
}

// The value helpers return the function's value only when the transaction committed.
func TestWithTxVReturnsTheValueOfACommit(t *testing.T) {
	d := pgtest.New(t)
	d.Exec(t, `CREATE TABLE t (v int)`)
	n, err := db.WithTxV(t.Context(), d.Pool, func(tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(t.Context(), `INSERT INTO t VALUES (1), (2)`)
		return tag.RowsAffected(), err
	})
	if err != nil || n != 2 {
		t.Fatalf("WithTxV = %d, %v; want 2, nil", n, err)
	}
	boom := errors.New("boom")
	n, err = db.WithTxV(t.Context(), d.Pool, func(tx pgx.Tx) (int64, error) {
		if _, err := tx.Exec(t.Context(), `INSERT INTO t VALUES (3)`); err != nil {
			return 0, err
		}
		return 1, boom
	})
	if !errors.Is(err, boom) || n != 0 {
		t.Fatalf("WithTxV after a failure = %d, %v; want 0, boom", n, err)
	}
	var rows int
	if err := d.Pool.QueryRow(t.Context(), `SELECT count(*) FROM t`).Scan(&rows); err != nil || rows != 2 {
		t.Errorf("%d rows, %v; want the 2 of the commit", rows, err)
	}
}
