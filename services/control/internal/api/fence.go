package api

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/leader"
)

// ErrStandby means this instance does not hold the control role, so it may not write.
var ErrStandby = errors.New("this control instance is a standby")

// Term is the control role's current term as the handlers see it: the app sets the session
// while it holds the lock and clears it when the term ends. Mutating calls run their
// transaction on that session's lock connection (R-LEADER-2), so a call that races the loss
// of the lock fails to commit instead of writing from a deposed instance.
type Term struct {
	mu sync.Mutex
	s  *leader.Session
}

// Hold records the session of a new term.
func (t *Term) Hold(s *leader.Session) {
	t.mu.Lock()
	t.s = s
	t.mu.Unlock()
}

// Release forgets the session when the term ends.
func (t *Term) Release() { t.Hold(nil) }

// Tx runs fn in a transaction on the lock connection, or returns ErrStandby.
func (t *Term) Tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	t.mu.Lock()
	s := t.s
	t.mu.Unlock()
	if s == nil {
		return ErrStandby
	}
	return s.Tx(ctx, fn)
}

// Active reports whether this instance holds the role and can serve mutating calls now: the
// elector reports its lock a moment before it lends the session, and a call in that moment
// would be refused.
func (t *Term) Active() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.s != nil
}
