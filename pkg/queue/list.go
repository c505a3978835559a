package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Filter selects proc_state rows for inspection (the control service's ListMessages). Zero
// fields do not filter.
type Filter struct {
	States       []State
	ErrorClasses []ErrorClass
	// FirstID and LastID bound msg_id inclusively; 0 means unbounded.
	FirstID, LastID int64
	// Abandoned keeps only rows whose backfill was abandoned.
	Abandoned bool
	// After continues a listing: only rows with msg_id > After (keyset pagination, so a page
	// costs the same at any depth and rows enqueued meanwhile are not skipped).
	After int64
}

// List returns up to limit rows matching f in msg_id order.
func List(ctx context.Context, q db.Executor, f Filter, limit int) ([]Message, error) {
	var where []string
	args := []any{}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, s := range f.States {
			states[i] = string(s)
		}
		where = append(where, "state = ANY("+arg(states)+"::text[])")
	}
	if len(f.ErrorClasses) > 0 {
		classes := make([]string, len(f.ErrorClasses))
		for i, c := range f.ErrorClasses {
			classes[i] = string(c)
		}
		where = append(where, "error_class = ANY("+arg(classes)+"::text[])")
	}
	if f.FirstID > 0 {
		where = append(where, "msg_id >= "+arg(f.FirstID))
	}
	if f.LastID > 0 {
		where = append(where, "msg_id <= "+arg(f.LastID))
	}
	if f.Abandoned {
		where = append(where, "backfill_abandoned_at IS NOT NULL")
	}
	if f.After > 0 {
		where = append(where, "msg_id > "+arg(f.After))
	}
	sql := `SELECT ` + columns + ` FROM proc_state`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY msg_id LIMIT " + arg(limit)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Message, error) { return scan(row) })
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return out, nil
}
