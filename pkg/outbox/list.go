package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Row is one msg_event row in full, for inspection.
type Row struct {
	ID           int64
	Target       string
	PartitionKey string
	Type         string
	Version      int64
	State        string // PENDING, SENT or DEAD
	Attempts     int
	NextAttempt  *time.Time
	LastError    *string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	SentAt       *time.Time
	Payload      *string // JSON; nil for a tombstone
	Trace        telemetry.TraceContext
}

// ByMessage returns the events that message msgID wrote, in event_id order. A KAFKA:schd row
// carries the msg_id of the message that wrote its current state, so an older message's
// schedule event is listed under the newer one once replaced.
func ByMessage(ctx context.Context, q db.Executor, msgID int64) ([]Row, error) {
	rows, err := q.Query(ctx, `SELECT event_id, target, partition_key, event_type, state_version, state, attempts,
		next_attempt_at, last_error, created_at, updated_at, sent_at, payload::text, trace_parent, trace_state
		FROM msg_event WHERE msg_id = $1 ORDER BY event_id`, msgID)
	if err != nil {
		return nil, fmt.Errorf("events of message %d: %w", msgID, err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("events of message %d: %w", msgID, err)
	}
	return out, nil
}

func scanRow(row pgx.CollectableRow) (Row, error) {
	var r Row
	traceParent, traceState := r.Trace.ScanColumns()
	err := row.Scan(&r.ID, &r.Target, &r.PartitionKey, &r.Type, &r.Version, &r.State, &r.Attempts, &r.NextAttempt,
		&r.LastError, &r.CreatedAt, &r.UpdatedAt, &r.SentAt, &r.Payload, traceParent, traceState)
	return r, err
}

// ByKey returns the newest limit events keyed by one FLID (partition_key), newest first, in every
// target and state (index msg_event_key, migration 00016).
func ByKey(ctx context.Context, q db.Executor, flid string, limit int) ([]Row, error) {
	rows, err := q.Query(ctx, `SELECT event_id, target, partition_key, event_type, state_version, state, attempts,
		next_attempt_at, last_error, created_at, updated_at, sent_at, payload::text, trace_parent, trace_state
		FROM msg_event WHERE partition_key = $1 ORDER BY event_id DESC LIMIT $2`, flid, limit)
	if err != nil {
		return nil, fmt.Errorf("events of flight %s: %w", flid, err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("events of flight %s: %w", flid, err)
	}
	return out, nil
}
