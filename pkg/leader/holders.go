package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Holder is the last recorded holder of a role.
type Holder struct {
	// Role is as recorded: one of a newer version may be unknown to this one (Role.Known).
	Role     Role
	Instance string
	PID      uint32
	Since    time.Time
	// Active is whether backend PID holds the role's lock now. A holder whose connection is gone
	// keeps its row (the last holder is useful to know) but reads as not active.
	Active      bool
	HeartbeatAt time.Time
	// Blocked is set while the holder reports its work paused by an outage (SetBlocked).
	Blocked *Blocked
}

// Holders reads who holds each role now, in role order. q may be a pool, a connection or a
// transaction on the database the electors use.
func Holders(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) ([]Holder, error) {
	// The key of a role is computed in Go, so the query returns each holder's granted advisory
	// locks and the match happens below. Advisory locks are per database, hence the filter.
	rows, err := q.Query(ctx, `SELECT h.role, h.instance, h.backend_pid, h.since, h.heartbeat_at,
			h.blocked_on, h.blocked_since, coalesce(h.blocked_error, ''), coalesce(h.blocked_msg_id, 0), h.blocked_probes,
			coalesce(array_agg(l.classid::int8) FILTER (WHERE l.pid IS NOT NULL), '{}'),
			coalesce(array_agg(l.objid::int8) FILTER (WHERE l.pid IS NOT NULL), '{}')
		FROM role_holder h
		LEFT JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
			AND l.pid = h.backend_pid
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		GROUP BY h.role
		ORDER BY h.role`)
	if err != nil {
		return nil, fmt.Errorf("leader: read holders: %w", err)
	}
	holders, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Holder, error) {
		var (
			h            Holder
			pid          int32
			highs, lows  []int64
			blockedOn    *string
			blockedSince *time.Time
			b            Blocked
		)
		if err := row.Scan(&h.Role, &h.Instance, &pid, &h.Since, &h.HeartbeatAt,
			&blockedOn, &blockedSince, &b.LastError, &b.MsgID, &b.Probes, &highs, &lows); err != nil {
			return h, err
		}
		if blockedOn != nil && blockedSince != nil {
			b.Dependency, b.Since = *blockedOn, *blockedSince
			h.Blocked = &b
		}
		h.PID = uint32(pid)
		key := Key(h.Role)
		for i := range highs {
			if uint32(highs[i]) == keyHigh(key) && uint32(lows[i]) == keyLow(key) {
				h.Active = true
			}
		}
		return h, nil
	})
	if err != nil {
		return nil, fmt.Errorf("leader: read holders: %w", err)
	}
	return holders, nil
}
