package leader

import (
	"hash/fnv"
	"slices"
)

// Role is a role of the system: one single active instance each, elected on the role's own
// advisory lock, Key(role) (R-LEADER-1). Only the constants below are roles; New refuses any
// other value, so a misspelled role cannot elect on a lock of its own.
type Role string

// The roles, each one service.
const (
	Ingest     Role = "ingest"
	Pump       Role = "pump"
	Dispatcher Role = "dispatcher"
	Backfill   Role = "backfill"
	Control    Role = "control"
)

// Roles returns the roles in pipeline order.
func Roles() []Role { return []Role{Ingest, Pump, Dispatcher, Backfill, Control} }

// Known reports whether r is one of Roles. A role read back from role_holder may be unknown:
// one of a newer version.
func (r Role) Known() bool { return slices.Contains(Roles(), r) }

// The advisory lock keys, all here: a role's (Key) and the pipeline lock (pipelineLockKey).
// Neither may ever change: two versions of a service that computed different keys would both
// hold "the" lock during a rolling deploy, and a pump and a history sweep of different versions
// would no longer serialise. That is why the two are written differently and stay so: the
// pipeline key came first, as a literal, and rewriting it as a hash of its name would be that
// change. TestLockKeysArePinned pins every value and that no two are equal.

// Key is the advisory lock key of a role: the FNV-1a hash of "msgx/role/<role>".
func Key(role Role) int64 {
	h := fnv.New64a()
	h.Write([]byte("msgx/role/" + role))
	return int64(h.Sum64())
}

// pipelineLockKey is the pipeline lock of R-TX-5: it serialises the pump's processing step with
// the other writers of the flight tables and of their Redis projection (the history sweep and
// the consistency sentinel). It is no role lock: a role's holder takes it for one step at a
// time.
const pipelineLockKey int64 = 0x6d736778_00000001 // "msgx" + 1
