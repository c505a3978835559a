package chaos_test

import (
	"testing"

	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/tools/chaos"
)

// withReplicatedPG puts tg's PostgreSQL on a synchronous primary and standby of the run's own
// on loopback (pgtest.OwnReplicated), reached through the multi-host DSN with
// target_session_attrs=read-write, in place of the one database: the services, the harness and
// its PostgreSQL faults follow each promotion. Synchronous, because that is the failover the
// gateway must ride out with nothing lost and no operator step (issue #55); the asynchronous
// one is the restore drill's case (tools/e2e TestPostgresAsyncFailover).
func withReplicatedPG(t *testing.T, tg chaos.Target) chaos.Target {
	t.Helper()
	r := pgtest.OwnReplicated(t, pgtest.Sync)
	tg.PGDSN = r.DSN()
	tg.PGAdminDSN = maintenanceDSN(t, r.DSN())
	tg.PGReplicated = &chaos.PGTarget{Nodes: r}
	return tg
}
