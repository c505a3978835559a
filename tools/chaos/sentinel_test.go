package chaos_test

import (
	"testing"

	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/tools/chaos"
)

// withSentinel puts tg's Redis under Sentinel for the Redis failover: a master, its replica and
// three sentinels of the run's own on loopback (redistest.OwnSentinel), in place of the one
// server.
func withSentinel(t *testing.T, tg chaos.Target) chaos.Target {
	t.Helper()
	sen := redistest.OwnSentinel(t)
	tg.RedisURL = ""
	tg.RedisSentinel = &chaos.SentinelTarget{Master: sen.Master, Addrs: sen.Addrs, Nodes: sen}
	return tg
}
