package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen LISTENs on channel on a connection of its own to the test's database, as the
// services' notify.Listener does, and returns a function that reports whether a notification
// on channel arrived within wait. A notification is heard when the transaction that sent it
// commits, so a test can tell a commit's wake-up from none. The connection closes when the
// test ends.
func (d *DB) Listen(t testing.TB, channel string) func(wait time.Duration) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return func(wait time.Duration) bool {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		n, err := conn.WaitForNotification(ctx)
		return err == nil && n.Channel == channel
	}
}
