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

// Key is the advisory lock key of a role. It must never change: two versions of a service that
// computed different keys would both hold "the" lock during a rolling deploy.
func Key(role Role) int64 {
	h := fnv.New64a()
	h.Write([]byte("msgx/role/" + role))
	return int64(h.Sum64())
}
