package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	// FLIDs keeps the messages about one of these flights: bound to the FLID (a FLOP), or
	// having written an event keyed by it (a schedule names many flights).
	FLIDs []string
	// EnqueuedFrom and EnqueuedTo bound enqueued_at: From inclusive, To exclusive; nil is
	// unbounded.
	EnqueuedFrom, EnqueuedTo *time.Time
	// Newest lists the newest rows first (msg_id descending); After is then not used.
	Newest bool
	// Acknowledged keeps only the acknowledged rows (true) or only the others (false); nil
	// does not filter.
	Acknowledged *bool
}

// List returns up to limit rows matching f in msg_id order.
func List(ctx context.Context, q db.Executor, f Filter, limit int) ([]Message, error) {
	sql, args := listQuery(f, limit)
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

func listQuery(f Filter, limit int) (string, []any) {
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
	if f.Acknowledged != nil {
		if *f.Acknowledged {
			where = append(where, "acknowledged_at IS NOT NULL")
		} else {
			where = append(where, "acknowledged_at IS NULL")
		}
	}
	if f.After > 0 && !f.Newest {
		where = append(where, "msg_id > "+arg(f.After))
	}
	if len(f.FLIDs) > 0 {
		// Both sides of the UNION are index scans (proc_state_flid, msg_event_key), so a
		// flight's messages cost what the flight has, not what the tables hold.
		flids := arg(f.FLIDs)
		where = append(where, "msg_id IN (SELECT msg_id FROM proc_state WHERE flid = ANY("+flids+"::text[])"+
			" UNION SELECT msg_id FROM msg_event WHERE partition_key = ANY("+flids+"::text[]) AND msg_id IS NOT NULL)")
	}
	if f.EnqueuedFrom != nil || f.EnqueuedTo != nil {
		var win []string
		if f.EnqueuedFrom != nil {
			win = append(win, "enqueued_at >= "+arg(*f.EnqueuedFrom))
		}
		if f.EnqueuedTo != nil {
			win = append(win, "enqueued_at < "+arg(*f.EnqueuedTo))
		}
		w := strings.Join(win, " AND ")
		// The window's smallest and largest msg_id (an index-only scan of proc_state_enqueued)
		// bound the msg_id scan: without them the planner walks msg_id order from the start and
		// filters, reading every row older than the window. The bounds are exact, late
		// arrivals included: every row in the window lies between them. "+ 0" keeps the
		// planner from turning min/max into that same walk of the primary key.
		where = append(where, w, "msg_id BETWEEN (SELECT min(msg_id + 0) FROM proc_state WHERE "+w+
			") AND (SELECT max(msg_id + 0) FROM proc_state WHERE "+w+")")
	}
	sql := `SELECT ` + columns + ` FROM proc_state`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	order := " ORDER BY msg_id"
	if f.Newest {
		order += " DESC"
	}
	sql += order + " LIMIT " + arg(limit)
	return sql, args
}
