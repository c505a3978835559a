// Package db holds what every PostgreSQL store shares: the executor interface that a pool, a
// connection and a transaction all satisfy, and the transaction helper.
package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Executor runs statements on a pool, a single connection or a transaction.
type Executor interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts a transaction (a pool, a connection, or a transaction for a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// rollbackTimeout bounds the rollback after a failed or abandoned transaction.
const rollbackTimeout = 5 * time.Second

// ErrNotFound is returned by stores when the row asked for does not exist.
var ErrNotFound = errors.New("not found")

// WithTx runs fn in a transaction and commits it; the rollback after a failure runs even when
// ctx is already cancelled, so a stopping service never leaves a transaction open.
//
// A ctx that ended before the commit rolls the transaction back and returns ctx's error: pgx
// closes the connection when COMMIT fails, and on a session's lock connection that would
// drop the role's advisory lock for a commit that was never going to be sent.
func WithTx(ctx context.Context, b Beginner, fn func(tx pgx.Tx) error) error {
	tx, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		// Also reached when fn panics, so the connection is left outside a transaction. Bounded:
		// a server that stopped answering must not hold a stopping service.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		if cause := context.Cause(ctx); cause != err {
			return fmt.Errorf("commit not attempted: %w: %w", err, cause)
		}
		return fmt.Errorf("commit not attempted: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// WithTxV is WithTx for a function that returns a value: the value of a committed transaction,
// or the zero value with the error.
func WithTxV[T any](ctx context.Context, b Beginner, fn func(tx pgx.Tx) (T, error)) (T, error) {
	return value(func(run func(pgx.Tx) error) error { return WithTx(ctx, b, run) }, fn)
}

// Doer gives a function exclusive use of one connection (leader.Session: the fenced lock
// connection of a role's term).
type Doer interface {
	Do(ctx context.Context, fn func(conn *pgx.Conn) error) error
}

// Txer runs a function in a transaction on its connection (leader.Session).
type Txer interface {
	Tx(ctx context.Context, fn func(tx pgx.Tx) error) error
}

// DoV is Doer.Do for a function that returns a value, so callers need no variable captured by
// the closure.
func DoV[T any](ctx context.Context, d Doer, fn func(conn *pgx.Conn) (T, error)) (T, error) {
	return value(func(run func(*pgx.Conn) error) error { return d.Do(ctx, run) }, fn)
}

// TxV is Txer.Tx for a function that returns a value: the value of a committed transaction, or
// the zero value with the error.
func TxV[T any](ctx context.Context, t Txer, fn func(tx pgx.Tx) (T, error)) (T, error) {
	return value(func(run func(pgx.Tx) error) error { return t.Tx(ctx, run) }, fn)
}

// value runs fn through a runner that takes a func(A) error and returns fn's value when the
// runner succeeded, the zero value with the error otherwise.
func value[T, A any](runner func(func(A) error) error, fn func(A) (T, error)) (T, error) {
	var v T
	err := runner(func(a A) error {
		var err error
		v, err = fn(a)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}
