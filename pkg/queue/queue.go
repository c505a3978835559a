// Package queue holds the SQL of the proc_state family: the FIFO of inbox messages with their
// processing state, business identity, failures and backfill intent (the R-PUMP rules).
// The table is the queue: the head is the smallest unfinished msg_id at or below the
// watermark W.
package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// State is a message's processing state.
type State string

// The processing states; SUCCEEDED, SKIPPED and DEAD are terminal.
const (
	Pending   State = "PENDING"
	Failed    State = "FAILED"
	Succeeded State = "SUCCEEDED"
	Skipped   State = "SKIPPED"
	Dead      State = "DEAD"
)

// Terminal reports whether the state ends processing and lets the queue advance.
func (s State) Terminal() bool { return s == Succeeded || s == Skipped || s == Dead }

// ErrorClass classifies why a message failed (R-IDENT-4).
type ErrorClass string

// The error classes.
const (
	Malformed   ErrorClass = "MALFORMED"
	Protocol    ErrorClass = "PROTOCOL"
	CodecError  ErrorClass = "CODEC_ERROR"
	Unsupported ErrorClass = "UNSUPPORTED"
	Infra       ErrorClass = "INFRA"
	Exhausted   ErrorClass = "EXHAUSTED"
)

// ErrorClasses lists every error class.
var ErrorClasses = []ErrorClass{Malformed, Protocol, CodecError, Unsupported, Infra, Exhausted}

// Channel is the NOTIFY channel that wakes the pump when messages become ready (enqueue,
// replay).
const Channel = "msgx_queue"

// NewMessage is one discovered inbox row to enqueue.
type NewMessage struct {
	MsgID      int64
	ReceivedAt *time.Time // CMINMSGS_DATE_RECEIVED, may be NULL
	Trace      telemetry.TraceContext
}

// Enqueue inserts the rows that are not in proc_state yet (insertIfAbsent) as PENDING and
// returns how many were new. A conflict means the row was enqueued before: not an error. New
// rows notify the pump, which hears it when the caller's transaction commits.
func Enqueue(ctx context.Context, q db.Executor, rows []NewMessage, now time.Time) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	ids := make([]int64, len(rows))
	received := make([]*time.Time, len(rows))
	parents := make([]*string, len(rows))
	states := make([]*string, len(rows))
	for i, r := range rows {
		ids[i], received[i] = r.MsgID, r.ReceivedAt
		parents[i], states[i] = r.Trace.Columns()
	}
	tag, err := q.Exec(ctx, `
		INSERT INTO proc_state (msg_id, state, received_at, enqueued_at, trace_parent, trace_state, updated_at)
		SELECT id, 'PENDING', rcv, $5, tp, ts, $5
		FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[]) AS r(id, rcv, tp, ts)
		ON CONFLICT (msg_id) DO NOTHING`, ids, received, parents, states, now)
	if err != nil {
		return 0, fmt.Errorf("enqueue %d messages: %w", len(rows), err)
	}
	if tag.RowsAffected() > 0 {
		if _, err := q.Exec(ctx, `SELECT pg_notify($1, '')`, Channel); err != nil {
			return 0, fmt.Errorf("notify pump: %w", err)
		}
	}
	return tag.RowsAffected(), nil
}

// Message is one proc_state row as the pump and the control service see it.
type Message struct {
	MsgID               int64
	State               State
	ErrorClass          *ErrorClass
	LastError           *string
	Attempts            int
	NextAttemptAt       *time.Time
	IdentityKey         *string
	MsgType             *string
	MsgStyp             *string
	ReceivedAt          *time.Time
	EnqueuedAt          time.Time
	ProcessingStartedAt *time.Time
	FinishedAt          *time.Time
	BackfillNextAt      *time.Time
	BackfillAt          *time.Time
	BackfillAttempts    int
	BackfillAbandonedAt *time.Time
	BackfillReason      *string
	Trace               telemetry.TraceContext
	UpdatedAt           time.Time
	// AppliedAt is when the message's step ① (its flight changes and events) committed; a
	// message run again after that only re-projects and finishes (MarkApplied).
	AppliedAt *time.Time
	// FLID is the flight the message is about, bound with its identity (a FLOP's FLID); nil
	// for a message about no single flight (a schedule, reference data) or not decoded yet.
	FLID *string
	// Ack is an operator's acknowledgement of a DEAD row (AcknowledgeDead); nil when none.
	Ack *Ack
}

const columns = `msg_id, state, error_class, last_error, attempts, next_attempt_at, identity_key, msg_type, msg_styp,
	received_at, enqueued_at, processing_started_at, finished_at, backfill_next_at, backfill_at, backfill_attempts,
	backfill_abandoned_at, backfill_abandon_reason, trace_parent, trace_state, updated_at, applied_at, flid,
	acknowledged_at, acknowledged_by, acknowledged_reason`

func scan(row pgx.Row) (Message, error) {
	var m Message
	var ackAt *time.Time
	var ackBy, ackReason *string
	traceParent, traceState := m.Trace.ScanColumns()
	err := row.Scan(&m.MsgID, &m.State, &m.ErrorClass, &m.LastError, &m.Attempts, &m.NextAttemptAt, &m.IdentityKey,
		&m.MsgType, &m.MsgStyp, &m.ReceivedAt, &m.EnqueuedAt, &m.ProcessingStartedAt, &m.FinishedAt, &m.BackfillNextAt,
		&m.BackfillAt, &m.BackfillAttempts, &m.BackfillAbandonedAt, &m.BackfillReason, traceParent, traceState,
		&m.UpdatedAt, &m.AppliedAt, &m.FLID, &ackAt, &ackBy, &ackReason)
	if ackAt != nil {
		m.Ack = &Ack{At: *ackAt, By: deref(ackBy), Reason: deref(ackReason)}
	}
	return m, err
}

// Head returns the queue head: the smallest unfinished message at or below the watermark
// (R-PUMP-1: only discovered rows are claimed). ok is false when there is none.
func Head(ctx context.Context, q db.Executor) (m Message, ok bool, err error) {
	return head(q.QueryRow(ctx, headSQL))
}

// AddHead adds Head to b, for a caller that reads the next head in the round trip that
// ends the current one (the pump, with the release of the pipeline lock): got receives it
// once b is read.
func AddHead(b *pgx.Batch, got func(m Message, ok bool)) {
	b.Queue(headSQL).QueryRow(func(row pgx.Row) error {
		m, ok, err := head(row)
		if err == nil {
			got(m, ok)
		}
		return err
	})
}

const headSQL = `SELECT ` + columns + ` FROM proc_state
		WHERE state IN ('PENDING', 'FAILED') AND msg_id <= (SELECT w FROM inbox_cursor WHERE id = 1)
		ORDER BY msg_id LIMIT 1`

func head(row pgx.Row) (Message, bool, error) {
	m, err := scan(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("queue head: %w", err)
	}
	return m, true, nil
}

// Get returns one message.
func Get(ctx context.Context, q db.Executor, msgID int64) (Message, error) {
	m, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM proc_state WHERE msg_id = $1`, msgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return m, fmt.Errorf("message %d: %w", msgID, db.ErrNotFound)
	}
	if err != nil {
		return m, fmt.Errorf("get message %d: %w", msgID, err)
	}
	return m, nil
}

// Binding is what Bind records for one attempt.
type Binding struct {
	MsgID           int64
	Key, Type, Styp string // the business identity (sis.Identity) and the decoded TYPE, STYP
	FLID            string // the flight the message is about; "" for none
	Raw             string // the text the attempt decoded
	Started, Now    time.Time
}

// Bind is the first write of a processing attempt once the message is decoded, in one
// statement outside any business transaction (R-TX-2): it records the first
// attempt's start (kept by later attempts), the decoded TYPE and STYP, and binds the business
// identity if the message has none yet (WHERE identity_key IS NULL semantics: a retry keeps
// its binding, so a message is never a duplicate of itself). It returns the msg_id that holds
// the identity: msgID itself when the binding is (or already was) this message's, another ID
// when the message is a duplicate. One statement instead of three saves two commits per
// message on the FIFO's critical path.
//
// The statement commits without waiting for the WAL flush (synchronous_commit off for its own
// transaction only): nothing outside the pump acts on a binding before the message's next
// commit (①, the failure or the terminal state, all synchronous), and that commit flushes the
// WAL up to and including this one. A PostgreSQL crash in between loses the binding together
// with everything after it, and the re-run binds again. This keeps one durable commit fewer
// on every message; the statement stays the independent, single-statement binding of
// R-TX-2.
//
// The same statement keeps the raw text the attempt decoded (KeepRaw's rule: the first one
// stays), so a replay still has it after the inbox row is purged, at no extra round trip.
func Bind(ctx context.Context, q db.Executor, b Binding) (holder int64, err error) {
	err = q.QueryRow(ctx, bindSQL, b.args()...).Scan(&holder)
	return bindResult(b.MsgID, holder, err)
}

// AddBind adds Bind's statement to batch; done receives what Bind would have returned,
// and its error is the statement's in the batch.
func AddBind(batch *pgx.Batch, b Binding, done func(holder int64, err error) error) {
	batch.Queue(bindSQL, b.args()...).QueryRow(func(row pgx.Row) error {
		var holder int64
		err := row.Scan(&holder)
		return done(bindResult(b.MsgID, holder, err))
	})
}

// AddIdentityCheck adds to batch the server's check that msgID is still unfinished and
// holds its identity, for a transaction behind a binding whose verdict is read in Go only after
// the server ran what came with it (db.PipelinedAfter): deferred to the transaction's COMMIT
// (db.Defer), it keeps a binding that found the identity held elsewhere from committing
// anything of the transaction, whatever its caller did with the refusal (R-TX-10). It runs
// last, so a caller that stopped at the refusal never sends it: no error reaches the server.
func AddIdentityCheck(batch *pgx.Batch, msgID int64) {
	batch.Queue(`SELECT msgx_expect(EXISTS (SELECT 1 FROM proc_state WHERE msg_id = $1 AND identity_key IS NOT NULL
		AND state IN ('PENDING', 'FAILED')), 'message ' || $1 || ' is not unfinished or does not hold its identity')`, msgID)
}

const bindSQL = `WITH other AS (SELECT msg_id FROM proc_state WHERE identity_key = $2 AND msg_id <> $1),
		raw AS (INSERT INTO proc_raw (msg_id, raw_zstd, raw_bytes, stored_at) VALUES ($1, $7, $8, $6)
			ON CONFLICT (msg_id) DO NOTHING)
		UPDATE proc_state SET msg_type = $3, msg_styp = $4,
			processing_started_at = coalesce(processing_started_at, $5),
			identity_key = CASE WHEN identity_key IS NULL AND NOT EXISTS (SELECT 1 FROM other) THEN $2 ELSE identity_key END,
			flid = nullif($9, ''), updated_at = $6
		WHERE msg_id = $1 AND state IN ('PENDING', 'FAILED')
		  AND set_config('synchronous_commit', 'off', true) IS NOT NULL
		RETURNING CASE WHEN identity_key IS NULL THEN (SELECT min(msg_id) FROM other) ELSE msg_id END`

func (b Binding) args() []any {
	return []any{b.MsgID, b.Key, b.Type, b.Styp, b.Started, b.Now, compress(b.Raw), len(b.Raw), b.FLID}
}

func bindResult(msgID, holder int64, err error) (int64, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("bind identity of %d: %w", msgID, ErrNotUnfinished)
	}
	if db.IsUniqueViolation(err) {
		// Another session bound the key between the statement's snapshot and its write; the
		// single pump makes this unreachable in practice, and the retry finds the holder.
		return 0, fmt.Errorf("bind identity of %d: identity bound concurrently: %w", msgID, err)
	}
	if err != nil {
		return 0, fmt.Errorf("bind identity of %d: %w", msgID, err)
	}
	return holder, nil
}

// Outcome is one processing attempt's result, as Fail and Finish record it. Named fields keep
// the attempt's three times from trading places.
type Outcome struct {
	MsgID int64
	// State is the terminal state Finish moves the message to; Fail records FAILED.
	State  State
	Class  ErrorClass
	Reason string
	// Next is when Fail lets the next attempt start; Finish schedules none.
	Next time.Time
	// Started is when the attempt's processing began, recorded only if no earlier attempt
	// recorded one; Now is when the outcome is recorded.
	Started, Now time.Time
}

// Fail counts a failed attempt and schedules the retry at o.Next; the message stays the head.
// The same statement appends the attempt to the message's history (proc_attempt, the last
// AttemptHistory kept), so the history and the count never disagree.
func Fail(ctx context.Context, q db.Executor, o Outcome) error {
	msgID, class, reason, next, started, now := o.MsgID, o.Class, o.Reason, o.Next, o.Started, o.Now
	var n int
	err := q.QueryRow(ctx, `WITH upd AS (UPDATE proc_state SET state = 'FAILED', error_class = $2, last_error = $3,
			attempts = attempts + 1, next_attempt_at = $4, processing_started_at = coalesce(processing_started_at, $5),
			updated_at = $6
			WHERE msg_id = $1 AND state IN ('PENDING', 'FAILED') RETURNING msg_id)`+historyCTEs+`
		SELECT count(*) FROM upd`, msgID, class, reason, next, started, now, "FAILED", AttemptHistory).Scan(&n)
	if err != nil {
		return fmt.Errorf("fail %d: %w", msgID, err)
	}
	if n != 1 {
		return fmt.Errorf("fail %d: %w", msgID, ErrNotUnfinished)
	}
	return nil
}

// AttemptHistory is how many attempts proc_attempt keeps per message: enough for every attempt
// of pipeline.max-attempts and a replay or two, small enough to stay a few rows.
const AttemptHistory = 10

// historyCTEs append the attempt the statement records to proc_attempt when upd (the
// statement's UPDATE … RETURNING msg_id) changed the row, and prune the message's history to
// the last $8 attempts; $1 msg_id, $2 class, $3 error, $5 the attempt's start, $6 its end, $7
// its outcome. Finish inserts from hist instead of upd, which leaves out a first attempt that
// ends the message: the proc_state row describes it on its own. The new row is not visible to
// the DELETE (one snapshot), so the prune removes only older ones.
const historyCTEs = `,
		prev AS (SELECT coalesce(max(attempt_no), 0) AS n FROM proc_attempt WHERE msg_id = $1),
		ins AS (INSERT INTO proc_attempt (msg_id, attempt_no, started_at, ended_at, outcome, error_class, error)
			SELECT upd.msg_id, prev.n + 1, $5, $6, $7, nullif($2, ''), nullif($3, '') FROM upd, prev),
		pruned AS (DELETE FROM proc_attempt WHERE msg_id = $1 AND EXISTS (SELECT 1 FROM upd)
			AND attempt_no <= (SELECT n FROM prev) + 1 - $8)`

// Finish moves an unfinished message to a terminal state with its backfill intent in the same
// statement (R-TX-4: a terminal state and its backfill intent are written together).
// o.Class and o.Reason may be empty (SUCCEEDED); an empty reason keeps the last error for
// audit. The attempt joins the message's history when it has one (earlier attempts failed, or a
// replay ran it again); a message that ends on its first attempt writes none.
func Finish(ctx context.Context, q db.Executor, o Outcome) error {
	sql, args, err := finishStatement(o)
	if err != nil {
		return err
	}
	return finished(o, q.QueryRow(ctx, sql, args...))
}

// AddFinish adds Finish to b, for a caller that sends it with other statements (the pump
// sends it with the release of the pipeline lock); its error is the batch's.
func AddFinish(b *pgx.Batch, o Outcome) error {
	sql, args, err := finishStatement(o)
	if err != nil {
		return err
	}
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return finished(o, row) })
	return nil
}

func finishStatement(o Outcome) (string, []any, error) {
	msgID, state, class, reason, started, now := o.MsgID, o.State, o.Class, o.Reason, o.Started, o.Now
	if !state.Terminal() {
		return "", nil, fmt.Errorf("finish %d: %s is not terminal", msgID, state)
	}
	return `WITH upd AS (UPDATE proc_state SET state = $7, error_class = nullif($2, ''),
			last_error = coalesce(nullif($3, ''), last_error), next_attempt_at = $4,
			processing_started_at = coalesce(processing_started_at, $5),
			finished_at = $6, backfill_next_at = $6, updated_at = $6
			WHERE msg_id = $1 AND state IN ('PENDING', 'FAILED') RETURNING msg_id, attempts),
		hist AS (SELECT upd.msg_id FROM upd WHERE upd.attempts > 0
			OR EXISTS (SELECT 1 FROM proc_attempt WHERE msg_id = $1))` +
			strings.Replace(historyCTEs, "FROM upd, prev", "FROM hist AS upd, prev", 1) + `
		SELECT count(*) FROM upd`,
		[]any{msgID, string(class), reason, nil /* no retry */, started, now, string(state), AttemptHistory}, nil
}

// finished reads the result of Finish's statement.
func finished(o Outcome, row pgx.Row) error {
	var n int
	if err := row.Scan(&n); err != nil {
		return fmt.Errorf("finish %d as %s: %w", o.MsgID, o.State, err)
	}
	if n != 1 {
		return fmt.Errorf("finish %d as %s: %w", o.MsgID, o.State, ErrNotUnfinished)
	}
	return nil
}

// MarkApplied records, in the caller's step-① transaction, that the message's business change
// is being committed with it. Run again after that commit (a crash or a projection failure
// before ③, or a replay of DEAD(EXHAUSTED)), the message must not be applied a second time
// over state that may have moved on: the pump only re-projects and finishes it. A message that
// is no longer unfinished, or was applied already, fails the transaction with ErrNotUnfinished,
// so ① is rolled back.
//
// The statement is deferred to tx's COMMIT (db.Defer), the last of ①: the check is made on the
// server (msgx_expect), so a message that stopped being unfinished stops the COMMIT behind it.
func MarkApplied(ctx context.Context, tx pgx.Tx, msgID int64, now time.Time) error {
	b := &pgx.Batch{}
	// applied_at IS NULL as well: a message whose ① committed is only re-projected, so a run
	// that would mark it again works from a stale view of it and must apply nothing.
	qq := b.Queue(`WITH upd AS (UPDATE proc_state SET applied_at = $2, updated_at = $2
		WHERE msg_id = $1 AND state IN ('PENDING', 'FAILED') AND applied_at IS NULL RETURNING 1)
		SELECT msgx_expect(count(*) = 1, 'message is not unfinished, or already applied') FROM upd`, msgID, now)
	qq.Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		switch {
		case db.IsExpectFailed(err):
			return fmt.Errorf("mark %d applied: %w", msgID, ErrNotUnfinished)
		case err != nil:
			return fmt.Errorf("mark %d applied: %w", msgID, err)
		}
		return nil
	}
	return db.Defer(ctx, tx, b)
}

// ErrNotUnfinished means the message was no longer PENDING or FAILED when a transition that
// needs it unfinished ran: another actor (replay, an operator) got there first.
var ErrNotUnfinished = errors.New("message is not unfinished")

// Exhaust turns a FAILED message whose attempts reached maxAttempts into DEAD(EXHAUSTED): the
// error class is overwritten, the last error kept, and the backfill intent set in the same
// UPDATE (R-PUMP-3, R-IDENT-4). It reports whether the row changed.
//
// It goes through the per-message gate of R-GATE-1: the row is taken
// with FOR UPDATE, the lock the backfill holds around a marker write and replay and reopen
// take, and the predicate is re-checked on the locked version. A replay that committed first
// (attempts back to 0) makes this a no-op; a replay that comes second waits for this commit
// and then sees a DEAD row whose marker is not yet written.
func Exhaust(ctx context.Context, q db.Executor, msgID int64, maxAttempts int, now time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE proc_state p SET state = 'DEAD', error_class = 'EXHAUSTED', next_attempt_at = NULL,
		finished_at = $3, backfill_next_at = $3, updated_at = $3
		FROM (SELECT msg_id FROM proc_state WHERE msg_id = $1 AND state = 'FAILED' AND attempts >= $2 FOR UPDATE) g
		WHERE p.msg_id = g.msg_id`, msgID, maxAttempts, now)
	if err != nil {
		return false, fmt.Errorf("exhaust %d: %w", msgID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Attempt is one attempt of a message as proc_attempt keeps it.
type Attempt struct {
	No             int
	Started, Ended time.Time
	Outcome        State
	ErrorClass     *ErrorClass
	Error          *string
}

// Attempts returns the kept attempts of a message, oldest first (at most AttemptHistory).
func Attempts(ctx context.Context, q db.Executor, msgID int64) ([]Attempt, error) {
	rows, err := q.Query(ctx, `SELECT attempt_no, started_at, ended_at, outcome, error_class, error
		FROM proc_attempt WHERE msg_id = $1 ORDER BY attempt_no`, msgID)
	if err != nil {
		return nil, fmt.Errorf("attempts of %d: %w", msgID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		err := row.Scan(&a.No, &a.Started, &a.Ended, &a.Outcome, &a.ErrorClass, &a.Error)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("attempts of %d: %w", msgID, err)
	}
	return out, nil
}
