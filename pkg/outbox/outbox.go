// Package outbox holds the SQL of the msg_event family: the transactional outbox the pump
// writes with each flight change and the dispatcher drains to Kafka (seed 003 §8).
package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Targets.
const (
	TargetMsg  = "KAFKA:msg"
	TargetSchd = "KAFKA:schd"
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
	Trace        [2]string // traceparent, tracestate
}

// Add writes events in the caller's transaction. KAFKA:msg events are appended; KAFKA:schd
// keeps one row per FLID that a new state replaces only when its version is not older, taking
// a new event_id from the global sequence, back to PENDING with the old error cleared
// (seed 003 §8.2). It notifies the dispatcher, which hears it when the transaction commits.
func Add(ctx context.Context, q db.Executor, events []NewEvent, now time.Time) error {
	for _, e := range events {
		var payload any
		if e.Payload != nil {
			payload = string(e.Payload)
		}
		var err error
		switch e.Target {
		case TargetMsg:
			_, err = q.Exec(ctx, `INSERT INTO msg_event (target, partition_key, event_type, state_version, payload, msg_id,
				trace_parent, trace_state, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5::jsonb, $6, nullif($7, ''), nullif($8, ''), $9, $9)`,
				e.Target, e.PartitionKey, e.Type, e.Version, payload, e.MsgID, e.Trace[0], e.Trace[1], now)
		case TargetSchd:
			_, err = q.Exec(ctx, `INSERT INTO msg_event (target, partition_key, event_type, state_version, payload, msg_id,
				trace_parent, trace_state, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5::jsonb, $6, nullif($7, ''), nullif($8, ''), $9, $9)
				ON CONFLICT (partition_key) WHERE target = 'KAFKA:schd' DO UPDATE SET
					event_id = nextval('msg_event_id_seq'), event_type = excluded.event_type,
					state_version = excluded.state_version, payload = excluded.payload, msg_id = excluded.msg_id,
					trace_parent = excluded.trace_parent, trace_state = excluded.trace_state,
					state = 'PENDING', attempts = 0, next_attempt_at = NULL, last_error = NULL, sent_at = NULL,
					updated_at = excluded.updated_at
				WHERE msg_event.state_version <= excluded.state_version`,
				e.Target, e.PartitionKey, e.Type, e.Version, payload, e.MsgID, e.Trace[0], e.Trace[1], now)
		default:
			return fmt.Errorf("outbox: unknown target %q", e.Target)
		}
		if err != nil {
			return fmt.Errorf("add %s event for %s v%d: %w", e.Target, e.PartitionKey, e.Version, err)
		}
	}
	if len(events) > 0 {
		if _, err := q.Exec(ctx, `SELECT pg_notify($1, '')`, Channel); err != nil {
			return fmt.Errorf("notify dispatcher: %w", err)
		}
	}
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
	Trace        [2]string
}

// Pending returns up to limit PENDING events of a target in event_id order: the batch is frozen
// at read time, so events committed during a send wait for the next round (seed 003 §8.1).
// Events not yet due are included: for KAFKA:msg they hold back their FLID's later events.
func Pending(ctx context.Context, q db.Executor, target string, limit int) ([]Event, error) {
	rows, err := q.Query(ctx, `SELECT event_id, target, partition_key, event_type, state_version, payload::text, msg_id,
		attempts, next_attempt_at, coalesce(trace_parent, ''), coalesce(trace_state, '')
		FROM msg_event WHERE target = $1 AND state = 'PENDING' ORDER BY event_id LIMIT $2`, target, limit)
	if err != nil {
		return nil, fmt.Errorf("read pending %s events: %w", target, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var payload *string
		if err := rows.Scan(&e.ID, &e.Target, &e.PartitionKey, &e.Type, &e.Version, &payload, &e.MsgID,
			&e.Attempts, &e.NextAttempt, &e.Trace[0], &e.Trace[1]); err != nil {
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

// MarkSent marks an acknowledged event SENT. The condition on the version read makes a
// KAFKA:schd row that was replaced during the send stay PENDING for the next round.
func MarkSent(ctx context.Context, q db.Executor, e Event, now time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE msg_event SET state = 'SENT', sent_at = $3, updated_at = $3, last_error = NULL
		WHERE event_id = $1 AND state_version = $2 AND state = 'PENDING'`, e.ID, e.Version, now)
	if err != nil {
		return false, fmt.Errorf("mark event %d sent: %w", e.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Fail counts a failed send: the event backs off until next, or becomes DEAD (kept as the
// dead-letter record) when its attempts reach maxAttempts.
func Fail(ctx context.Context, q db.Executor, e Event, reason string, next time.Time, maxAttempts int, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE msg_event SET attempts = attempts + 1, last_error = $3, updated_at = $5,
		next_attempt_at = CASE WHEN attempts + 1 >= $4 THEN NULL ELSE $6 END,
		state = CASE WHEN attempts + 1 >= $4 THEN 'DEAD' ELSE 'PENDING' END
		WHERE event_id = $1 AND state_version = $2 AND state = 'PENDING'`, e.ID, e.Version, reason, maxAttempts, now, next)
	if err != nil {
		return fmt.Errorf("fail event %d: %w", e.ID, err)
	}
	return nil
}
