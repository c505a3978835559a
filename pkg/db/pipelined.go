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
	return PipelinedAfter(conn, nil, first)
}

// PipelinedAfter is Pipelined with the statements of before (nil for none) run ahead of the
// transaction, in the same round trip, in a transaction of their own that commits before the
// transaction begins: BEGIN, before, COMMIT, then the transaction's BEGIN and first. They are
// not the transaction's: a rollback of the transaction leaves them committed. When one of them
// fails on the server, nothing behind it runs, the transaction never begins and the failure is
// the transaction's first statement's. When one of their callbacks refuses a result, the
// refusal is the transaction's first statement's failure and the transaction never commits
// (one that sent nothing sends its prelude alone before its COMMIT); but the statements sent
// with them in the same round trip have run by then, so a check that must keep those from
// running is made on the server (msgx_expect), as for Defer. A transaction that ends without
// sending anything still runs them, as it runs first. (Extended-protocol statements of one batch share one implicit
// transaction up to the batch's Sync, which pgx sends only at its end; an explicit BEGIN …
// COMMIT pair is what separates two transactions inside one batch.)
func PipelinedAfter(conn *pgx.Conn, before, first *pgx.Batch) Beginner {
	return pipelined{conn: conn, before: before, first: first}
}

type pipelined struct {
	conn          *pgx.Conn
	before, first *pgx.Batch
}

func (p pipelined) Begin(context.Context) (pgx.Tx, error) {
	t := &pipelinedTx{conn: p.conn}
	if p.before != nil && p.before.Len() > 0 {
		t.before = p.before.QueuedQueries
	}
	if p.first != nil {
		t.first = p.first.QueuedQueries
	}
	return t, nil
}

// prelude adds to b, which is empty, what goes ahead of the transaction's own statements:
// before's transaction, then BEGIN and first.
func (t *pipelinedTx) prelude(b *pgx.Batch) {
	b.BeginTx(pgx.TxOptions{})
	if len(t.before) > 0 {
		b.QueuedQueries = append(b.QueuedQueries, t.before...)
		b.Queue("commit")
		b.Queue("begin")
	}
	b.QueuedQueries = append(b.QueuedQueries, t.first...)
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
	before   []*pgx.QueuedQuery
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
	t.prelude(b)
	own := len(b.QueuedQueries)
	if with != nil {
		b.QueuedQueries = append(b.QueuedQueries, with.QueuedQueries...)
	}
	br := t.conn.SendBatch(ctx, b)
	t.inner, t.before, t.first = br.Tx(), nil, nil
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
	if t.inner == nil && len(t.before) > 0 {
		// before's callbacks are heard before anything of the transaction may commit: in one
		// batch with the COMMIT, a refusal in Go would come after the server had committed.
		if err := t.begin(ctx, nil).Close(); err != nil {
			return errors.Join(err, t.rollbackAborted(ctx))
		}
	}
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
	if err != nil {
		err = errors.Join(err, t.rollbackAborted(ctx))
	}
	return err
}

// rollbackAborted rolls back a begun transaction that a failure left open on the server.
// Rolled back even when ctx ended (that may be the failure): pgx closes a connection whose
// rollback fails, and on a role's lock connection that would drop the role (as WithTx's).
func (t *pipelinedTx) rollbackAborted(ctx context.Context) error {
	if t.inner == nil || t.conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if err := t.inner.Rollback(rctx); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// Rollback rolls the transaction back; one that never began only runs its before and first
// statements, before's in their own transaction and first's outside any, as a caller that
// sent nothing would expect them to have run.
func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.inner == nil {
		b := &pgx.Batch{}
		if len(t.before) > 0 {
			b.Queue("begin")
			b.QueuedQueries = append(b.QueuedQueries, t.before...)
			b.Queue("commit")
		}
		b.QueuedQueries = append(b.QueuedQueries, t.first...)
		if b.Len() == 0 {
			return nil
		}
		err := t.conn.SendBatch(ctx, b).Close()
		if err != nil && t.conn.PgConn().TxStatus() != 'I' {
			// A statement of before failed inside its transaction, which the server keeps
			// open, aborted, until it is rolled back.
			if _, rerr := t.conn.Exec(ctx, "rollback"); rerr != nil {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
			}
		}
		return err
	}
	return t.inner.Rollback(ctx)
}

// errRow is a pgx.Row whose Scan reports err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
