package flightstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// History reads a flight's whole change history without a byte budget, for the tests that
// check what the writes recorded; control reads it by pages (EachHistory).
func History(ctx context.Context, q db.Executor, flid string, after int64, limit int) ([]Change, error) {
	return queryChanges(ctx, q, "history of "+flid,
		`SELECT `+changeColumns+` FROM flight_change WHERE flid = $1 AND msg_id > $2 ORDER BY msg_id LIMIT $3`, flid, after, limit)
}

func queryChanges(ctx context.Context, q db.Executor, what, sql string, args ...any) ([]Change, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scanChange)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
