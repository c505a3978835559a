package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// failoverBound is how long the services get, after the standby is promoted, to hold every
// role on it again: a lock connection's retry, a pool's reconnect and a loaded machine.
const failoverBound = time.Minute

// TestPostgresSyncFailover runs the five services on a PostgreSQL primary with a synchronous
// standby (pgtest.OwnReplicated), named by the multi-host DSN with
// target_session_attrs=read-write, kills the primary with SIGKILL under traffic with a backlog
// in flight, and promotes the standby (pg_ctl promote). Synchronous replication loses nothing,
// so no operator step follows (docs/runbooks.md, "PostgreSQL failover"): every service finds
// the promoted server on its own and takes its role again (the advisory locks died with the
// old server), every row ends SUCCEEDED, marked and delivered, each flight is as the rows give
// it in ID order with one version per message, no contract violation stops ingest, and no
// consumer receives a flight's version below one it had.
func TestPostgresSyncFailover(t *testing.T) {
	r := pgtest.OwnReplicated(t, pgtest.Sync)
	e := newEnvWith(t, binaries(t), mysqltest.New(t), r.DB(t))
	for _, role := range stack.Services {
		if err := e.stack.Start(role, nil); err != nil {
			t.Fatal(err)
		}
	}
	e.waitAllRolesActive(t)

	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	dttm := day.Add(6 * time.Hour)
	const nFlights = 5
	flights := make([]traffic.Flight, nFlights)
	for i := range flights {
		flights[i] = traffic.Flight{FLID: fmt.Sprintf("PGF-%d", i), ALCD: "CA", FLNO: fmt.Sprintf("CA%d", 2800+i), MVIN: "D",
			SODT: day.Add(9 * time.Hour), FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
		now := time.Now()
		e.my.InsertInbox(t, traffic.ADFT(int64(i+1), dttm, flights[i]), &now)
	}

	watch := e.watchBlocked(t.Context())
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	w := &inboxWriter{db: e.my, flights: flights, dttm: dttm, seq: nFlights, burst: make(chan int), burstDone: make(chan struct{})}
	wrote := make(chan error, 1)
	go func() { wrote <- w.run(ctx, 300) }()
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case err := <-wrote:
			t.Fatalf("the writer ended before the failover: %v", err)
		}
	}
	pause(3 * time.Second)
	var before int
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_state WHERE state = 'SUCCEEDED'`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if before == 0 {
		t.Fatal("nothing processed before the failover: the traffic is not flowing")
	}
	// A backlog the pump is still working through when the primary dies.
	w.burst <- 40
	<-w.burstDone
	r.KillPrimary()
	killed := time.Now()
	t.Logf("primary killed (kill -9) with %d messages processed", before)
	pause(2 * time.Second)
	r.Promote()
	t.Logf("standby promoted %s after the kill", time.Since(killed).Round(time.Millisecond))
	promoted := time.Now()
	e.waitAllRolesActiveWithin(t, failoverBound)
	t.Logf("every role active again %s after the promotion", time.Since(promoted).Round(time.Millisecond))

	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	e.checkInOrder(t, flights, nFlights+w.written)
	t.Logf("GetStatus showed blocked: %v", watch.stop())
	if tl := r.Standby.Timeline(t); tl != 2 {
		t.Errorf("the services' server is on timeline %d, want the promoted standby's 2", tl)
	}
	st, err := e.status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v := st.GetDiscovery().GetContractViolation(); v != nil {
		t.Errorf("a synchronous failover left a contract violation: %v", v)
	}
	e.checkNoVersionBackwards(t)
	for _, role := range stack.Services {
		if _, exited := e.stack.Exited(role); exited {
			t.Errorf("%s exited during the failover: a service must wait for its database, not stop (docs/rules.md)", role)
		}
	}
}

// waitAllRolesActiveWithin is waitAllRolesActive with a bound of the caller's.
func (e *env) waitAllRolesActiveWithin(t *testing.T, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		got, err := e.activeRoles(t.Context())
		if err == nil && got == "backfill,control,dispatcher,ingest,pump" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every role active within %s: %q, %v", bound, got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkNoVersionBackwards checks what the consumer received on KAFKA:msg: per flight, in
// arrival order, no state version below one received before (a redelivery of the same event
// is allowed).
func (e *env) checkNoVersionBackwards(t *testing.T) {
	t.Helper()
	e.records.mu.Lock()
	defer e.records.mu.Unlock()
	for flid, ids := range e.records.byFLID {
		seen := map[int64]bool{}
		var top int64
		for _, id := range ids {
			rec := e.records.events[id]
			var v int64
			for _, h := range rec.Headers {
				if h.Key == kafkarecord.HeaderStateVersion {
					v, _ = strconv.ParseInt(string(h.Value), 10, 64)
				}
			}
			if v < top && !seen[id] {
				t.Errorf("flight %s: event %d with version %d after version %d", flid, id, v, top)
			}
			seen[id] = true
			top = max(top, v)
		}
	}
}
