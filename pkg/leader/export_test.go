package leader

import "time"

// PipelineLockKey is pipelineLockKey, for the test that pins every lock key.
const PipelineLockKey = pipelineLockKey

// The elector's state, for the tests of its terms; a service learns of its term from the
// Session that Run hands its work (Session.Since).

// Active reports whether this elector holds the lock right now.
func (e *Elector) Active() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur != nil
}

// Since is the start of the current term, zero while standing by.
func (e *Elector) Since() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		return time.Time{}
	}
	return e.cur.since
}
