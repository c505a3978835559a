package sentinel_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/services/backfill/internal/sentinel"
	"github.com/msgexchange/msgexchange/testkit/flights"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

type env struct {
	pg   *pgtest.DB
	rd   *redistest.Redis
	proj *projection.Projection
	sess *pgtest.Session
	reg  *prometheus.Registry
	s    *sentinel.Sentinel
}

// newEnv uses a Redis server of the test's own: the test flushes it.
func newEnv(t *testing.T, page int) *env {
	t.Helper()
	e := &env{pg: pgtest.New(t), rd: redistest.Own(t), reg: prometheus.NewRegistry()}
	e.sess = e.pg.Session(t)
	e.proj = projection.New(e.rd.Client, e.rd.Prefix, 2*time.Second)
	e.s = sentinel.New(configWith(page), e.proj, testclock.New(t0), slog.New(slog.NewTextHandler(io.Discard, nil)), e.reg)
	return e
}

// save writes flights to PostgreSQL and projects them as the pump does (compare-and-set).
func (e *env) save(t *testing.T, fs ...flight.Flight) {
	t.Helper()
	flights.Write(t, e.pg.Pool, fs...)
	var published []flight.Flight
	for _, f := range fs {
		p, err := flightstore.ReadPublished(t.Context(), e.pg.Pool, f.FLID)
		if err != nil {
			t.Fatal(err)
		}
		published = append(published, *p)
	}
	if _, err := e.proj.Write(t.Context(), flight.Project(published)); err != nil {
		t.Fatal(err)
	}
}

func mk(flid string, version int64, scalars map[string]string) flight.Flight {
	f := flight.New(flid)
	f.State, f.Version, f.CreatedAt, f.UpdatedAt = flight.Active, version, t0, t0
	maps.Copy(f.Scalars, scalars)
	return f
}

func (e *env) check(t *testing.T) sentinel.Result {
	t.Helper()
	res, err := e.s.Check(t.Context(), e.sess, 1)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func wantDrift(t *testing.T, res sentinel.Result, want map[projection.Drift]int) {
	t.Helper()
	for _, k := range projection.Kinds() {
		if res.Drift[k] != want[k] {
			t.Errorf("%s drift %d, want %d (%s)", k, res.Drift[k], want[k], res)
		}
	}
}

// Every kind of drift is found and repaired from PostgreSQL, and a repaired projection checks
// clean; a flushed Redis is rebuilt whole.
func TestDriftFoundAndRepaired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3) // small pages: the check goes over several locked transactions
	deleted := mk("D1", 4, map[string]string{"FLNO": "CA9"})
	deleted.State = flight.Deleted
	e.save(t,
		mk("A1", 2, map[string]string{"FLNO": "CA1"}), mk("A2", 3, map[string]string{"FLNO": "CA2", "REMC": "ON TIME"}),
		mk("A3", 5, map[string]string{"FLNO": "CA3"}), mk("A4", 1, map[string]string{"FLNO": "CA4"}),
		mk("A5", 2, map[string]string{"FLNO": "CA5"}), deleted,
		mk("M1", 2, map[string]string{"FLNO": "CA7"}), mk("C1", 1, map[string]string{"FLNO": "ZH7", "MAID": "M1"}))
	if res := e.check(t); res.Found() != 0 || res.Checked != 8 {
		t.Fatalf("a projection written by the pump's rule drifts: %s", res)
	}

	c, ctx, p := e.rd.Client, t.Context(), e.rd.Prefix
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Del(ctx, projection.FlightKey(p, "A1")).Err())                     // missing document
	must(c.Set(ctx, projection.FlightKey(p, "A2"), `{"FLID":"A2"}`, 0).Err()) // content
	must(c.HSet(ctx, projection.VersionKey(p), "A3", 4).Err())                // version lowered
	must(c.HSet(ctx, projection.VersionKey(p), "A4", 9).Err())                // version raised
	must(c.HDel(ctx, projection.VersionKey(p), "A5").Err())                   // version entry gone
	must(c.Set(ctx, projection.FlightKey(p, "D1"), `{"FLID":"D1"}`, 0).Err()) // a deleted flight shown
	must(c.Set(ctx, projection.FlightKey(p, "X9"), `{"FLID":"X9"}`, 0).Err()) // a flight PG does not have
	must(c.HSet(ctx, projection.VersionKey(p), "X8", 3).Err())                // its version entry only
	res := e.check(t)
	wantDrift(t, res, map[projection.Drift]int{projection.Missing: 2, projection.Content: 1, projection.Stale: 3, projection.Extra: 2})
	if res.Repaired != 8 {
		t.Errorf("repaired %d, want 8", res.Repaired)
	}
	if got := counter(t, e.reg, "msgx_projection_drift_total", "stale", sentinel.ModeCheck); got != 3 {
		t.Errorf("stale drift counter %v, want 3", got)
	}
	if res := e.check(t); res.Found() != 0 {
		t.Fatalf("after the repair: %s", res)
	}
	for _, flid := range []string{"X9"} {
		if n, _ := c.Exists(ctx, projection.FlightKey(p, flid)).Result(); n != 0 {
			t.Errorf("extra document %s still there", flid)
		}
	}
	obs, err := e.proj.Observe(ctx, []string{"A4", "D1", "M1"})
	must(err)
	if obs[0].Version != 1 || obs[1].Doc != nil || obs[1].Version != 4 {
		t.Errorf("repaired entries: A4 v%d, D1 doc %q v%d", obs[0].Version, obs[1].Doc, obs[1].Version)
	}

	must(c.FlushDB(ctx).Err())
	res = e.check(t)
	wantDrift(t, res, map[projection.Drift]int{projection.Missing: 8})
	if res := e.check(t); res.Found() != 0 {
		t.Fatalf("after rebuilding a flushed Redis: %s", res)
	}
	if got := gauge(t, e.reg, "msgx_projection_check_drift_streak"); got != 0 {
		t.Errorf("drift streak %v after a clean check, want 0", got)
	}
}

// Two checks in a row that find drift raise the streak the alert fires on.
func TestDriftStreak(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 100)
	e.save(t, mk("S1", 1, map[string]string{"FLNO": "CA1"}))
	for i := 1; i <= 2; i++ {
		if err := e.rd.Client.Del(t.Context(), projection.FlightKey(e.rd.Prefix, "S1")).Err(); err != nil {
			t.Fatal(err)
		}
		e.check(t)
		if got := gauge(t, e.reg, "msgx_projection_check_drift_streak"); got != float64(i) {
			t.Fatalf("streak %v after %d drifted checks", got, i)
		}
	}
}

// The check counts the active code-share children under a deleted master, a state the rules
// never leave (R-CODESHARE-5), and exports the count; a child whose master was never seen
// (dangling, R-CODESHARE-1) is not one, nor is a deleted child of a deleted master.
func TestCheckCountsChildrenUnderADeletedMaster(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 100)
	gone := mk("M1", 2, map[string]string{"FLNO": "CA1"})
	gone.State = flight.Deleted
	deletedChild := mk("C3", 2, map[string]string{"FLNO": "ZH3", "MAID": "M1"})
	deletedChild.State = flight.Deleted
	e.save(t, mk("M2", 1, map[string]string{"FLNO": "CA2"}), mk("C2", 1, map[string]string{"FLNO": "ZH2", "MAID": "M2"}),
		mk("D1", 1, map[string]string{"FLNO": "ZH4", "MAID": "NEVER-SEEN"}), gone, deletedChild)
	if res := e.check(t); res.CodeShare != 0 || gauge(t, e.reg, "msgx_projection_check_codeshare_violations") != 0 {
		t.Fatalf("consistent code-share counted %d violations", res.CodeShare)
	}
	// A child left active under the deleted master, as an earlier release could leave it.
	e.save(t, mk("C1", 1, map[string]string{"FLNO": "ZH1", "MAID": "M1"}))
	if res := e.check(t); res.CodeShare != 1 || gauge(t, e.reg, "msgx_projection_check_codeshare_violations") != 1 {
		t.Fatalf("violations %d, want C1", res.CodeShare)
	}
	// A repair does not count them, so it leaves the check's count standing.
	e.runJob(t, e.s, e.request(t, jobs.RebuildSpec{}).ID)
	if got := gauge(t, e.reg, "msgx_projection_check_codeshare_violations"); got != 1 {
		t.Fatalf("violations gauge %v after a repair, want the check's 1", got)
	}
}

// The check takes the pipeline lock for each page: while the pump holds it (between its domain
// commit and its projection write) the check waits, and afterwards it sees the pump's newer
// state: it never overwrites a version the pump wrote meanwhile.
func TestCheckWaitsForThePumpAndKeepsItsNewerVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 100)
	e.save(t, mk("P1", 1, map[string]string{"FLNO": "CA1", "REMC": "OLD"}))
	pump, err := pgx.Connect(t.Context(), e.pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pump.Close(context.Background())
	if err := pgtest.LockPipeline(t.Context(), pump); err != nil {
		t.Fatal(err)
	}
	// The pump's domain transaction committed version 2; its projection write is still to come.
	e.pg.Exec(t, `UPDATE flight_schd SET state_version = 2, remc = 'NEW' WHERE flid = 'P1'`)
	done := make(chan sentinel.Result, 1)
	go func() {
		res, _ := e.s.Check(context.Background(), e.sess, 1)
		done <- res
	}()
	select {
	case res := <-done:
		t.Fatalf("the check ran while the pump held the pipeline lock: %s", res)
	case <-time.After(500 * time.Millisecond):
	}
	p, err := flightstore.ReadPublished(t.Context(), e.pg.Pool, "P1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.proj.Write(t.Context(), flight.Project([]flight.Flight{*p})); err != nil {
		t.Fatal(err)
	}
	if err := leader.UnlockPipeline(t.Context(), pump); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Found() != 0 {
		t.Errorf("the check after the pump's write found drift: %s", res)
	}
	obs, err := e.proj.Observe(t.Context(), []string{"P1"})
	if err != nil {
		t.Fatal(err)
	}
	if obs[0].Version != 2 {
		t.Errorf("projection at version %d, want the pump's 2", obs[0].Version)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func counter(t *testing.T, reg *prometheus.Registry, name, kind string, mode sentinel.Mode) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["mode"] == string(mode) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{kind=%q,mode=%q}", name, kind, mode)
	return 0
}

// configWith is the production configuration (sentinel.FromConfig) with page flights per
// transaction and no check or rebuild of its own at start: each test starts what it asserts.
func configWith(page int) sentinel.Config {
	c := sentinel.FromConfig(config.Default())
	c.Page, c.OnStartup, c.RebuildOnLoss = page, false, false
	return c
}
