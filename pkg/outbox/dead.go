package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// DeadFilter selects DEAD events (dead letters). The fields combine: an event must match every
// one given. EventIDs or Target is required, so no selection reaches every dead letter of
// both targets by accident.
type DeadFilter struct {
	EventIDs []int64
	Target   string
	// PartitionKey (the FLID) and MsgID narrow the selection further; empty and 0 mean any.
	PartitionKey string
	MsgID        int64
	// ForUpdate locks the selected rows until the transaction ends, so that what the caller
	// changes next is exactly what it read: the pump's KAFKA:schd upsert, which would replace a
	// dead row with a new event_id, waits instead of racing the change.
	ForUpdate bool
}

// ErrDeadNoFilter is returned when a DeadFilter names neither event IDs nor a target.
var ErrDeadNoFilter = errors.New("outbox: a dead-letter selection needs event IDs or a target")

// Dead is one DEAD event as an operator reviews it before requeueing it.
type Dead struct {
	ID           int64
	Target       string
	PartitionKey string
	Type         string
	Version      int64
	MsgID        *int64
	Attempts     int
	LastError    *string
	// DeadAt is when the event became DEAD: the last failed attempt is its last change.
	DeadAt time.Time
}

// DeadEvents returns up to limit DEAD events that match f, in event_id order (for KAFKA:msg the
// order the FLIDs' consumers expect them in). The statement is built from the fields given so
// that each selection uses its index: the primary key, msg_event_head (target), msg_event_flid
// (target and FLID) or msg_event_msg_id.
func DeadEvents(ctx context.Context, q db.Executor, f DeadFilter, limit int) ([]Dead, error) {
	if len(f.EventIDs) == 0 && f.Target == "" {
		return nil, ErrDeadNoFilter
	}
	if limit <= 0 {
		return nil, fmt.Errorf("outbox: dead events: limit must be positive, got %d", limit)
	}
	// state <> 'SENT' is implied by state = 'DEAD'; spelling it out lets the planner match the
	// partial index msg_event_flid without proving the implication.
	where := []string{`state = 'DEAD'`, `state <> 'SENT'`}
	var args []any
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if len(f.EventIDs) > 0 {
		arg(`event_id = ANY($%d::bigint[])`, f.EventIDs)
	}
	if f.Target != "" {
		arg(`target = $%d`, f.Target)
	}
	if f.PartitionKey != "" {
		arg(`partition_key = $%d`, f.PartitionKey)
	}
	if f.MsgID != 0 {
		arg(`msg_id = $%d`, f.MsgID)
	}
	args = append(args, limit)
	sql := `SELECT event_id, target, partition_key, event_type, state_version, msg_id, attempts, last_error, updated_at
		FROM msg_event WHERE ` + strings.Join(where, " AND ") + fmt.Sprintf(` ORDER BY event_id LIMIT $%d`, len(args))
	if f.ForUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read dead events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Dead, error) {
		var d Dead
		err := row.Scan(&d.ID, &d.Target, &d.PartitionKey, &d.Type, &d.Version, &d.MsgID, &d.Attempts, &d.LastError, &d.DeadAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read dead events: %w", err)
	}
	return out, nil
}

// Wake notifies the dispatcher; it hears it when the caller's transaction commits. Add does
// this itself; a caller that makes events sendable otherwise (Requeue) calls it once after.
func Wake(ctx context.Context, q db.Executor) error {
	if _, err := q.Exec(ctx, `SELECT pg_notify($1, '')`, Channel); err != nil {
		return fmt.Errorf("notify dispatcher: %w", err)
	}
	return nil
}
