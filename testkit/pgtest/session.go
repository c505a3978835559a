package pgtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outage"
)

// cancelDelay is how long a cancelled query on a session's connection waits for the server to
// honour the cancel request before the connection is cut, as a role's lock connection does.
const cancelDelay = 5 * time.Second

// Session stands in for a role's term (leader.Session) in a test that needs no election. Its
// work runs on one dedicated connection of the test's database, never a pool's, one call at a
// time, and its transactions run as a term's do: db.WithTx over db.Pipelined on that
// connection, so a component under test takes the path it takes in production (R-LEADER-2).
// It satisfies every component's session interface (db.Doer, db.Txer, SetBlocked).
type Session struct {
	conn *pgx.Conn
	// sem serialises use of conn, as the term's does; a channel so that waiting honours ctx.
	sem chan struct{}

	mu      sync.Mutex
	blocked *outage.State
	reports int
}

// Session opens a Session on the test's database. Its connection closes when the test ends.
func (d *DB) Session(t testing.TB) *Session {
	t.Helper()
	return d.TracedSession(t, nil)
}

// TracedSession is Session with tracer (nil for none) on the connection, for a test that counts
// what the component sends (RoundTrips).
func (d *DB) TracedSession(t testing.TB, tracer pgx.QueryTracer) *Session {
	t.Helper()
	cfg, err := pgx.ParseConfig(d.DSN)
	if err != nil {
		t.Fatalf("pgtest: parse dsn: %v", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	cfg.Tracer = tracer
	// As on a lock connection: a cancelled context cancels the query and keeps the connection,
	// where pgx's default would cut it (and with it, in production, the role).
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelDelay}
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("pgtest: session connection to %s: %v", d.Name, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return &Session{conn: conn, sem: make(chan struct{}, 1)}
}

// Do gives fn exclusive use of the session's connection. As leader.Session.Do: a connection
// found closed, before fn or after it failed, is reported as leader.ErrLost.
func (s *Session) Do(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-s.sem }()
	if s.conn.IsClosed() {
		return fmt.Errorf("%w: lock connection closed", leader.ErrLost)
	}
	err := fn(s.conn)
	if err != nil && s.conn.IsClosed() {
		err = fmt.Errorf("%w: lock connection closed: %w", leader.ErrLost, err)
	}
	return err
}

// Tx runs fn in a transaction on the session's connection, under Do, exactly as
// leader.Session.Tx does.
func (s *Session) Tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.Do(ctx, func(conn *pgx.Conn) error { return db.WithTx(ctx, db.Pipelined(conn, nil), fn) })
}

// SetBlocked keeps the report for Blocked instead of writing role_holder: the session holds no
// role. A test that reads the blocked state from role_holder runs a real elector.
func (s *Session) SetBlocked(_ context.Context, b *outage.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked, s.reports = b, s.reports+1
	return nil
}

// Blocked is the state SetBlocked last reported (nil: working) and how many reports were made.
func (s *Session) Blocked() (*outage.State, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blocked, s.reports
}

// PID is the backend process id of the session's connection, for a test that terminates it.
func (s *Session) PID() uint32 { return s.conn.PgConn().PID() }
