package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/internal/repo"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// metricValue is the value of the sample named exactly series (name with its labels, as the
// text exposition writes them) in a scrape; ok is false when the scrape has no such sample.
func metricValue(text, series string) (v float64, ok bool) {
	for _, line := range strings.Split(text, "\n") {
		if rest, found := strings.CutPrefix(line, series+" "); found {
			f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// driftAlertThreshold reads the streak MsgxProjectionDrift fires at from the chart's rule, so
// the test evaluates the alert as deployed rather than a copy of it.
func driftAlertThreshold(t *testing.T) float64 {
	t.Helper()
	root := repo.Root(t)
	b, err := os.ReadFile(filepath.Join(root, "deploy/helm/msgexchange/templates/prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)alert: MsgxProjectionDrift.*?expr: max by \(namespace\) \(msgx_projection_check_drift_streak\{.*?\}\) >= ([0-9]+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("MsgxProjectionDrift's expression is not max by (namespace) (msgx_projection_check_drift_streak) >= N any more: update this test")
	}
	n, _ := strconv.ParseFloat(string(m[1]), 64)
	return n
}

// TestProjectionDriftRunbook walks docs/runbooks.md's MsgxProjectionDrift runbook on the five
// binaries: the projection drifts (a wrong document, one deleted, a key of a flight PostgreSQL
// does not have) and a check finds it (the backfill's start-up check after a restart: streak 1,
// the alert one check from firing); the projection drifts again and the operator runs the
// runbook's commands as written, msgxctl rebuild-projection --all --dry-run then --all. The dry
// run counts under mode="dry_run" and leaves the streak, the repair sets it to 0, and the alert's
// expression evaluated on the backfill's scraped metrics does not fire at any step.
func TestProjectionDriftRunbook(t *testing.T) {
	e := newEnv(t)
	admin := freePort(t)
	for _, r := range stack.Services {
		var extra []string
		if r == "backfill" {
			extra = append(extra, "MSGX_ADMIN_ADDR="+admin)
		}
		if err := e.stack.Start(r, nil, extra...); err != nil {
			t.Fatal(err)
		}
	}
	e.waitAllRolesActive(t)
	ctx, c, p := context.Background(), e.redis.Client, e.redis.Prefix
	threshold := driftAlertThreshold(t)

	day := time.Now().In(airport).Truncate(24 * time.Hour)
	const n = 10
	var msgs []*message
	for i := range n {
		f := traffic.Flight{FLID: fmt.Sprintf("RN%02d", i), ALCD: "CA", FLNO: fmt.Sprintf("CA%d", 2000+i), MVIN: "D",
			SODT: day.Add(time.Duration(9*60+i) * time.Minute), FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
		msgs = append(msgs, &message{xml: traffic.ADFT(int64(i+1), day.Add(6*time.Hour), f)})
	}
	e.insert(t, msgs)
	testwait.ForState(t, 90*time.Second, "every flight projected", func() (bool, string) {
		docs, _ := c.Keys(ctx, projection.FlightKey(p, "RN*")).Result()
		return len(docs) == n, fmt.Sprintf("%d documents", len(docs))
	})
	good, err := c.Get(ctx, projection.FlightKey(p, "RN01")).Result()
	if err != nil {
		t.Fatal(err)
	}
	damage := func() {
		for _, err := range []error{
			c.Set(ctx, projection.FlightKey(p, "RN01"), `{"FLID":"RN01","FLNO":"XX9999"}`, 0).Err(), // a wrong value
			c.Del(ctx, projection.FlightKey(p, "RN02")).Err(),                                       // one deleted
			c.Set(ctx, projection.FlightKey(p, "RNGHOST"), `{"FLID":"RNGHOST"}`, 0).Err(),           // an extra key
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	metric := func(series string) float64 {
		t.Helper()
		v, ok := metricValue(scrape(t, admin, "text/plain; version=0.0.4"), series)
		if !ok {
			t.Fatalf("the backfill exports no %s", series)
		}
		return v
	}
	streak := func(step string) float64 {
		t.Helper()
		s := metric("msgx_projection_check_drift_streak")
		if s >= threshold {
			t.Fatalf("%s: drift streak %v: MsgxProjectionDrift (streak >= %v) would fire", step, s, threshold)
		}
		return s
	}

	// A check finds drift: the backfill restarted, its start-up check compares every flight.
	damage()
	e.stack.Stop("backfill", 10*time.Second)
	if err := e.stack.Start("backfill", nil, "MSGX_ADMIN_ADDR="+admin); err != nil {
		t.Fatal(err)
	}
	testwait.ForState(t, 60*time.Second, "the start-up check to find the drift", func() (bool, string) {
		if v, ok := metricValue(scrapeOrEmpty(admin), "msgx_projection_check_drift_streak"); ok {
			return v == 1, fmt.Sprint("streak ", v)
		}
		return false, "backfill not scraped yet"
	})
	streak("after the check that found drift")

	// The projection drifts again; the operator follows the runbook, step 3, as written.
	damage()
	out, errOut, code := e.msgxctl(t, "rebuild-projection", "--all", "--dry-run", "--comment", "INC-160")
	if code != 0 || !strings.Contains(out, "DONE") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("msgxctl rebuild-projection --all --dry-run:\n%s", out)
	if s := streak("after the dry run"); s != 1 {
		t.Errorf("streak %v after the dry run, want the check's 1 (a dry run neither raises nor resets it)", s)
	}
	for kind, want := range map[projection.Drift]float64{projection.Missing: 1, projection.Content: 1, projection.Extra: 1} {
		if got := metric(fmt.Sprintf(`msgx_projection_drift_total{kind=%q,mode="dry_run"}`, kind)); got != want {
			t.Errorf("drift_total{kind=%q,mode=dry_run} %v, want %v", kind, got, want)
		}
	}
	if v, _ := c.Get(ctx, projection.FlightKey(p, "RN01")).Result(); v == good {
		t.Fatal("the dry run repaired RN01")
	}

	out, errOut, code = e.msgxctl(t, "rebuild-projection", "--all", "--comment", "INC-160")
	if code != 0 || !strings.Contains(out, "DONE") {
		t.Fatalf("repair: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("msgxctl rebuild-projection --all:\n%s", out)
	if s := streak("after the repair"); s != 0 {
		t.Errorf("streak %v after the runbook's repair, want 0", s)
	}
	for kind, want := range map[projection.Drift]float64{projection.Missing: 1, projection.Content: 1, projection.Extra: 1} {
		if got := metric(fmt.Sprintf(`msgx_projection_drift_total{kind=%q,mode="repair"}`, kind)); got != want {
			t.Errorf("drift_total{kind=%q,mode=repair} %v, want %v", kind, got, want)
		}
	}
	if v, _ := c.Get(ctx, projection.FlightKey(p, "RN01")).Result(); v != good {
		t.Errorf("RN01 after the repair: %s, want %s", v, good)
	}
	if c.Exists(ctx, projection.FlightKey(p, "RN02")).Val() != 1 || c.Exists(ctx, projection.FlightKey(p, "RNGHOST")).Val() != 0 {
		t.Error("the repair left RN02 missing or RNGHOST in place")
	}
	if r := e.rebuildJSON(t, "rebuild-projection", "--all", "--dry-run").Rebuild; r.Missing != "0" || r.Content != "0" || r.Extra != "0" || r.Stale != "0" {
		t.Errorf("a dry run after the repair finds drift: %+v", r)
	}
	streak("after the final dry run")
}

// scrapeOrEmpty is a scrape that a service not listening yet answers with nothing.
func scrapeOrEmpty(addr string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return ""
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

type roleJSON struct {
	Role       string `json:"role"`
	Held       bool   `json:"held"`
	Instance   string `json:"instance"`
	BackendPID int64  `json:"backendPid"`
	Active     bool   `json:"active"`
	Since      string `json:"since"`
}

// role runs msgxctl get-status -o json, as the runbook says, and returns the role's entry.
func (e *env) role(t *testing.T, name string) roleJSON {
	t.Helper()
	out, errOut, code := e.msgxctl(t, "get-status", "-o", "json")
	if code != 0 {
		t.Fatalf("get-status: exit %d\n%s%s", code, out, errOut)
	}
	var st struct {
		Roles []roleJSON `json:"roles"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("get-status output %q: %v", out, err)
	}
	for _, r := range st.Roles {
		if r.Role == name {
			return r
		}
	}
	t.Fatalf("get-status has no role %q:\n%s", name, out)
	return roleJSON{}
}

// TestRoleHolderGoneRunbook walks MsgxRoleNoActiveInstance's "holder gone" path on the
// binaries: the pump is killed with SIGKILL (a crash); get-status shows the recorded holder with
// active false; the runbook's SQL finds its backend gone and the role's advisory lock free, so
// there is nothing to terminate; a restarted pump takes the role on a new backend.
func TestRoleHolderGoneRunbook(t *testing.T) {
	e := newEnv(t)
	e.startAll(t)
	e.waitAllRolesActive(t)
	ctx := context.Background()
	before := e.role(t, "pump")
	if !before.Held || !before.Active || before.BackendPID == 0 {
		t.Fatalf("pump before the crash: %+v", before)
	}
	pid := e.stack.PID("pump")
	if pid == 0 {
		t.Fatal("the pump is not running")
	}
	killed := time.Now()
	e.stack.Kill("pump")
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("pump process %d still alive after SIGKILL", pid)
	}
	var gone roleJSON
	testwait.ForState(t, 30*time.Second, "get-status to show the pump's holder not active", func() (bool, string) {
		gone = e.role(t, "pump")
		return gone.Held && !gone.Active, fmt.Sprintf("%+v", gone)
	})
	seenGone := time.Since(killed)
	if gone.BackendPID != before.BackendPID || gone.Instance != before.Instance {
		t.Errorf("the recorded holder changed without a new one: %+v, was %+v", gone, before)
	}
	// The runbook's SQL, as written in docs/runbooks.md (step 2), with the backend_pid and
	// the role from get-status.
	var sessions, locks int
	var heartbeatAge time.Duration
	rows, err := e.pg.Pool.Query(ctx, `SELECT pid, state, now() - state_change AS in_state, wait_event_type, wait_event, query
     FROM pg_stat_activity WHERE pid = $1`, gone.BackendPID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		sessions++
	}
	rows.Close()
	if err := e.pg.Pool.QueryRow(ctx, `SELECT now() - heartbeat_at AS heartbeat_age
     FROM role_holder WHERE role = 'pump'`).Scan(&heartbeatAge); err != nil {
		t.Fatal(err)
	}
	if err := e.pg.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = $1) l`,
		gone.BackendPID).Scan(&locks); err != nil {
		t.Fatal(err)
	}
	if sessions != 0 || locks != 0 || heartbeatAge <= 0 {
		t.Fatalf("after the crash backend %d: %d sessions, %d advisory locks, heartbeat age %v; want the holder gone",
			gone.BackendPID, sessions, locks, heartbeatAge)
	}
	t.Logf("holder gone: backend %d has no session and no lock, heartbeat %v old", gone.BackendPID, heartbeatAge)
	if err := e.stack.Start("pump", nil); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	testwait.ForState(t, 30*time.Second, "the restarted pump to take the role", func() (bool, string) {
		r := e.role(t, "pump")
		return r.Active && r.BackendPID != before.BackendPID, fmt.Sprintf("%+v", r)
	})
	t.Logf("get-status showed the holder not active %v after SIGKILL; the restarted pump held the role %v after its start",
		seenGone.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
}
