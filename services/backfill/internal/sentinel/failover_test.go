package sentinel_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/services/backfill/internal/sentinel"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
)

// A Redis master under Sentinel dies (kill -9) with writes it acknowledged but never passed to
// its replica: the promoted replica lacks a flight the pump created and holds an older state of
// one it updated. The backfill's poll (CheckLoss), with the client msgx-backfill builds from
// the sentinel settings, sees another server under the projection and requests a rebuild of
// the whole projection; the rebuild repairs both from PostgreSQL, the next check is clean, and
// the drift alert's streak stays at 0.
//
// Asynchronous replication loses such a tail only in a window no test can hit at will (the
// bytes must still be in the old master's output buffer when it dies): the test kills the
// master for real and makes the lost tail on the promoted replica by hand, as it would be.
func TestFailoverLostWritesAreRepaired(t *testing.T) {
	t.Parallel()
	sen := redistest.OwnSentinel(t)
	client, err := service.NewRedisClient(config.Redis{Timeout: 2 * time.Second, Sentinel: config.RedisSentinel{Master: sen.Master, Addrs: sen.Addrs}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	const prefix = "msgxt:failover:"
	e := &env{pg: pgtest.New(t), reg: prometheus.NewRegistry()}
	e.sess = e.pg.Session(t)
	e.proj = projection.New(client, prefix, 2*time.Second)
	e.s = sentinel.New(configWith(2), e.proj, testclock.New(t0), slog.New(slog.NewTextHandler(io.Discard, nil)), e.reg)
	ctx := t.Context()

	e.save(t, mk("F1", 1, map[string]string{"FLNO": "CA1"}), mk("F2", 1, map[string]string{"FLNO": "CA2"}),
		mk("F3", 1, map[string]string{"FLNO": "CA3"}), mk("F4", 1, map[string]string{"FLNO": "CA4"}))
	// The first poll: no sentinel key yet (a first start), a rebuild, and the server noted.
	first, err := e.s.CheckLoss(ctx, e.sess)
	if err != nil || first == 0 {
		t.Fatalf("first CheckLoss = %d, %v; want the first start's rebuild", first, err)
	}
	e.runJob(t, e.s, first)
	if id, err := e.s.CheckLoss(ctx, e.sess); err != nil || id != 0 {
		t.Fatalf("CheckLoss on the same server = %d, %v; want nothing requested", id, err)
	}
	if n, err := client.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n < 1 {
		t.Fatalf("WAIT 1: %d replicas, %v", n, err)
	}
	old, err := client.Get(ctx, projection.FlightKey(prefix, "F2")).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The tail: F2 updated and F5 created, both in PostgreSQL and on the master.
	e.save(t, mk("F2", 2, map[string]string{"FLNO": "CA2", "REMC": "DELAYED"}), mk("F5", 1, map[string]string{"FLNO": "CA5"}))

	killed := sen.KillMaster(t)
	promoted := sen.WaitFailover(t, killed, 45*time.Second)
	direct := sen.Client(promoted)
	t.Cleanup(func() { _ = direct.Close() })
	for _, err := range []error{
		direct.Del(ctx, projection.FlightKey(prefix, "F5")).Err(), direct.HDel(ctx, projection.VersionKey(prefix), "F5").Err(),
		direct.Set(ctx, projection.FlightKey(prefix, "F2"), old, 0).Err(), direct.HSet(ctx, projection.VersionKey(prefix), "F2", 1).Err(),
	} {
		if err != nil {
			t.Fatalf("making the lost tail on the promoted master %s: %v", promoted, err)
		}
	}

	// The poll may meet the failover's last moments (a connection to the dead master): it
	// decides nothing then and looks again at the next poll, as in production.
	var id int64
	deadline := time.Now().Add(30 * time.Second)
	for {
		if id, err = e.s.CheckLoss(ctx, e.sess); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the poll never reached the promoted master: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if id == 0 {
		t.Fatal("CheckLoss requested nothing after the failover: the lost tail would wait for the daily sample")
	}
	j := e.runJob(t, e.s, id)
	if j.RequestedBy != sentinel.SwitchRequester || !j.All() || j.DryRun {
		t.Errorf("the job after the failover: %+v", j)
	}
	if want := (jobs.RebuildCounts{Missing: 1, Stale: 1, Repaired: 2}); j.Counts != want {
		t.Errorf("the job after the failover found %+v, want %+v", j.Counts, want)
	}
	if res := e.check(t); res.Found() != 0 || res.Checked != 5 {
		t.Fatalf("after the repair the projection is not PostgreSQL's: %s", res)
	}
	if id, err := e.s.CheckLoss(ctx, e.sess); err != nil || id != 0 {
		t.Errorf("CheckLoss on the promoted master again = %d, %v; want nothing requested", id, err)
	}
	if got := gauge(t, e.reg, "msgx_projection_check_drift_streak"); got != 0 {
		t.Errorf("drift streak %v, want 0: the alert would fire", got)
	}
	obs, err := projection.New(direct, prefix, 2*time.Second).Observe(ctx, []string{"F2", "F5"})
	if err != nil {
		t.Fatal(err)
	}
	if obs[0].Version != 2 || obs[1].Version != 1 || obs[1].Doc == nil {
		t.Errorf("on the promoted master: F2 v%d, F5 v%d doc %q", obs[0].Version, obs[1].Version, obs[1].Doc)
	}
}
