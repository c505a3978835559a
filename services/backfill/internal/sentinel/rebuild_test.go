package sentinel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/services/backfill/internal/sentinel"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// request registers a job as the control API does.
func (e *env) request(t *testing.T, spec jobs.RebuildSpec) jobs.RebuildJob {
	t.Helper()
	spec.RequestedBy = "test"
	j, existing, err := jobs.RequestRebuild(t.Context(), e.pg.Pool, spec, t0)
	if err != nil || existing {
		t.Fatalf("request rebuild: %v (existing %v)", err, existing)
	}
	return j
}

// runJob executes the open job to its end and returns its row.
func (e *env) runJob(t *testing.T, s *sentinel.Sentinel, id int64) jobs.RebuildJob {
	t.Helper()
	if err := s.RunJobs(t.Context(), e.sess); err != nil {
		t.Fatal(err)
	}
	j, err := jobs.Rebuilds.Get(t.Context(), e.pg.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != jobs.StateDone {
		t.Fatalf("job %d ended %s: %+v", id, j.State, j)
	}
	return j
}

// dump is every key of the test's Redis with its value, to show a dry run changes nothing.
func (e *env) dump(t *testing.T) map[string]string {
	t.Helper()
	ctx, c := t.Context(), e.rd.Client
	out := map[string]string{}
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if typ := c.Type(ctx, k).Val(); typ == "hash" {
			out[k] = fmt.Sprint(c.HGetAll(ctx, k).Val())
		} else {
			out[k] = c.Get(ctx, k).Val()
		}
	}
	return out
}

func wantCounts(t *testing.T, j jobs.RebuildJob, want jobs.RebuildCounts) {
	t.Helper()
	if j.Counts != want {
		t.Errorf("job %d counts %+v, want %+v", j.ID, j.Counts, want)
	}
}

// The drifts of TestDriftFoundAndRepaired, found through a rebuild job: a dry run reports them
// and leaves Redis byte for byte as it was; the rebuild repairs every one (extra keys removed)
// and records its counts and progress; a second rebuild finds nothing; after a FLUSHDB the
// rebuild writes the whole projection again.
func TestRebuildReportsDryRunAndRepairs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	s := e.s
	e.save(t,
		mk("A1", 2, map[string]string{"FLNO": "CA1"}), mk("A2", 3, map[string]string{"FLNO": "CA2"}),
		mk("A3", 5, map[string]string{"FLNO": "CA3"}), mk("A4", 1, map[string]string{"FLNO": "CA4"}),
		mk("A5", 2, map[string]string{"FLNO": "CA5"}), mk("A6", 1, map[string]string{"FLNO": "CA6"}),
		mk("A7", 1, map[string]string{"FLNO": "CA7"}))
	c, ctx, p := e.rd.Client, t.Context(), e.rd.Prefix
	for _, err := range []error{
		c.Del(ctx, projection.FlightKey(p, "A1")).Err(),                     // missing document
		c.Set(ctx, projection.FlightKey(p, "A2"), `{"FLID":"A2"}`, 0).Err(), // content
		c.HSet(ctx, projection.VersionKey(p), "A3", 4).Err(),                // version lowered
		c.HSet(ctx, projection.VersionKey(p), "A4", 9).Err(),                // version raised
		c.Set(ctx, projection.FlightKey(p, "X9"), `{"FLID":"X9"}`, 0).Err(), // a flight PG does not have
		c.HSet(ctx, projection.VersionKey(p), "X9", 3).Err(),                // ... with its version entry
		c.HSet(ctx, projection.VersionKey(p), "X8", 3).Err(),                // a version entry only
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	found := jobs.RebuildCounts{Missing: 1, Content: 1, Stale: 2, Extra: 2}

	before := e.dump(t)
	dry := e.runJob(t, s, e.request(t, jobs.RebuildSpec{DryRun: true}).ID)
	wantCounts(t, dry, found)
	if dry.Done != 7 || dry.Total != 7 {
		t.Errorf("dry run compared %d of %d flights, want 7 of 7", dry.Done, dry.Total)
	}
	if after := e.dump(t); !maps.Equal(before, after) {
		t.Fatalf("the dry run changed Redis:\nbefore %v\nafter  %v", before, after)
	}
	if got := plainCounter(t, e.reg, "msgx_projection_repaired_total"); got != 0 {
		t.Errorf("repaired counter %v after a dry run", got)
	}

	j := e.runJob(t, s, e.request(t, jobs.RebuildSpec{}).ID)
	found.Repaired = 6
	wantCounts(t, j, found)
	if got := gauge(t, e.reg, "msgx_projection_check_drift_streak"); got != 0 {
		t.Errorf("streak %v after a dry run and a repair of everything found, want 0 (the runbook must not page)", got)
	}
	if n := c.Exists(ctx, projection.FlightKey(p, "X9")).Val(); n != 0 {
		t.Error("the extra document X9 is still there")
	}
	if v := c.HExists(ctx, projection.VersionKey(p), "X8").Val(); v {
		t.Error("the extra version entry X8 is still there")
	}
	obs, err := e.proj.Observe(ctx, []string{"A3", "A4"})
	if err != nil {
		t.Fatal(err)
	}
	if obs[0].Version != 5 || obs[1].Version != 1 {
		t.Errorf("versions after the rebuild: A3 %d, A4 %d; want PostgreSQL's 5 and 1", obs[0].Version, obs[1].Version)
	}

	again := e.runJob(t, s, e.request(t, jobs.RebuildSpec{}).ID)
	wantCounts(t, again, jobs.RebuildCounts{})
	if got := gauge(t, e.reg, "msgx_projection_check_drift_streak"); got != 0 {
		t.Errorf("streak %v after a clean rebuild, want 0", got)
	}

	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	flushed := e.runJob(t, s, e.request(t, jobs.RebuildSpec{}).ID)
	wantCounts(t, flushed, jobs.RebuildCounts{Missing: 7, Repaired: 7})
	if res := e.check(t); res.Found() != 0 {
		t.Fatalf("after rebuilding a flushed Redis: %s", res)
	}
}

// A job of some FLIDs compares those only, and removes the keys of one PostgreSQL does not have;
// a FLID unknown everywhere is no drift.
func TestRebuildOfSomeFLIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	e.save(t, mk("B1", 1, map[string]string{"FLNO": "CA1"}), mk("B2", 1, map[string]string{"FLNO": "CA2"}),
		mk("B3", 1, map[string]string{"FLNO": "CA3"}))
	c, ctx, p := e.rd.Client, t.Context(), e.rd.Prefix
	for _, flid := range []string{"B1", "B3"} {
		if err := c.Del(ctx, projection.FlightKey(p, flid)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, projection.FlightKey(p, "Y1"), `{}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	j := e.runJob(t, e.s, e.request(t, jobs.RebuildSpec{FLIDs: []string{"Y1", "B1", "NOPE", "B2"}}).ID)
	wantCounts(t, j, jobs.RebuildCounts{Missing: 1, Extra: 1, Repaired: 2})
	if j.Done != 4 || j.Total != 4 {
		t.Errorf("done %d of %d, want 4 of 4", j.Done, j.Total)
	}
	if c.Exists(ctx, projection.FlightKey(p, "B3")).Val() != 0 {
		t.Error("B3 was outside the scope but was rewritten")
	}
	if c.Exists(ctx, projection.FlightKey(p, "Y1")).Val() != 0 || c.Exists(ctx, projection.FlightKey(p, "B1")).Val() != 1 {
		t.Error("Y1 not removed or B1 not rewritten")
	}
}

// A job interrupted mid-way (the backfill's context cancelled, then a new process with a new
// sentinel) resumes from its cursor: every flight is compared once more at most, and the job ends
// with all of them rewritten.
func TestRebuildResumesAfterInterrupt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4)
	var fs []flight.Flight
	for i := range 22 {
		fs = append(fs, mk(fmt.Sprintf("R%02d", i), 1, map[string]string{"FLNO": fmt.Sprintf("CA%d", i)}))
	}
	e.save(t, fs...)
	if err := e.rd.Client.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	id := e.request(t, jobs.RebuildSpec{}).ID
	for range 3 { // start, then two pages of 4
		if _, more, err := e.s.Step(t.Context(), e.sess); err != nil || !more {
			t.Fatalf("step: more %v, %v", more, err)
		}
	}
	// The process is stopped in the middle of a step: nothing of that step is recorded.
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := e.s.Step(cancelled, e.sess); err == nil {
		t.Fatal("a step on a cancelled context succeeded")
	}
	mid, err := jobs.Rebuilds.Get(t.Context(), e.pg.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if mid.State != jobs.StateRunning || mid.Done != 8 || mid.Cursor != "R07" || mid.Total != 22 {
		t.Fatalf("interrupted job: %+v", mid)
	}
	// A new backfill process: a new sentinel, a new connection.
	e.sess = e.pg.Session(t)
	s2 := sentinel.New(configWith(4), e.proj, testclock.New(t0), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	j := e.runJob(t, s2, id)
	if j.Done != 22 || j.Total != 22 {
		t.Errorf("done %d of %d, want 22 of 22", j.Done, j.Total)
	}
	wantCounts(t, j, jobs.RebuildCounts{Missing: 22, Repaired: 22})
	if res := e.check(t); res.Found() != 0 {
		t.Fatalf("after the resumed rebuild: %s", res)
	}
}

// Cancelling a running job stops it at its next step; what it repaired stays repaired.
func TestRebuildCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	e.save(t, mk("K1", 1, nil), mk("K2", 1, nil), mk("K3", 1, nil), mk("K4", 1, nil), mk("K5", 1, nil))
	if err := e.rd.Client.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	id := e.request(t, jobs.RebuildSpec{}).ID
	for range 2 {
		if _, _, err := e.s.Step(t.Context(), e.sess); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := jobs.Rebuilds.Cancel(t.Context(), e.pg.Pool, id, jobs.Cancellation{By: "op"}, t0); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RunJobs(t.Context(), e.sess); err != nil {
		t.Fatal(err)
	}
	j, err := jobs.Rebuilds.Get(t.Context(), e.pg.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != jobs.StateCancelled || j.Done != 2 || j.Counts.Repaired != 2 {
		t.Fatalf("cancelled job: %+v", j)
	}
	if e.rd.Client.Exists(t.Context(), projection.FlightKey(e.rd.Prefix, "K1")).Val() != 1 {
		t.Error("the page done before the cancel was not kept")
	}
}

// A rebuild while the pump keeps writing newer versions of other flights ends with no drift, and no version the pump wrote is ever lowered: a watcher reads the version
// entries of the live flights throughout and fails on any decrease.
func TestRebuildDuringLiveTraffic(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	var fs []flight.Flight
	for i := range 12 {
		fs = append(fs, mk(fmt.Sprintf("L%02d", i), 1, map[string]string{"FLNO": fmt.Sprintf("CA%d", i)}))
	}
	e.save(t, fs...)
	c, ctx, p := e.rd.Client, t.Context(), e.rd.Prefix
	// Drift on the even ones; the pump keeps writing the odd ones.
	for i := 0; i < 12; i += 2 {
		if err := c.Del(ctx, projection.FlightKey(p, fmt.Sprintf("L%02d", i))).Err(); err != nil {
			t.Fatal(err)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	pumpErr := make(chan error, 2)
	wg.Add(2)
	go func() { // the pump: lock, commit a newer version, project it (compare-and-set), unlock
		defer wg.Done()
		pumpErr <- e.pump(stop, 12)
	}()
	go func() { // the watcher of the live flights' versions
		defer wg.Done()
		last := map[string]int64{}
		for {
			select {
			case <-stop:
				pumpErr <- nil
				return
			default:
			}
			vals, err := c.HGetAll(context.Background(), projection.VersionKey(p)).Result()
			if err != nil {
				pumpErr <- err
				return
			}
			for flid, s := range vals {
				var v int64
				fmt.Sscan(s, &v)
				if v < last[flid] {
					pumpErr <- fmt.Errorf("version of %s went from %d back to %d", flid, last[flid], v)
					return
				}
				last[flid] = v
			}
		}
	}()
	// The pump is under way: the first flight it writes (L01) is projected above version 1.
	testwait.For(t, 10*time.Second, "the pump's first write projected", func() bool {
		v, err := c.HGet(ctx, projection.VersionKey(p), "L01").Int64()
		return err == nil && v > 1
	})
	for i := range 3 { // rebuilds of the whole projection while it writes
		j := e.runJob(t, e.s, e.request(t, jobs.RebuildSpec{}).ID)
		want := jobs.RebuildCounts{}
		if i == 0 {
			want = jobs.RebuildCounts{Missing: 6, Repaired: 6}
		}
		wantCounts(t, j, want)
	}
	close(stop)
	wg.Wait()
	close(pumpErr)
	for err := range pumpErr {
		if err != nil {
			t.Fatal(err)
		}
	}
	dry := e.runJob(t, e.s, e.request(t, jobs.RebuildSpec{DryRun: true}).ID)
	wantCounts(t, dry, jobs.RebuildCounts{})
	var maxVersion int64
	if err := e.pg.Pool.QueryRow(ctx, `SELECT max(state_version) FROM flight_schd`).Scan(&maxVersion); err != nil {
		t.Fatal(err)
	}
	if maxVersion < 3 {
		t.Fatalf("the pump wrote only up to version %d: the test did not overlap with traffic", maxVersion)
	}
}

// pump simulates the pump on the odd ones of n flights until stop is closed, between two
// messages: under the pipeline lock (held on its own connection from the domain transaction to
// the projection write, as the real pump does) it commits the next version of a flight and
// projects it with the compare-and-set.
func (e *env) pump(stop <-chan struct{}, n int) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.pg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		case <-time.After(2 * time.Millisecond):
		}
		flid := fmt.Sprintf("L%02d", 2*(i%(n/2))+1)
		if err := pgtest.LockPipeline(ctx, conn); err != nil {
			return err
		}
		err := db.WithTx(ctx, conn, func(tx pgx.Tx) error {
			f, err := flightstore.ReadPublished(ctx, tx, flid)
			if err != nil {
				return err
			}
			f.Version++
			f.Scalars["REMC"] = fmt.Sprintf("R%d", f.Version)
			return flightstore.SaveMany(ctx, tx, nil, []flight.Flight{*f})
		})
		if err == nil {
			var f *flight.Flight
			if f, err = flightstore.ReadPublished(ctx, conn, flid); err == nil {
				_, err = e.proj.Write(ctx, flight.Project([]flight.Flight{*f}))
			}
		}
		if err := errors.Join(err, leader.UnlockPipeline(ctx, conn)); err != nil {
			return err
		}
	}
}

func plainCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Redis not answering fails the step, not the job: the error is recorded on the job, which
// stays RUNNING, and the next run goes on from the cursor and clears it.
func TestRebuildOutageIsNotTheJobsFault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	e.save(t, mk("O1", 1, nil), mk("O2", 1, nil), mk("O3", 1, nil))
	if err := e.rd.Client.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	id := e.request(t, jobs.RebuildSpec{}).ID
	if _, _, err := e.s.Step(t.Context(), e.sess); err != nil { // started
		t.Fatal(err)
	}
	// The service's client options: the call's deadline bounds the wait (pkg/service).
	opts, err := redis.ParseURL(e.rd.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled, opts.MaxRetries = true, -1
	client := redis.NewClient(opts)
	defer client.Close()
	s := sentinel.New(configWith(2), projection.New(client, e.rd.Prefix, 500*time.Millisecond), testclock.New(t0),
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	// Every client waits 2s, longer than the projection's timeout.
	if err := e.rd.Client.Do(t.Context(), "CLIENT", "PAUSE", "2000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RunJobs(t.Context(), e.sess); err == nil {
		t.Fatal("a rebuild step succeeded while Redis did not answer")
	}
	j, err := jobs.Rebuilds.Get(t.Context(), e.pg.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != jobs.StateRunning || j.Error == "" || j.Done != 0 {
		t.Fatalf("after the failed step: %+v", j)
	}
	if err := e.rd.Client.Ping(t.Context()).Err(); err != nil { // answered once the pause ends
		t.Fatal(err)
	}
	j = e.runJob(t, s, id)
	if j.Error != "" || j.Done != 3 || j.Counts != (jobs.RebuildCounts{Missing: 3, Repaired: 3}) {
		t.Fatalf("after Redis came back: %+v", j)
	}
}

// The MsgxProjectionDrift runbook, step by step on the sentinel: a periodic check finds drift
// (streak 1), the operator's dry run counts it under mode="dry_run" and leaves the streak, the
// full repair resets it to 0, so the alert (streak >= 2) never fires on following the runbook.
// A repair of some FLIDs only did not look at the rest and leaves the streak too; a later check
// that finds drift again starts from 1.
func TestDriftStreakFollowsTheRunbook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	e.save(t, mk("R1", 1, map[string]string{"FLNO": "CA1"}), mk("R2", 1, map[string]string{"FLNO": "CA2"}),
		mk("R3", 1, map[string]string{"FLNO": "CA3"}))
	c, p := e.rd.Client, e.rd.Prefix
	damage := func(t *testing.T) {
		ctx := t.Context()
		for _, err := range []error{
			c.Del(ctx, projection.FlightKey(p, "R1")).Err(),
			c.Set(ctx, projection.FlightKey(p, "R2"), `{"FLID":"R2"}`, 0).Err(),
			c.Set(ctx, projection.FlightKey(p, "GHOST"), `{"FLID":"GHOST"}`, 0).Err(),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	type want struct {
		streak             float64
		check, dry, repair float64 // msgx_projection_drift_total{kind="missing",mode}
		extraDry           float64 // msgx_projection_drift_total{kind="extra",mode="dry_run"}
	}
	steps := []struct {
		name   string
		damage bool
		run    func(t *testing.T)
		want   want
	}{
		{"periodic check finds drift", true, func(t *testing.T) { e.check(t) }, want{1, 1, 0, 0, 0}},
		{"runbook dry run", true, func(t *testing.T) { e.runJob(t, e.s, e.request(t, jobs.RebuildSpec{DryRun: true}).ID) }, want{1, 1, 1, 0, 1}},
		{"runbook repair", false, func(t *testing.T) { e.runJob(t, e.s, e.request(t, jobs.RebuildSpec{}).ID) }, want{0, 1, 1, 1, 1}},
		{"clean dry run", false, func(t *testing.T) { e.runJob(t, e.s, e.request(t, jobs.RebuildSpec{DryRun: true}).ID) }, want{0, 1, 1, 1, 1}},
		{"drift again", true, func(t *testing.T) { e.check(t) }, want{1, 2, 1, 1, 1}},
		{"repair of one FLID", true, func(t *testing.T) { e.runJob(t, e.s, e.request(t, jobs.RebuildSpec{FLIDs: []string{"R1"}}).ID) }, want{1, 2, 1, 2, 1}},
		{"second check with drift", false, func(t *testing.T) { e.check(t) }, want{2, 2, 1, 2, 1}},
		{"full repair after it", false, func(t *testing.T) { e.runJob(t, e.s, e.request(t, jobs.RebuildSpec{}).ID) }, want{0, 2, 1, 2, 1}},
	}
	for _, st := range steps {
		if st.damage {
			damage(t)
		}
		st.run(t)
		got := want{
			streak:   gauge(t, e.reg, "msgx_projection_check_drift_streak"),
			check:    counter(t, e.reg, "msgx_projection_drift_total", "missing", sentinel.ModeCheck),
			dry:      counter(t, e.reg, "msgx_projection_drift_total", "missing", sentinel.ModeDryRun),
			repair:   counter(t, e.reg, "msgx_projection_drift_total", "missing", sentinel.ModeRepair),
			extraDry: counter(t, e.reg, "msgx_projection_drift_total", "extra", sentinel.ModeDryRun),
		}
		if got != st.want {
			t.Fatalf("%s: got %+v, want %+v", st.name, got, st.want)
		}
	}
}
