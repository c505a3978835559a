package leader

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/outage"
)

// Blocked is a holder's report that its work is paused by a dependency that does not answer.
type Blocked = outage.State

// SetBlocked records, under Do on the lock connection, that the term's role is blocked (b set)
// or working again (b nil), for GetStatus. Fenced like the heartbeat: it writes only the row of
// the term this connection holds, so a deposed holder cannot mark its successor.
//
// It is every role's outage.Loop Report, with one rule: the statement is bounded like a
// connection check, so a report never holds the lock connection near its lease, and a lost
// term reports nothing (nil): its successor starts unblocked.
func (s *Session) SetBlocked(ctx context.Context, b *Blocked) error {
	ctx, cancel := context.WithTimeout(ctx, s.checkTimeout)
	defer cancel()
	err := s.Do(ctx, func(conn *pgx.Conn) error { return setBlocked(ctx, conn, s.role, b) })
	if errors.Is(err, ErrLost) {
		return nil
	}
	return err
}

func setBlocked(ctx context.Context, conn *pgx.Conn, role Role, b *Blocked) error {
	var err error
	if b == nil {
		_, err = conn.Exec(ctx, `UPDATE role_holder SET blocked_on = NULL, blocked_since = NULL, blocked_error = NULL,
			blocked_msg_id = NULL, blocked_probes = 0
			WHERE role = $1 AND backend_pid = pg_backend_pid()`, role)
	} else {
		_, err = conn.Exec(ctx, `UPDATE role_holder SET blocked_on = $2, blocked_since = $3, blocked_error = $4,
			blocked_msg_id = nullif($5, 0), blocked_probes = $6
			WHERE role = $1 AND backend_pid = pg_backend_pid()`, role, b.Dependency, b.Since, b.LastError, b.MsgID, b.Probes)
	}
	if err != nil {
		return fmt.Errorf("leader: record %s blocked state: %w", role, err)
	}
	return nil
}
