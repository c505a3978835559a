package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
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
	e.startAll(t)
	e.waitAllRolesActive(t)
	w := e.newInboxWriter(t, "PGF", 2800)
	flights, nFlights := w.flights, len(w.flights)

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	pause, wrote := w.background(ctx, t, 300)
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

	if err := wrote(); err != nil {
		t.Fatal(err)
	}
	e.checkInOrder(t, flights, nFlights+w.written, false)
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

	for _, role := range stack.Services {
		if !strings.Contains(e.stack.Output(role), "PostgreSQL failed over") {
			t.Errorf("%s did not log the failover (pgfence's WARN)", role)
		}
	}

	zombie(t, e, r, w, flights, nFlights)
}

// zombie restarts the killed primary on its old data, a writable server of the old timeline
// listed first in the services' DSN, then restarts every service (fresh processes, which know
// no timeline yet) and sends more traffic. The fence (D-21) keeps every service on the
// promoted server: the zombie sees the services' connections arrive and turns them away, never
// a role's advisory lock, never a row written; the new traffic is processed on the promoted
// server in ID order as before.
func zombie(t *testing.T, e *env, r *pgtest.Replicated, w *inboxWriter, flights []traffic.Flight, nFlights int) {
	logMark := len(r.Primary.Log(t))
	r.RestartOld()
	// From now on the checks read the promoted server alone: the harness's multi-host pool
	// has no fence and would reach the zombie.
	e.pg = r.Standby.DB(t)
	zc := r.Primary.Connect(t)
	var rowsBefore, maxBefore int64
	if err := zc.QueryRow(t.Context(), `SELECT count(*), coalesce(max(msg_id), 0) FROM proc_state`).Scan(&rowsBefore, &maxBefore); err != nil {
		t.Fatal(err)
	}
	if _, err := zc.Exec(t.Context(), `CREATE TEMP TABLE zombie_probe (x int)`); err != nil {
		t.Fatalf("the zombie refused a write: the harness did not make a writable old primary: %v", err)
	}
	t.Logf("old primary restarted as a writable zombie (timeline %d) with %d messages of its own", r.Primary.Timeline(t), rowsBefore)

	// The advisory locks the roles take, sampled on the zombie all along.
	ctx, stop := context.WithCancel(t.Context())
	locks := make(chan int, 1)
	go func() {
		most := 0
		for ctx.Err() == nil {
			var n int
			if err := zc.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'`).Scan(&n); err == nil {
				most = max(most, n)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		locks <- most
	}()

	for _, role := range stack.Services {
		e.stack.Kill(role)
		if err := e.stack.Start(role, nil); err != nil {
			t.Fatal(err)
		}
	}
	e.waitAllRolesActiveWithin(t, failoverBound)
	// Later messages of the same flights, an hour on in DTTM.
	more := &inboxWriter{db: e.my, flights: flights, dttm: w.dttm.Add(time.Hour), seq: w.seq}
	if err := more.run(t.Context(), 60); err != nil {
		t.Fatal(err)
	}
	e.checkInOrder(t, flights, nFlights+w.written+more.written, false)
	stop()
	if most := <-locks; most != 0 {
		t.Errorf("the zombie held %d advisory locks: a role was taken on it", most)
	}
	var rowsAfter, maxAfter, changed int64
	if err := zc.QueryRow(t.Context(), `SELECT count(*), coalesce(max(msg_id), 0) FROM proc_state`).Scan(&rowsAfter, &maxAfter); err != nil {
		t.Fatal(err)
	}
	// Crash recovery reset the zombie's statistics: any insert, update or delete since would
	// count here.
	if err := zc.QueryRow(t.Context(), `SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables`).Scan(&changed); err != nil {
		t.Fatal(err)
	}
	if rowsAfter != rowsBefore || maxAfter != maxBefore || changed != 0 {
		t.Errorf("the zombie was written to: proc_state %d rows up to %d, then %d up to %d; %d rows changed",
			rowsBefore, maxBefore, rowsAfter, maxAfter, changed)
	}
	var told int
	for _, role := range stack.Services {
		if strings.Contains(e.stack.Output(role), "refusing a writable server on an old timeline") {
			told++
		}
	}
	if told == 0 {
		t.Error("no service logged the zombie it refused (pgfence's ERROR)")
	}
	attempts := strings.Count(r.Primary.Log(t)[logMark:], "application_name=msgx-leader")
	if attempts == 0 {
		t.Error("no lock connection ever reached the zombie: the test did not put the fence to work")
	}
	t.Logf("with the zombie up: %d more messages processed on the promoted server; %d lock connections reached the zombie and were turned away; %d services logged the refusal",
		more.written, attempts, told)
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

// TestPostgresAsyncFailover makes the asynchronous failover's lost tail for certain: the
// replication is cut (pgtest's CutReplication) while the primary goes on processing, marking
// and publishing for some seconds, then the primary is killed and the standby is promoted
// without that tail. What is automatic: the services follow the promotion as in the synchronous case,
// and ingest detects the lost tail (rows marked in the inbox above the watermark PostgreSQL
// holds) and stops discovery with marked-above-watermark. What the operator does is the
// restore runbook from its step 3 (docs/runbooks.md, "PostgreSQL failover"): stop every
// service, `msgx-dispatcher version-floor`, start them, `resume`, walked here with the real
// binaries. The end state is the restore drill's: every row processed once more in ID order,
// SUCCEEDED, marked and delivered, each flight as the rows give it (its version at least the
// clean run's), and no consumer receives a flight's version below one it had.
func TestPostgresAsyncFailover(t *testing.T) {
	r := pgtest.OwnReplicated(t, pgtest.Async)
	e := newEnvWith(t, binaries(t), mysqltest.New(t), r.DB(t))
	e.startAll(t)
	e.waitAllRolesActive(t)
	w := e.newInboxWriter(t, "PGA", 3800)
	flights, nFlights := w.flights, len(w.flights)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	pause, wrote := w.background(ctx, t, 200)
	pause(3 * time.Second)

	r.CutReplication()
	var atPause int64
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(max(msg_id), 0) FROM proc_state WHERE state = 'SUCCEEDED'`).Scan(&atPause); err != nil {
		t.Fatal(err)
	}
	// The tail the standby will not have: processed, marked in the inbox and published.
	var marked int64
	testwait.For(t, 30*time.Second, "rows processed and marked on the primary alone", func() bool {
		return e.my.Admin.QueryRowContext(t.Context(), `SELECT count(*) FROM cminmsgs WHERE CMINMSGS_ID > ? AND CMINMSGS_DATE_PROCESSED IS NOT NULL`, atPause).
			Scan(&marked) == nil && marked >= 20
	})
	r.KillPrimary()
	r.Standby.Resume()
	r.Promote()
	var lostTo int64
	if err := r.Standby.Connect(t).QueryRow(t.Context(), `SELECT coalesce(max(msg_id), 0) FROM proc_state WHERE state = 'SUCCEEDED'`).Scan(&lostTo); err != nil {
		t.Fatal(err)
	}
	t.Logf("primary killed with rows above %d processed and %d of them marked; the promoted standby holds processing up to %d", atPause, marked, lostTo)
	if lostTo > atPause {
		t.Fatalf("the promoted standby holds processing up to %d, beyond the cut at %d: no tail was lost", lostTo, atPause)
	}

	// Automatic: the services follow, and ingest finds the lost tail.
	e.waitAllRolesActiveWithin(t, failoverBound)
	var violation string
	testwait.For(t, 2*time.Minute, "ingest to report marked-above-watermark", func() bool {
		st, err := e.status(t.Context())
		if err != nil || st.GetDiscovery().GetContractViolation() == nil {
			return false
		}
		violation = st.GetDiscovery().GetContractViolation().GetKind()
		return violation == controlv1.KindMarkedAboveWatermark
	})
	if err := wrote(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ingest stopped discovery: %s; the writer wrote %d rows", violation, w.written)

	// The operator: the restore runbook from step 3.
	for _, role := range stack.Services {
		e.stack.Stop(role, 10*time.Second)
	}
	if err := e.stack.StartBinary("version-floor", "msgx-dispatcher", []string{"version-floor"}); err != nil {
		t.Fatal(err)
	}
	if code, out := e.exited(t, 3*time.Minute, "version-floor"); code != 0 {
		t.Fatalf("version-floor exited %d:\n%s", code, out)
	}
	for _, role := range stack.Services {
		if err := e.stack.Start(role, nil); err != nil {
			t.Fatal(err)
		}
	}
	client, cctx := e.control(t)
	// Control may answer as a standby for a moment after its restart (Unavailable): an operator
	// sends the call again.
	resolve := func(req *controlv1.ResolveContractViolationRequest) *controlv1.ResolveContractViolationResponse {
		t.Helper()
		var resp *controlv1.ResolveContractViolationResponse
		var err error
		testwait.For(t, time.Minute, "control to take the resolution", func() bool {
			resp, err = client.ResolveContractViolation(cctx, req)
			return status.Code(err) != codes.Unavailable
		})
		if err != nil {
			t.Fatalf("resolve (dry run %v): %v", req.DryRun, err)
		}
		return resp
	}
	req := &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
		Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, DryRun: true, Comment: "asynchronous failover"}
	dry := resolve(req)
	req.DryRun, req.Since, req.Comment = false, dry.GetResolved().GetSince(), "asynchronous failover: resume above the version floor"
	resolve(req)

	e.checkInOrder(t, flights, nFlights+w.written, true)
	e.checkNoVersionBackwards(t)
	st, err := e.status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v := st.GetDiscovery().GetContractViolation(); v != nil {
		t.Errorf("after resume discovery still reports %v", v)
	}
}
