// Package queue holds the SQL of the proc_state family: the FIFO of inbox messages with their
// processing state, business identity, failures and backfill intent (seed 003 §1.2, §3, §5).
// The table is the queue: the head is the smallest unfinished msg_id at or below the
// watermark W.
package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/msgexchange/msgexchange/pkg/db"
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

// ErrorClass classifies why a message failed (seed 004 §1.1).
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

// Channel is the NOTIFY channel that wakes the pump when messages become ready (enqueue,
// replay).
const Channel = "msgx_queue"

// NewMessage is one discovered inbox row to enqueue.
type NewMessage struct {
	MsgID      int64
	ReceivedAt *time.Time // CMINMSGS_DATE_RECEIVED, may be NULL
	Trace      [2]string  // traceparent, tracestate
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
	parents := make([]string, len(rows))
	states := make([]string, len(rows))
	for i, r := range rows {
		ids[i], received[i], parents[i], states[i] = r.MsgID, r.ReceivedAt, r.Trace[0], r.Trace[1]
	}
	tag, err := q.Exec(ctx, `
		INSERT INTO proc_state (msg_id, state, received_at, enqueued_at, trace_parent, trace_state, updated_at)
		SELECT id, 'PENDING', rcv, $5, nullif(tp, ''), nullif(ts, ''), $5
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
	TraceParent         *string
	TraceState          *string
	UpdatedAt           time.Time
}

const columns = `msg_id, state, error_class, last_error, attempts, next_attempt_at, identity_key, msg_type, msg_styp,
	received_at, enqueued_at, processing_started_at, finished_at, backfill_next_at, backfill_at, backfill_attempts,
	backfill_abandoned_at, backfill_abandon_reason, trace_parent, trace_state, updated_at`

func scan(row pgx.Row) (Message, error) {
	var m Message
	err := row.Scan(&m.MsgID, &m.State, &m.ErrorClass, &m.LastError, &m.Attempts, &m.NextAttemptAt, &m.IdentityKey,
		&m.MsgType, &m.MsgStyp, &m.ReceivedAt, &m.EnqueuedAt, &m.ProcessingStartedAt, &m.FinishedAt, &m.BackfillNextAt,
		&m.BackfillAt, &m.BackfillAttempts, &m.BackfillAbandonedAt, &m.BackfillReason, &m.TraceParent, &m.TraceState,
		&m.UpdatedAt)
	return m, err
}

// Head returns the queue head: the smallest unfinished message at or below the watermark
// (seed 000 §11: only discovered rows are claimed). ok is false when there is none.
func Head(ctx context.Context, q db.Executor) (m Message, ok bool, err error) {
	m, err = scan(q.QueryRow(ctx, `SELECT `+columns+` FROM proc_state
		WHERE state IN ('PENDING', 'FAILED') AND msg_id <= (SELECT w FROM inbox_cursor WHERE id = 1)
		ORDER BY msg_id LIMIT 1`))
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

// MarkStarted records the first processing attempt's start and the message's type; later
// attempts keep the first start.
func MarkStarted(ctx context.Context, q db.Executor, msgID int64, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE proc_state SET processing_started_at = coalesce(processing_started_at, $2)
		WHERE msg_id = $1 AND processing_started_at IS NULL`, msgID, now)
	if err != nil {
		return fmt.Errorf("mark %d started: %w", msgID, err)
	}
	return nil
}

// SetKind records the decoded TYPE and STYP for inspection.
func SetKind(ctx context.Context, q db.Executor, msgID int64, typ, styp string) error {
	_, err := q.Exec(ctx, `UPDATE proc_state SET msg_type = $2, msg_styp = $3 WHERE msg_id = $1`, msgID, typ, styp)
	if err != nil {
		return fmt.Errorf("set kind of %d: %w", msgID, err)
	}
	return nil
}

// BindIdentity binds the business identity to the message, once, in one statement outside
// any business transaction (seed 003 §2). It returns the msg_id that holds the identity:
// msgID itself when the binding is (or already was) this message's, another ID when the
// message is a duplicate.
func BindIdentity(ctx context.Context, q db.Executor, msgID int64, key string) (holder int64, err error) {
	_, err = q.Exec(ctx, `UPDATE proc_state SET identity_key = $2 WHERE msg_id = $1 AND identity_key IS NULL`, msgID, key)
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "23505") {
		return 0, fmt.Errorf("bind identity of %d: %w", msgID, err)
	}
	err = q.QueryRow(ctx, `SELECT msg_id FROM proc_state WHERE identity_key = $1`, key).Scan(&holder)
	if err != nil {
		return 0, fmt.Errorf("identity holder of %d: %w", msgID, err)
	}
	return holder, nil
}

// Fail counts a failed attempt and schedules the retry. The message stays the head.
func Fail(ctx context.Context, q db.Executor, msgID int64, class ErrorClass, reason string, next time.Time, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE proc_state SET state = 'FAILED', error_class = $2, last_error = $3,
		attempts = attempts + 1, next_attempt_at = $4, updated_at = $5
		WHERE msg_id = $1 AND state IN ('PENDING', 'FAILED')`, msgID, class, reason, next, now)
	if err != nil {
		return fmt.Errorf("fail %d: %w", msgID, err)
	}
	return nil
}

// Finish moves an unfinished message to a terminal state with its backfill intent in the same
// statement (seed 003 §5.3: non-business terminal states are one UPDATE). class and reason may
// be empty (SUCCEEDED).
func Finish(ctx context.Context, q db.Executor, msgID int64, state State, class ErrorClass, reason string, now time.Time) error {
	if !state.Terminal() {
		return fmt.Errorf("finish %d: %s is not terminal", msgID, state)
	}
	tag, err := q.Exec(ctx, `UPDATE proc_state SET state = $2, error_class = nullif($3, ''),
		last_error = coalesce(nullif($4, ''), last_error), next_attempt_at = NULL,
		finished_at = $5, backfill_next_at = $5, updated_at = $5
		WHERE msg_id = $1 AND state IN ('PENDING', 'FAILED')`, msgID, state, string(class), reason, now)
	if err != nil {
		return fmt.Errorf("finish %d as %s: %w", msgID, state, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("finish %d as %s: %w", msgID, state, ErrNotUnfinished)
	}
	return nil
}

// ErrNotUnfinished means the message was no longer PENDING or FAILED when a transition that
// needs it unfinished ran: another actor (replay, an operator) got there first.
var ErrNotUnfinished = errors.New("message is not unfinished")

// Exhaust turns a FAILED message whose attempts reached maxAttempts into DEAD(EXHAUSTED): the
// error class is overwritten, the last error kept, and the backfill intent set in the same
// UPDATE (seed 003 §3, §5.1). It reports whether the row changed.
func Exhaust(ctx context.Context, q db.Executor, msgID int64, maxAttempts int, now time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE proc_state SET state = 'DEAD', error_class = 'EXHAUSTED', next_attempt_at = NULL,
		finished_at = $3, backfill_next_at = $3, updated_at = $3
		WHERE msg_id = $1 AND state = 'FAILED' AND attempts >= $2`, msgID, maxAttempts, now)
	if err != nil {
		return false, fmt.Errorf("exhaust %d: %w", msgID, err)
	}
	return tag.RowsAffected() == 1, nil
}
