package leader

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Session is one held term: the lock connection, valid until the work function returns.
type Session struct {
	role  Role
	conn  *pgx.Conn
	pid   uint32
	since time.Time
	// checkTimeout bounds one short statement of the session's own (a blocked state's report)
	// and the wait for the connection at the term's end: a connection check's bound.
	checkTimeout time.Duration
	lose         func(error) // cancels the term with cause err and marks the elector standby

	// sem serialises use of conn (pgx.Conn is not safe for concurrent use) between the work and
	// the periodic check. A channel rather than a sync.Mutex so that waiting honours ctx.
	sem   chan struct{}
	ended bool // guarded by sem
}

// Role is the role the term holds.
func (s *Session) Role() Role { return s.role }

// PID is the backend process id of the lock connection.
func (s *Session) PID() uint32 { return s.pid }

// Since is when the term began.
func (s *Session) Since() time.Time { return s.since }

// Do gives fn exclusive use of the lock connection. Writes that must be fenced run here: if the
// lock is lost the connection is gone and they cannot commit. fn runs between the periodic
// checks, so it should be short and only talk to the database (see the package documentation
// on the lease). If fn fails and the connection is closed, the term is over: the error wraps
// ErrLost and the work's context is cancelled. Once the term has ended, Do returns an error
// wrapping ErrLost without calling fn.
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
	if s.ended {
		return fmt.Errorf("%w: the term has ended", ErrLost)
	}
	if s.conn.IsClosed() {
		err := fmt.Errorf("%w: lock connection closed", ErrLost)
		s.lose(err)
		return err
	}
	err := fn(s.conn)
	if err != nil && s.conn.IsClosed() {
		err = fmt.Errorf("%w: lock connection closed: %w", ErrLost, err)
		s.lose(err)
	}
	return err
}

// Tx runs fn in a transaction on the lock connection, under Do, with db.WithTx's rules: it
// commits when fn returns nil and rolls back otherwise, and never commits on an ended ctx nor
// rolls back on it (either would make pgx close the connection, and with it the lock).
func (s *Session) Tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.Do(ctx, func(conn *pgx.Conn) error { return db.WithTx(ctx, db.Pipelined(conn, nil), fn) })
}

// end marks the session ended, so that a goroutine the work left behind cannot use the
// connection once the lock is released. A goroutine stuck holding the connection (a query on a
// dead network) is cut off by closing the socket, which is safe from any goroutine.
func (s *Session) end(log *slog.Logger) {
	t := time.NewTimer(s.checkTimeout)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		s.ended = true
		<-s.sem
	case <-t.C:
		log.Warn("leader: lock connection still in use after the term; cutting it off")
		s.cut()
		// The holder of sem will see the closed connection; ended stays unset but every later
		// Do finds the connection closed and returns ErrLost.
	}
}

// cut closes the lock connection's socket. Unlike pgx.Conn.Close it is safe while another
// goroutine is using the connection, which then fails and finds it closed.
func (s *Session) cut() {
	if nc := s.conn.PgConn().Conn(); nc != nil {
		_ = nc.Close()
	}
}
