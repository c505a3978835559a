package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestClassify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, refused := pgx.Connect(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if refused == nil {
		t.Fatal("something listens on 127.0.0.1:1")
	}
	pg := pgtest.New(t)
	_, divide := pg.Pool.Exec(ctx, `SELECT 1/0`)
	conn, err := pg.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	_, timeout := conn.Exec(ctx, `SET statement_timeout = 50; SELECT pg_sleep(1)`)
	state := func(code string) error { return fmt.Errorf("business transaction: %w", &pgconn.PgError{Code: code}) }
	for _, c := range []struct {
		name string
		err  error
		want outage.Verdict
		conn bool
	}{
		{"connect refused", refused, outage.Down, true},
		{"statement timeout (real)", timeout, outage.Unsure, false},
		{"division by zero (real)", divide, outage.Attempt, false},
		{"admin shutdown", state("57P01"), outage.Down, true},
		{"password refused", state("28P01"), outage.Down, true},
		{"connection failure", state("08006"), outage.Down, true},
		{"read-only standby", state("25006"), outage.Down, true},
		{"too many connections", state("53300"), outage.Down, true},
		{"lock timeout", state("55P03"), outage.Unsure, false},
		{"deadlock", state("40P01"), outage.Unsure, false},
		{"unique violation", state("23505"), outage.Attempt, false},
		{"value too long", state("22001"), outage.Attempt, false},
		{"closed connection", fmt.Errorf("x: %w", pgconn.ErrConnClosed), outage.Down, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := db.Classify(c.err); got != c.want {
				t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
			}
			if got := db.IsConnectionError(c.err); got != c.conn {
				t.Errorf("IsConnectionError(%v) = %v, want %v", c.err, got, c.conn)
			}
		})
	}
	if !db.IsStatementTimeout(timeout) || !db.IsUniqueViolation(state("23505")) || !db.IsLockTimeout(state("55P03")) {
		t.Error("the SQLSTATE predicates disagree with their codes")
	}
}
