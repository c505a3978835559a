package pump_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/testkit/redistest"
)

// Redis under Sentinel loses its master (kill -9) while messages stream in: the pump waits
// the failover out as an outage (R-INV-6: nothing charged, nothing DEAD, each message applied
// once, in order) and goes on writing the projection to the promoted replica, with the client
// msgx-pump builds from the sentinel settings. A write the old master acknowledged but never
// passed on is the consistency sentinel's case (services/backfill/internal/sentinel,
// TestFailoverLostWritesAreRepaired); every flight here is written again after the failover,
// which rewrites its whole document, so the projection must equal PostgreSQL.
func TestRedisSentinelFailoverUnderTraffic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clkReal()
	e.shortBudget()
	sen := redistest.OwnSentinel(t)
	const timeout = 300 * time.Millisecond
	client, err := service.NewRedisClient(config.Redis{Timeout: timeout, Sentinel: config.RedisSentinel{Master: sen.Master, Addrs: sen.Addrs}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	const prefix = "msgxt:sentinel:"
	proj := projection.New(client, prefix, timeout)
	r := &outageRun{e: e, reg: prometheus.NewRegistry(), dependency: "redis"}
	e.start(t, "a", e.newPump(t, options{proj: proj, reg: r.reg}), nil)

	flids := []string{"8101", "8102", "8103", "8104"}
	var ids []int64
	for _, f := range flids {
		ids = append(ids, e.add(t, e.adft(f)))
	}
	remark := func(round int) {
		for _, f := range flids {
			ids = append(ids, e.add(t, e.remark(f, fmt.Sprintf("R%d", round))))
		}
	}
	// Traffic before the failover, written to the first master.
	for round := range 5 {
		remark(round)
		time.Sleep(50 * time.Millisecond)
	}
	e.waitState(t, ids[len(ids)-1], queue.Succeeded)

	killed := sen.KillMaster(t)
	failover := time.Now()
	// Traffic during the failover: the pump finds no master and reports the outage.
	round := 5
	blocked := false
	for !blocked && time.Since(failover) < failoverBound {
		remark(round)
		round++
		time.Sleep(50 * time.Millisecond)
		blocked = r.holderBlocked(t) != nil
	}
	if !blocked {
		t.Fatal("the pump never reported the Redis outage of the failover; the test proves nothing")
	}
	promoted := sen.WaitFailover(t, killed, failoverBound)
	t.Logf("master %s killed, %s promoted after %s", killed, promoted, time.Since(failover).Round(time.Millisecond))
	// Traffic after the failover, written to the new master.
	for end := round + 5; round < end; round++ {
		remark(round)
		time.Sleep(50 * time.Millisecond)
	}
	last := fmt.Sprintf("R%d", round-1)

	r.ids = ids
	r.noneCharged(t)
	r.blockedCleared(t)

	// The promoted master holds every flight at PostgreSQL's version, with the last remark.
	direct := sen.Client(promoted)
	t.Cleanup(func() { _ = direct.Close() })
	for _, f := range flids {
		raw, err := direct.Get(t.Context(), projection.FlightKey(prefix, f)).Result()
		if err != nil {
			t.Fatalf("flight %s on the promoted master: %v", f, err)
		}
		var doc struct {
			Version int64  `json:"STATE_VERSION"`
			Remark  string `json:"REMC"`
		}
		if err := json.Unmarshal([]byte(raw), &doc); err != nil {
			t.Fatalf("flight %s: %v (%q)", f, err, raw)
		}
		want := e.flightVersion(t, f)
		if doc.Version != want || doc.Remark != last {
			t.Errorf("flight %s on the promoted master: version %d remark %q, PostgreSQL has version %d remark %q", f, doc.Version, doc.Remark, want, last)
		}
		v, err := direct.HGet(t.Context(), projection.VersionKey(prefix), f).Int64()
		if err != nil || v != want {
			t.Errorf("version entry of %s: %d %v, want %d", f, v, err, want)
		}
	}
}

// failoverBound is how long the sentinels get to promote the replica (1 s of
// down-after-milliseconds, then the vote): a few seconds, more on a loaded machine.
const failoverBound = 45 * time.Second
