package pgtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// The session's transactions are db.Pipelined ones, as a term's are: a statement deferred to
// the COMMIT commits with it, and a failed one rolls back what came before it.
func TestSessionTxIsPipelined(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	s := d.Session(t)
	d.Exec(t, `CREATE TABLE seen (v int)`)
	err := s.Tx(t.Context(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), `INSERT INTO seen VALUES ($1)`, 1); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO seen VALUES ($1)`, 2)
		return db.Defer(t.Context(), tx, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Tx(t.Context(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), `INSERT INTO seen VALUES ($1)`, 3); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO seen VALUES ($1::int / 0)`, 4)
		return db.Defer(t.Context(), tx, b)
	})
	if err == nil {
		t.Fatal("a transaction whose deferred statement fails committed")
	}
	var n, sum int
	if err := d.Pool.QueryRow(t.Context(), `SELECT count(*), coalesce(sum(v), 0) FROM seen`).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 2 || sum != 3 {
		t.Fatalf("%d rows summing %d, want the first transaction's two (1 and 2)", n, sum)
	}
}

// A session whose connection is gone reports leader.ErrLost, as a term does, and a cancelled
// query leaves the connection open (a lock connection keeps its lock).
func TestSessionConnection(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	s := d.Session(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := s.Do(ctx, func(conn *pgx.Conn) error {
		cancel()
		_, err := conn.Exec(ctx, `SELECT pg_sleep(10)`)
		return err
	})
	if err == nil || errors.Is(err, leader.ErrLost) {
		t.Fatalf("cancelled query: %v, want a cancellation with the connection kept", err)
	}
	if err := s.Do(t.Context(), func(conn *pgx.Conn) error { return conn.Ping(t.Context()) }); err != nil {
		t.Fatalf("after a cancelled query: %v", err)
	}

	if err := s.SetBlocked(t.Context(), &outage.State{Dependency: "inbox"}); err != nil {
		t.Fatal(err)
	}
	if b, n := s.Blocked(); b == nil || b.Dependency != "inbox" || n != 1 {
		t.Fatalf("blocked %+v after %d reports, want inbox after 1", b, n)
	}

	d.Exec(t, `SELECT pg_terminate_backend($1)`, s.PID())
	err = s.Do(t.Context(), func(conn *pgx.Conn) error {
		_, err := conn.Exec(t.Context(), `SELECT 1`)
		return err
	})
	if !errors.Is(err, leader.ErrLost) {
		t.Fatalf("terminated connection: %v, want leader.ErrLost", err)
	}
}
