package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

var (
	ctlOnce sync.Once
	ctlErr  error
)

// msgxctl runs the operator's CLI against the stack's control service.
func (e *env) msgxctl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin := binaries(t)
	ctlOnce.Do(func() {
		root, err := stack.Root()
		if err != nil {
			ctlErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "msgxctl"), "./services/control/cmd/msgxctl")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			ctlErr = fmt.Errorf("build msgxctl: %w\n%s", err, out)
		}
	})
	if ctlErr != nil {
		t.Fatal(ctlErr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "msgxctl"), append([]string{"--addr", e.grpcAddr, "--token", e.token}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("msgxctl %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

type rebuildJSON struct {
	Rebuild struct {
		ID       json.Number `json:"rebuildId"`
		State    string      `json:"state"`
		Done     json.Number `json:"done"`
		Total    json.Number `json:"total"`
		Missing  json.Number `json:"missing"`
		Stale    json.Number `json:"stale"`
		Content  json.Number `json:"content"`
		Extra    json.Number `json:"extra"`
		Repaired json.Number `json:"repaired"`
	} `json:"rebuild"`
}

func (e *env) rebuildJSON(t *testing.T, args ...string) rebuildJSON {
	t.Helper()
	out, errOut, code := e.msgxctl(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("msgxctl %v: exit %d\n%s%s", args, code, out, errOut)
	}
	var r rebuildJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("msgxctl %v output %q: %v", args, out, err)
	}
	return r
}

// TestProjectionRebuildThroughTheBinaries: the five binaries project a day of flights; the
// projection is damaged in every way; msgxctl rebuild-projection --dry-run reports the drift and
// changes nothing, then a rebuild while the pump applies a burst of updates repairs it (the
// progress shown live), and a dry run afterwards finds nothing; finally a rebuild a killed
// backfill left in the middle is resumed from its cursor by the next backfill process.
func TestProjectionRebuildThroughTheBinaries(t *testing.T) {
	e := newEnv(t)
	e.startAll(t)
	e.waitAllRolesActive(t)
	ctx, c, p := context.Background(), e.redis.Client, e.redis.Prefix

	day := time.Now().In(airport).Truncate(24 * time.Hour)
	const n = 30
	flights := make([]traffic.Flight, n)
	var msgs []*message
	for i := range flights {
		flights[i] = traffic.Flight{FLID: fmt.Sprintf("RB%02d", i), ALCD: "CA", FLNO: fmt.Sprintf("CA%d", 1000+i), MVIN: "D",
			SODT: day.Add(time.Duration(8*60+i) * time.Minute), FLTY: "W", FLIN: "D", ACFT: "33L", RENO: "B1234", TRML: "T3",
			STND: "512", Route: []string{"PEK", "SHA"}}
		msgs = append(msgs, &message{xml: traffic.ADFT(int64(i+1), day.Add(6*time.Hour), flights[i])})
	}
	e.insert(t, msgs)
	testwait.ForState(t, 90*time.Second, "every flight projected", func() (bool, string) {
		docs, _ := c.Keys(ctx, projection.FlightKey(p, "RB*")).Result()
		return len(docs) == n, fmt.Sprintf("%d documents", len(docs))
	})

	// Damage: 3 documents gone, one corrupted, a version lowered, one raised, an extra flight.
	for _, err := range []error{
		c.Del(ctx, projection.FlightKey(p, "RB00"), projection.FlightKey(p, "RB01"), projection.FlightKey(p, "RB02")).Err(),
		c.Set(ctx, projection.FlightKey(p, "RB03"), `{"FLID":"RB03"}`, 0).Err(),
		c.HSet(ctx, projection.VersionKey(p), "RB04", 0).Err(),
		c.HSet(ctx, projection.VersionKey(p), "RB05", 99).Err(),
		c.Set(ctx, projection.FlightKey(p, "GHOST"), `{"FLID":"GHOST"}`, 0).Err(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	before, _ := c.Get(ctx, projection.FlightKey(p, "RB03")).Result()
	dry := e.rebuildJSON(t, "rebuild-projection", "--all", "--dry-run")
	if r := dry.Rebuild; r.State != "REBUILD_STATE_DONE" || r.Done != "30" || r.Total != "30" || r.Missing != "3" ||
		r.Content != "1" || r.Stale != "2" || r.Extra != "1" || r.Repaired != "0" {
		t.Fatalf("dry run: %+v", r)
	}
	if after, _ := c.Get(ctx, projection.FlightKey(p, "RB03")).Result(); after != before || c.Exists(ctx, projection.FlightKey(p, "GHOST")).Val() != 1 {
		t.Fatal("the dry run changed the projection")
	}

	// Live traffic: an update for every flight, arriving while the rebuild runs.
	var updates []*message
	for i, f := range flights {
		updates = append(updates, &message{xml: traffic.FLOP(int64(100+i), day.Add(7*time.Hour), f.FLID, f.FFID(), "ESTT",
			"<ESTT>"+traffic.FormatTime(f.SODT.Add(15*time.Minute))+"</ESTT>")})
	}
	e.insert(t, updates)
	out, errOut, code := e.msgxctl(t, "rebuild-projection", "--all", "--comment", "e2e")
	if code != 0 {
		t.Fatalf("rebuild: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "/30 flights") || !strings.Contains(out, "DONE: 30/30 flights") || !strings.Contains(out, "rebuild.repaired") {
		t.Errorf("rebuild output lacks the progress or the result:\n%s", out)
	}
	t.Logf("msgxctl rebuild-projection --all:\n%s", out)
	for _, m := range updates {
		testwait.ForState(t, 60*time.Second, "the update to be applied", func() (bool, string) {
			f := e.facts(t, m.id)
			return f.terminal, f.String()
		})
	}
	if r := e.rebuildJSON(t, "rebuild-projection", "--all", "--dry-run").Rebuild; r.Missing != "0" || r.Stale != "0" || r.Content != "0" || r.Extra != "0" {
		t.Fatalf("after the rebuild and the traffic a dry run finds drift: %+v", r)
	}
	var pgVersion int64
	if err := e.pg.Pool.QueryRow(ctx, `SELECT state_version FROM flight_schd WHERE flid = 'RB05'`).Scan(&pgVersion); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.HGet(ctx, projection.VersionKey(p), "RB05").Int64(); v != pgVersion {
		t.Errorf("RB05 at version %d in Redis, %d in PostgreSQL", v, pgVersion)
	}

	// A rebuild left RUNNING in the middle by a killed backfill: the next backfill process goes
	// on from its cursor (RB14), so only the flights after it are compared again.
	e.stack.Kill("backfill")
	if err := c.Del(ctx, projection.FlightKey(p, "RB03"), projection.FlightKey(p, "RB20")).Err(); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := e.pg.Pool.QueryRow(ctx, `INSERT INTO projection_rebuild (dry_run, state, phase, cursor, done, total, requested_by,
		requested_at, started_at, updated_at) VALUES (false, 'RUNNING', 'FLIGHTS', 'RB14', 15, 30, 'e2e', now(), now(), now())
		RETURNING rebuild_id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// Without its start-up check, which would repair the two before the job could.
	if err := e.stack.Start("backfill", nil, "MSGX_CONSISTENCY_CHECK_ON_STARTUP=false"); err != nil {
		t.Fatal(err)
	}
	var got rebuildJSON
	testwait.ForState(t, 60*time.Second, "the resumed rebuild to end", func() (bool, string) {
		got = e.rebuildJSON(t, "get-projection-rebuild", "--rebuild-id", fmt.Sprint(id))
		return got.Rebuild.State == "REBUILD_STATE_DONE", fmt.Sprintf("%+v", got.Rebuild)
	})
	if r := got.Rebuild; r.Done != "30" || r.Missing != "1" || r.Repaired != "1" {
		t.Errorf("resumed rebuild: %+v, want 30 done and only RB20 (after the cursor) repaired", r)
	}
	if c.Exists(ctx, projection.FlightKey(p, "RB20")).Val() != 1 || c.Exists(ctx, projection.FlightKey(p, "RB03")).Val() != 0 {
		t.Error("the resumed rebuild did not start from its cursor")
	}
}
