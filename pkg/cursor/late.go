package cursor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Hole is an ID range released as a permanent hole.
type Hole struct {
	First, Last int64
	ReleasedAt  time.Time
}

// WatchedHoles returns the holes released at or after since, in ID order: the ones still
// watched for late arrivals. Older holes stay recorded (for status and audit) but are no
// longer looked up.
func WatchedHoles(ctx context.Context, q db.Executor, since time.Time) ([]Hole, error) {
	rows, err := q.Query(ctx, `SELECT first_id, last_id, released_at FROM inbox_hole
		WHERE released_at >= $1 ORDER BY first_id`, since)
	if err != nil {
		return nil, fmt.Errorf("list watched holes: %w", err)
	}
	defer rows.Close()
	var out []Hole
	for rows.Next() {
		var h Hole
		if err := rows.Scan(&h.First, &h.Last, &h.ReleasedAt); err != nil {
			return nil, fmt.Errorf("list watched holes: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list watched holes: %w", err)
	}
	return out, nil
}

// Late is an inbox row found inside a released hole.
type Late struct {
	MsgID     int64
	HoleFirst int64
}

// RecordLate records late arrivals as detected and enqueued at now, and returns the IDs that
// were not recorded before, in ID order. The caller enqueues them in the same transaction, so
// a recorded row is always in proc_state.
func RecordLate(ctx context.Context, q db.Executor, late []Late, now time.Time) ([]int64, error) {
	if len(late) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(late))
	holes := make([]int64, len(late))
	for i, l := range late {
		ids[i], holes[i] = l.MsgID, l.HoleFirst
	}
	rows, err := q.Query(ctx, `INSERT INTO inbox_late (msg_id, hole_first, detected_at, enqueued_at)
		SELECT id, hole, $3, $3 FROM unnest($1::bigint[], $2::bigint[]) AS l(id, hole)
		ON CONFLICT (msg_id) DO NOTHING
		RETURNING msg_id`, ids, holes, now)
	if err != nil {
		return nil, fmt.Errorf("record %d late arrivals: %w", len(late), err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("record late arrivals: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("record late arrivals: %w", err)
	}
	slices.Sort(out) // RETURNING follows no order
	return out, nil
}
