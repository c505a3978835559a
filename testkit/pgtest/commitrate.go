package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// CommitRate is the anchor the benches measure the pump against, pgbench-like, on the server
// of dsn: one dedicated connection commits m transactions of three statements (SELECT … FOR
// UPDATE, UPDATE, INSERT of a small JSON row, over 200 rows) and the rate is returned in
// commits per second. It is the ceiling of a strictly sequential worker that commits durably
// once per message, and it moves with the machine's load as the pump does, so their ratio
// stays comparable across machines. Its tables are dropped afterwards.
func CommitRate(tb testing.TB, dsn string, m int) float64 {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE anchor_state (id bigint PRIMARY KEY, v bigint NOT NULL);
		CREATE TABLE anchor_event (id bigserial PRIMARY KEY, state_id bigint NOT NULL, v bigint NOT NULL, payload jsonb);
		INSERT INTO anchor_state SELECT g, 0 FROM generate_series(1, 200) g`); err != nil {
		tb.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(ctx, `DROP TABLE anchor_state, anchor_event`) }()
	began := time.Now()
	for i := range m {
		id := int64(i%200 + 1)
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var v int64
			if err := tx.QueryRow(ctx, `SELECT v FROM anchor_state WHERE id = $1 FOR UPDATE`, id).Scan(&v); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE anchor_state SET v = $2 WHERE id = $1`, id, v+1); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO anchor_event (state_id, v, payload) VALUES ($1, $2, '{"k": "v"}')`, id, v+1)
			return err
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return float64(m) / time.Since(began).Seconds()
}
