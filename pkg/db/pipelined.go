package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pipelined is a Beginner whose transactions on conn spend no round trip of their own on the
// per-message path: BEGIN, followed by the statements of first, goes out with the
// transaction's first statement or batch (pgx's Batch.BeginTx), and the batches handed to
// Defer go out with its COMMIT. Nothing crosses a boundary of the transaction: first runs inside it before
// anything the caller sends, the deferred statements inside it after everything the caller
// sent, in the order they were deferred, and the COMMIT behind them runs only when all of them
// succeeded. first (nil for none) runs even when the caller sends nothing.
//
// A deferred statement's result can only be checked after the server ran the COMMIT behind it,
// so a statement whose check must stop the commit makes the check itself (msgx_expect); a
// deferred statement must not need its result before the commit otherwise.
func Pipelined(conn *pgx.Conn, first *pgx.Batch) Beginner {
	return pipelined{conn: conn, first: first}
}

type pipelined struct {
	conn  *pgx.Conn
	first *pgx.Batch
}

func (p pipelined) Begin(context.Context) (pgx.Tx, error) {
	t := &pipelinedTx{conn: p.conn}
	if p.first != nil {
		t.first = p.first.QueuedQueries
	}
	return t, nil
}

// Defer sends b's statements with tx's COMMIT when tx is a Pipelined transaction, and now
// otherwise; either way, a failure of one of them fails the transaction. Their callbacks may
// only pass the server's errors on (a check of a result in Go comes after the server ran the
// COMMIT behind it): a check that must stop the commit is made on the server (msgx_expect).
func Defer(ctx context.Context, tx pgx.Tx, b *pgx.Batch) error {
	if t, ok := tx.(*pipelinedTx); ok {
		if t.closed {
			return pgx.ErrTxClosed
		}
		t.deferred = append(t.deferred, b.QueuedQueries...)
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// pipelinedTx is a pgx.Tx whose BEGIN is sent with its first round trip. Until then inner is
// nil; once begun, every call but Commit and Rollback goes to inner, pgx's own transaction.
type pipelinedTx struct {
	conn     *pgx.Conn
	first    []*pgx.QueuedQuery
	deferred []*pgx.QueuedQuery
	inner    pgx.Tx
	closed   bool
}

// begin sends BEGIN, the first statements and then with's (nil for none) in one batch, reads
// the results of BEGIN and of the first statements, and returns the batch for the caller to
// read with's from.
func (t *pipelinedTx) begin(ctx context.Context, with *pgx.Batch) pgx.BatchResults {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.QueuedQueries = append(b.QueuedQueries, t.first...)
	own := len(b.QueuedQueries)
	if with != nil {
		b.QueuedQueries = append(b.QueuedQueries, with.QueuedQueries...)
	}
	br := t.conn.SendBatch(ctx, b)
	t.inner, t.first = br.Tx(), nil
	for _, qq := range b.QueuedQueries[:own] {
		var err error
		if qq.Fn != nil {
			err = qq.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			_ = br.Close()
			if with == nil {
				with = &pgx.Batch{}
			}
			return pgx.FailedBatchResults(with, err)
		}
	}
	return br
}

// started begins the transaction, if it has not begun, in a round trip of its own, for the
// calls that cannot carry BEGIN (COPY, a prepare, a savepoint, a simple-protocol Exec).
func (t *pipelinedTx) started(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if t.inner != nil {
		return nil
	}
	return t.begin(ctx, nil).Close()
}

func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	switch {
	case t.closed:
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	case t.inner == nil:
		return t.begin(ctx, b)
	}
	return t.inner.SendBatch(ctx, b)
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if len(args) == 0 {
		// pgx sends an Exec without arguments in the simple protocol, which takes several
		// statements in one string (SET LOCAL a; SET LOCAL b); a batch would refuse them.
		if err := t.started(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
		return t.inner.Exec(ctx, sql)
	}
	if br, ok := t.beginWith(ctx, sql, args); ok {
		tag, err := br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return tag, err
	}
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return t.inner.Exec(ctx, sql, args...)
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if br, ok := t.beginWith(ctx, sql, args); ok {
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return rows, err
		}
		return batchRows{Rows: rows, br: br}, nil
	}
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.inner.Query(ctx, sql, args...)
}

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if br, ok := t.beginWith(ctx, sql, args); ok {
		return batchRow{br: br}
	}
	if t.closed {
		return errRow{pgx.ErrTxClosed}
	}
	return t.inner.QueryRow(ctx, sql, args...)
}

// beginWith begins the transaction with the statement sql when it has not begun, and returns
// the batch to read the statement's result from; ok is false when it had begun (or ended).
func (t *pipelinedTx) beginWith(ctx context.Context, sql string, args []any) (pgx.BatchResults, bool) {
	if t.closed || t.inner != nil {
		return nil, false
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return t.begin(ctx, b), true
}

// batchRow is the row of a statement that began the transaction: reading it closes the batch.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are the rows of a statement that began the transaction: closing them closes the
// batch.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	_ = r.br.Close()
}

// Next closes the batch after the last row, as pgx closes rows then.
func (r batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	_ = r.br.Close()
	return false
}

func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.started(ctx); err != nil {
		return 0, err
	}
	return t.inner.CopyFrom(ctx, table, columns, src)
}

func (t *pipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.started(ctx); err != nil {
		return nil, err
	}
	return t.inner.Prepare(ctx, name, sql)
}

// Begin starts a savepoint, as pgx's transactions do. Statements deferred to the COMMIT are
// not the savepoint's: they still go out with the outer COMMIT.
func (t *pipelinedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.started(ctx); err != nil {
		return nil, err
	}
	return t.inner.Begin(ctx)
}

// LargeObjects is pgx's; it needs the transaction begun, which it cannot report, so it begins
// it in a round trip of its own and leaves a failure to its first call.
func (t *pipelinedTx) LargeObjects() pgx.LargeObjects {
	_ = t.started(context.Background())
	if t.inner == nil {
		return pgx.LargeObjects{}
	}
	return t.inner.LargeObjects()
}

func (t *pipelinedTx) Conn() *pgx.Conn { return t.conn }

// Commit sends the deferred statements and COMMIT in one batch (with BEGIN and the first
// statements ahead of them when nothing was sent yet). When one of them fails, the server
// skips the rest of the batch, COMMIT included, and the transaction is rolled back.
func (t *pipelinedTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	b := &pgx.Batch{QueuedQueries: t.deferred}
	var committed bool
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		committed = true
		return nil
	})
	var err error
	if t.inner == nil {
		err = t.begin(ctx, b).Close()
	} else {
		err = t.inner.SendBatch(ctx, b).Close()
	}
	if committed {
		// The server answered the COMMIT: the transaction is committed, whatever came after
		// it in the batch's end (a backend terminated just then sends its FATAL there).
		return nil
	}
	if err != nil && t.inner != nil && t.conn.PgConn().TxStatus() != 'I' {
		// A deferred statement failed: the transaction is aborted, not ended. Rolled back even
		// when ctx ended (that may be the failure): pgx closes a connection whose rollback
		// fails, and on a role's lock connection that would drop the role (as WithTx's).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if rerr := t.inner.Rollback(rctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
	}
	return err
}

// Rollback rolls the transaction back; one that never began only runs its first statements,
// outside any transaction, as a caller that sent nothing would expect them to have run.
func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.inner == nil {
		if len(t.first) == 0 {
			return nil
		}
		return t.conn.SendBatch(ctx, &pgx.Batch{QueuedQueries: t.first}).Close()
	}
	return t.inner.Rollback(ctx)
}

// errRow is a pgx.Row whose Scan reports err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
