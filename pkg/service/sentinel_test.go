package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/testkit/redistest"
)

// failoverBound is how long the test gives the sentinels to notice the dead master (1 s of
// down-after-milliseconds), agree (quorum 2), elect a leader and promote the replica: a few
// seconds on an idle machine, more on a loaded one.
const failoverBound = 45 * time.Second

// A service configured with the sentinel settings finds the master through the sentinels,
// and after the master is killed (kill -9) it carries on against the replica the sentinels
// promote, with what it wrote before the failover still there, with no restart and no
// operator step.
func TestRedisClientFollowsASentinelFailover(t *testing.T) {
	sen := redistest.OwnSentinel(t)
	cfg, err := config.Load(map[string]string{
		"MSGX_PG_DSN":                "postgres://nobody@127.0.0.1:1/none", // the pool connects lazily; never used here
		"MSGX_MYSQL_DSN":             "nobody@tcp(127.0.0.1:1)/none",
		"MSGX_REDIS_SENTINEL_MASTER": sen.Master,
		"MSGX_REDIS_SENTINEL_ADDRS":  strings.Join(sen.Addrs, ","),
	}, config.ServicePump)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := baseRedis(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	first, err := sen.MasterAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := serverAddr(ctx, t, rdb); got != first {
		t.Fatalf("the client talks to %s, the sentinels name %s as master", got, first)
	}
	if err := rdb.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Wait for the replica to hold the write, so that the failover cannot lose it: the lost
	// tail of an asynchronous failover is the consistency sentinel's case, not this test's.
	if n, err := rdb.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n < 1 {
		t.Fatalf("WAIT 1: %d replicas, %v", n, err)
	}

	killed := sen.KillMaster(t)
	promoted := sen.WaitFailover(t, killed, failoverBound)

	// The client finds the new master on its own: writes fail while there is none, and
	// succeed again within the bound, against the promoted replica.
	deadline := time.Now().Add(failoverBound)
	var failed int
	for {
		err := rdb.Set(ctx, "after", "2", 0).Err()
		if err == nil {
			break
		}
		failed++
		if time.Now().After(deadline) {
			t.Fatalf("no write succeeded within %s of the failover (%d failed): %v", failoverBound, failed, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := serverAddr(ctx, t, rdb); got != promoted {
		t.Fatalf("after the failover the client talks to %s, the sentinels name %s", got, promoted)
	}
	for k, want := range map[string]string{"before": "1", "after": "2"} {
		got, err := rdb.Get(ctx, k).Result()
		if err != nil || got != want {
			t.Errorf("GET %s = %q, %v; want %q", k, got, err, want)
		}
	}
	t.Logf("master %s killed, %s promoted; %d writes failed in between", killed, promoted, failed)
}

// serverAddr is the address of the server the client's connection reaches, from the server's
// own INFO (its tcp_port; every node of the harness listens on 127.0.0.1).
func serverAddr(ctx context.Context, t *testing.T, rdb *redis.Client) string {
	t.Helper()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if p, ok := strings.CutPrefix(line, "tcp_port:"); ok {
			return net.JoinHostPort("127.0.0.1", p)
		}
	}
	t.Fatal(errors.New("INFO server has no tcp_port"))
	return ""
}

// Sentinel addresses that name no sentinel (here a plain Redis, which does not know the
// SENTINEL command) are the settings' fault: the service stops at start-up naming the
// variable, as it does for a wrong password, instead of retrying what cannot mend.
func TestRedisSentinelAddressesOfNoSentinelAreRefusedAtStartUp(t *testing.T) {
	plain := redistest.New(t)
	cfg := config.Default()
	cfg.PG.DSN = "postgres://nobody@127.0.0.1:1/none" // the pool connects lazily; never used here
	cfg.Redis.Sentinel = config.RedisSentinel{Master: "msgxmaster", Addrs: []string{plain.Client.Options().Addr}}
	_, err := baseRedis(t, cfg)
	if !errors.Is(err, ErrSettingsRefused) || !strings.Contains(err.Error(), "MSGX_REDIS_SENTINEL_MASTER") {
		t.Fatalf("b.Redis() = %v, want the settings refused naming MSGX_REDIS_SENTINEL_MASTER", err)
	}
}

// baseRedis is Base.Redis of a Base built from cfg, as a service connects; the Base closes
// when the test ends.
func baseRedis(t *testing.T, cfg config.Config) (*redis.Client, error) {
	t.Helper()
	b, err := New(t.Context(), "test", cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b.Redis()
}
