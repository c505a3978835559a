// Package outbox holds the SQL of the msg_event family: the transactional outbox the pump
// writes with each flight change and the dispatcher drains to Kafka (the R-OUTBOX rules).
package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Targets.
const (
	TargetMsg  = "KAFKA:msg"
	TargetSchd = "KAFKA:schd"
)

// Event types (R-OUTBOX-8).
const (
	TypeUpsert    = "UPSERT"
	TypeTombstone = "TOMBSTONE"
)

// Channel is the NOTIFY channel that wakes the dispatcher after a commit that added events.
const Channel = "msgx_outbox"

// NewEvent is one event to write in the business transaction.
type NewEvent struct {
	Target       string
	PartitionKey string // the FLID
	Type         string // UPSERT or TOMBSTONE
	Version      int64
	Payload      []byte // nil for a null-value tombstone
	MsgID        int64
	Trace        telemetry.TraceContext
}

// Add writes events in the caller's transaction. KAFKA:msg events are appended; KAFKA:schd
// keeps one row per FLID that a new state replaces only when its version is not older, taking
// a new event_id from the global sequence, back to PENDING with the old error cleared
// (R-OUTBOX-4). It notifies the dispatcher, which hears it when the transaction commits. The
// events and the notification are one statement, whatever their number (AddTo).
func Add(ctx context.Context, q db.Executor, events []NewEvent, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	sql, args, err := insertEvents(events, now)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("add %d events: %w", len(events), err)
	}
	return nil
}

// AddTo adds what Add writes to batch, for a caller that sends its own writes with the
// events in one round trip; the events are written when the batch is sent in the caller's
// transaction, and the dispatcher is notified when it commits. It queues one statement, or
// none for no events: a FLOP's two events and a schedule snapshot's hundreds alike.
func AddTo(batch *pgx.Batch, events []NewEvent, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	sql, args, err := insertEvents(events, now)
	if err != nil {
		return err
	}
	batch.Queue(sql, args...)
	return nil
}

// Event is one pending outbox row as the dispatcher reads it.
type Event struct {
	ID           int64
	Target       string
	PartitionKey string
	Type         string
	Version      int64
	Payload      []byte
	MsgID        *int64
	Attempts     int
	NextAttempt  *time.Time
	Trace        telemetry.TraceContext
}

// Pending returns up to limit events of a target that may be sent at now: KAFKA:msg in
// event_id order, KAFKA:schd longest waiting first (pending_since, see Add). The batch is
// frozen at read time: events committed during a send wait for the next round (R-OUTBOX-2).
//
// An event is returned only when it is due and no earlier unsent event of its FLID is DEAD or
// backing off: a blocked head holds back its own FLID and nothing else. So the events of one
// FLID in a batch are always a prefix of that FLID's unsent events, which the caller may send
// one after the other. A DEAD event keeps blocking its FLID until an operator requeues it
// (Requeue): KAFKA:msg consumers never see a gap or a reordering, at the price of a stalled
// FLID. KAFKA:schd has one row per FLID, so this only means a DEAD row is not sent; the next
// accepted state resets it (Add).
//
// The blocker check is a subquery fenced with OFFSET 0, so that PostgreSQL runs it per
// candidate as a probe of msg_event_blockers by (target, FLID, event_id) instead of turning it
// into an anti join: with statistics that still count no unsent event (a burst of thousands of
// events before autovacuum analyses the table), the join read the topic's whole backlog once
// per candidate, seconds per call on a large msg_event (docs/performance.md).
func Pending(ctx context.Context, q db.Executor, target string, limit int, now time.Time) ([]Event, error) {
	order := `e.event_id`
	if target == TargetSchd {
		// A row without pending_since has waited longest (NULLs would sort last otherwise).
		order = `e.pending_since NULLS FIRST, e.event_id`
	}
	rows, err := q.Query(ctx, `SELECT e.event_id, e.target, e.partition_key, e.event_type, e.state_version,
		e.payload::text, e.msg_id, e.attempts, e.next_attempt_at, e.trace_parent, e.trace_state
		FROM msg_event e
		WHERE e.target = $1 AND e.state = 'PENDING' AND (e.next_attempt_at IS NULL OR e.next_attempt_at <= $3)
		  AND NOT EXISTS (SELECT 1 FROM msg_event b
			WHERE b.target = e.target AND b.partition_key = e.partition_key AND b.state <> 'SENT'
			  AND b.event_id < e.event_id AND (b.state = 'DEAD' OR b.next_attempt_at > $3)
			OFFSET 0)
		ORDER BY `+order+` LIMIT $2`, target, limit, now)
	if err != nil {
		return nil, fmt.Errorf("read pending %s events: %w", target, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var payload *string
		traceParent, traceState := e.Trace.ScanColumns()
		if err := rows.Scan(&e.ID, &e.Target, &e.PartitionKey, &e.Type, &e.Version, &payload, &e.MsgID,
			&e.Attempts, &e.NextAttempt, traceParent, traceState); err != nil {
			return nil, fmt.Errorf("scan %s event: %w", target, err)
		}
		if payload != nil {
			e.Payload = []byte(*payload)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read pending %s events: %w", target, err)
	}
	return out, nil
}

// Sent is what MarkSent marked.
type Sent struct {
	Count int
	// First lists the messages whose first event this call marked: no other event of theirs
	// had been acknowledged before. It ends a message's end-to-end latency.
	First []FirstDelivery
}

// FirstDelivery is a message whose first event Kafka acknowledged, with the times its
// end-to-end latency is measured from: the inbox's RECEIVED_AT (AODB's clock; nil when the row
// had none) and ingest's enqueue.
type FirstDelivery struct {
	MsgID      int64
	ReceivedAt *time.Time
	EnqueuedAt time.Time
}

// MarkSent marks acknowledged events SENT, with sent_at in the same statement. The condition on
// the version read (R-OUTBOX-4) leaves a KAFKA:schd row that was replaced during the send
// PENDING for the next round: the replacement took a new event_id, so neither the id nor (for a
// newer state) the version matches.
//
// The messages whose first acknowledged event this is are found in the same statement: its
// outer query reads the snapshot from before the UPDATE, so "no SENT event of the message yet"
// is judged without the events being marked now.
//
// Both states are asked through sent_at (the same thing, by the table's CHECK): PENDING as
// "not sent, not DEAD", sent before as sent_at IS NOT NULL. Asked as state = 'PENDING' and
// state = 'SENT', they let the planner read the partial indexes of those states whole (the
// unsent events' with every dead entry since the last vacuum, the SENT events' with every event
// ever sent) whenever msg_event's statistics are older than the table; the mark then costs a
// scan that grows with the backlog (docs/performance.md, "Changes and their cost").
func MarkSent(ctx context.Context, q db.Executor, events []Event, now time.Time) (Sent, error) {
	var out Sent
	if len(events) == 0 {
		return out, nil
	}
	ids := make([]int64, len(events))
	versions := make([]int64, len(events))
	for i, e := range events {
		ids[i], versions[i] = e.ID, e.Version
	}
	rows, err := q.Query(ctx, markSentSQL, ids, versions, now)
	if err != nil {
		return out, fmt.Errorf("mark %d events sent: %w", len(events), err)
	}
	defer rows.Close()
	for rows.Next() {
		var msgID *int64
		var received, enqueued *time.Time
		var first bool
		if err := rows.Scan(&msgID, &received, &enqueued, &first); err != nil {
			return out, fmt.Errorf("mark %d events sent: %w", len(events), err)
		}
		out.Count++
		if first && msgID != nil && enqueued != nil {
			out.First = append(out.First, FirstDelivery{MsgID: *msgID, ReceivedAt: received, EnqueuedAt: *enqueued})
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("mark %d events sent: %w", len(events), err)
	}
	return out, nil
}

// markSentSQL is MarkSent's statement: $1 the event IDs, $2 their versions read, $3 the time.
const markSentSQL = `WITH marked AS (
			UPDATE msg_event e SET state = 'SENT', sent_at = $3, updated_at = $3, last_error = NULL,
				next_attempt_at = NULL
			FROM unnest($1::bigint[], $2::bigint[]) AS s(id, version)
			WHERE e.event_id = s.id AND e.state_version = s.version AND e.sent_at IS NULL AND e.state <> 'DEAD'
			RETURNING e.event_id, e.msg_id)
		SELECT m.msg_id, p.received_at, p.enqueued_at,
			p.msg_id IS NOT NULL AND m.event_id = min(m.event_id) OVER (PARTITION BY m.msg_id)
			AND NOT EXISTS (SELECT 1 FROM msg_event o WHERE o.msg_id = m.msg_id AND o.sent_at IS NOT NULL)
		FROM marked m LEFT JOIN proc_state p ON p.msg_id = m.msg_id`

// Failure is one failed send of an event, as Fail records it.
type Failure struct {
	Event  Event
	Reason string
	// Next is when the event may be sent again; MaxAttempts is the attempt that makes it DEAD.
	Next        time.Time
	MaxAttempts int
	Now         time.Time
}

// Fail counts a failed send: the event backs off until f.Next, or becomes DEAD (kept as the
// dead-letter record) when its attempts reach f.MaxAttempts. It reports whether the event is
// now DEAD; a KAFKA:schd row replaced during the send is left alone (false).
func Fail(ctx context.Context, q db.Executor, f Failure) (bool, error) {
	e, reason, next, maxAttempts, now := f.Event, f.Reason, f.Next, f.MaxAttempts, f.Now
	var state string
	err := q.QueryRow(ctx, `UPDATE msg_event SET attempts = attempts + 1, last_error = $3, updated_at = $5,
		next_attempt_at = CASE WHEN attempts + 1 >= $4 THEN NULL ELSE $6::timestamptz END,
		state = CASE WHEN attempts + 1 >= $4 THEN 'DEAD' ELSE 'PENDING' END
		WHERE event_id = $1 AND state_version = $2 AND state = 'PENDING'
		RETURNING state`, e.ID, e.Version, reason, maxAttempts, now, next).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fail event %d: %w", e.ID, err)
	}
	return state == "DEAD", nil
}

// Refuse makes an event DEAD at once, counting the attempt, with reason as its last_error: its
// target refused it for itself (a record larger than the broker accepts), so no retry could
// deliver it. It reports whether the event is now DEAD; a KAFKA:schd row replaced during the
// send is left alone (false), and its new state is judged when it is sent.
func Refuse(ctx context.Context, q db.Executor, e Event, reason string, now time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE msg_event SET attempts = attempts + 1, last_error = $3, updated_at = $4,
		next_attempt_at = NULL, state = 'DEAD'
		WHERE event_id = $1 AND state_version = $2 AND state = 'PENDING'`, e.ID, e.Version, reason, now)
	if err != nil {
		return false, fmt.Errorf("refuse event %d: %w", e.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Requeue puts a DEAD event back to PENDING with its attempts reset, so that the dispatcher
// sends it again and, for KAFKA:msg, releases the FLID it was blocking. It is the operator's
// answer to a dead letter; it returns db.ErrNotFound when the event is not DEAD.
func Requeue(ctx context.Context, q db.Executor, eventID int64, now time.Time) error {
	tag, err := q.Exec(ctx, `UPDATE msg_event SET state = 'PENDING', attempts = 0, next_attempt_at = NULL,
		updated_at = $2, pending_since = $2 WHERE event_id = $1 AND state = 'DEAD'`, eventID, now)
	if err != nil {
		return fmt.Errorf("requeue event %d: %w", eventID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("requeue event %d: no DEAD event: %w", eventID, db.ErrNotFound)
	}
	return nil
}
