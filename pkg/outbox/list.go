package outbox

import (
	"context"
	"fmt"
	"strconv"
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
	// Set by the reads that bound payloads (ByMessageCut, ByKey) when they cut Payload to its
	// head: the whole payload's length in bytes and its SHA-256 (hex).
	PayloadBytes  int64
	PayloadSHA256 string
}

// eventColumns are the columns scanRow reads, the payload as $1 bounds it (payloadColumns).
const eventColumns = `event_id, target, partition_key, event_type, state_version, state, attempts,
		next_attempt_at, last_error, created_at, updated_at, sent_at, `

// payloadColumns read the payload whole ($n 0), or its first $n characters with the whole
// length and digest when it is longer: PostgreSQL cuts it, so the reader never holds a
// payload of a whole flight document (up to a message of codec.max-bytes) it would not show.
func payloadColumns(n int) string {
	p := "$" + strconv.Itoa(n)
	return `CASE WHEN ` + p + ` > 0 AND octet_length(payload::text) > ` + p + ` THEN left(payload::text, ` + p + `) ELSE payload::text END,
		trace_parent, trace_state,
		CASE WHEN ` + p + ` > 0 AND octet_length(payload::text) > ` + p + ` THEN octet_length(payload::text) ELSE 0 END,
		CASE WHEN ` + p + ` > 0 AND octet_length(payload::text) > ` + p + ` THEN encode(sha256(convert_to(payload::text, 'UTF8')), 'hex') ELSE '' END`
}

// ByMessage returns the events that message msgID wrote, in event_id order. A KAFKA:schd row
// carries the msg_id of the message that wrote its current state, so an older message's
// schedule event is listed under the newer one once replaced.
func ByMessage(ctx context.Context, q db.Executor, msgID int64) ([]Row, error) {
	return ByMessageCut(ctx, q, msgID, 0)
}

// ByMessageCut is ByMessage with each payload longer than payloadBytes cut to its first
// payloadBytes characters (PayloadBytes, PayloadSHA256 say so); 0 reads them whole.
func ByMessageCut(ctx context.Context, q db.Executor, msgID int64, payloadBytes int) ([]Row, error) {
	rows, err := q.Query(ctx, `SELECT `+eventColumns+payloadColumns(2)+`
		FROM msg_event WHERE msg_id = $1 ORDER BY event_id`, msgID, payloadBytes)
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
		&r.LastError, &r.CreatedAt, &r.UpdatedAt, &r.SentAt, &r.Payload, traceParent, traceState, &r.PayloadBytes, &r.PayloadSHA256)
	return r, err
}

// ByKey returns the newest limit events keyed by one FLID (partition_key), newest first, in every
// target and state (index msg_event_key, migration 00016), each payload cut as ByMessageCut
// cuts it.
func ByKey(ctx context.Context, q db.Executor, flid string, limit, payloadBytes int) ([]Row, error) {
	rows, err := q.Query(ctx, `SELECT `+eventColumns+payloadColumns(3)+`
		FROM msg_event WHERE partition_key = $1 ORDER BY event_id DESC LIMIT $2`, flid, limit, payloadBytes)
	if err != nil {
		return nil, fmt.Errorf("events of flight %s: %w", flid, err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("events of flight %s: %w", flid, err)
	}
	return out, nil
}
