package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/jobs"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/services/control/internal/ctl"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// RebuildProjection registers one job (audited, with who asked); a second call while it is open
// gets it back; Get, List and Cancel answer for it.
func TestProjectionRebuildRPCs(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	logs := &testlog.Buffer{}
	in := startWith(t, db, "control-rebuild", now, nil, logs)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)

	first, err := in.client.RebuildProjection(ctx, &controlv1.RebuildProjectionRequest{Flid: []string{"F2", "F1", "F2"}, DryRun: true, Comment: "INC-16"})
	if err != nil {
		t.Fatal(err)
	}
	r := first.GetRebuild()
	if first.GetAlreadyRunning() || r.GetState() != controlv1.RebuildState_REBUILD_STATE_PENDING || r.GetAll() ||
		strings.Join(r.GetFlid(), ",") != "F1,F2" || !r.GetDryRun() || r.GetRequestedBy() != "operator-token" {
		t.Fatalf("first request: %v", first)
	}
	second, err := in.client.RebuildProjection(ctx, &controlv1.RebuildProjectionRequest{Comment: "INC-T", All: true})
	if err != nil {
		t.Fatal(err)
	}
	if !second.GetAlreadyRunning() || second.GetRebuild().GetRebuildId() != r.GetRebuildId() {
		t.Fatalf("second request while the first is open: %v, want rebuild %d back", second, r.GetRebuildId())
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM projection_rebuild`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rebuilds registered (%v), want 1", n, err)
	}
	var audited []string
	for _, a := range audits(logs) {
		audited = append(audited, a["method"].(string))
	}
	if strings.Count(strings.Join(audited, " "), "/RebuildProjection") != 2 {
		t.Errorf("audit lines %v, want both RebuildProjection calls", audited)
	}

	got, err := in.client.GetProjectionRebuild(ctx, &controlv1.GetProjectionRebuildRequest{RebuildId: r.GetRebuildId()})
	if err != nil || got.GetRebuild().GetComment() != "INC-16" {
		t.Fatalf("get: %v, %v", got, err)
	}
	if _, err := in.client.GetProjectionRebuild(ctx, &controlv1.GetProjectionRebuildRequest{RebuildId: 999}); status.Code(err) != codes.NotFound {
		t.Errorf("get of an unknown rebuild: %v, want NOT_FOUND", err)
	}
	if _, err := in.client.RebuildProjection(ctx, &controlv1.RebuildProjectionRequest{Comment: "INC-T"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("rebuild of nothing: %v, want INVALID_ARGUMENT", err)
	}
	c, err := in.client.CancelProjectionRebuild(ctx, &controlv1.CancelProjectionRebuildRequest{Comment: "INC-T", RebuildId: r.GetRebuildId()})
	if err != nil || c.GetRebuild().GetState() != controlv1.RebuildState_REBUILD_STATE_CANCELLED {
		t.Fatalf("cancel a pending rebuild: %v, %v", c, err)
	}
	if _, err := in.client.CancelProjectionRebuild(ctx, &controlv1.CancelProjectionRebuildRequest{Comment: "INC-T", RebuildId: r.GetRebuildId()}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("cancel an ended rebuild: %v, want FAILED_PRECONDITION", err)
	}
	third, err := in.client.RebuildProjection(ctx, &controlv1.RebuildProjectionRequest{Comment: "INC-T", All: true})
	if err != nil || third.GetAlreadyRunning() || !third.GetRebuild().GetAll() {
		t.Fatalf("request after the cancel: %v, %v", third, err)
	}
	list, err := in.client.ListProjectionRebuilds(ctx, &controlv1.ListProjectionRebuildsRequest{PageSize: 1})
	if err != nil || len(list.GetRebuilds()) != 1 || list.GetRebuilds()[0].GetRebuildId() != third.GetRebuild().GetRebuildId() || list.GetNextPageToken() == "" {
		t.Fatalf("list page 1: %v, %v", list, err)
	}
	list, err = in.client.ListProjectionRebuilds(ctx, &controlv1.ListProjectionRebuildsRequest{PageSize: 1, PageToken: list.GetNextPageToken()})
	if err != nil || len(list.GetRebuilds()) != 1 || list.GetRebuilds()[0].GetRebuildId() != r.GetRebuildId() {
		t.Fatalf("list page 2: %v, %v", list, err)
	}
}

// msgxctl rebuild-projection follows the rebuild it started until it ends: on a pipe, one plain
// line per change of progress, then the rebuild's fields. The backfill's steps are played here
// through pkg/jobs (the real executor runs in tools/e2e).
func TestMsgxctlFollowsTheRebuild(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	in := startWith(t, db, "control-follow", now, nil, nil)
	waitActive(t, in)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvTokenFile + "=" + tokenFile}

	// What msgxctl prints, in order: the backfill's stand-in below takes its next step only once
	// the line of the current one is printed, so every step is seen however the poll falls.
	want := []string{
		"rebuild 1 PENDING: 0/0 flights",
		"rebuild 1 RUNNING: 0/4 flights, phase FLIGHTS; drift missing 0 stale 0 content 0 extra 0; repaired 0",
		"rebuild 1 RUNNING: 2/4 flights, phase FLIGHTS; drift missing 1 stale 0 content 0 extra 0; repaired 1",
		"rebuild 1 RUNNING: 4/4 flights, phase FLIGHTS; drift missing 1 stale 1 content 0 extra 0; repaired 2",
		"rebuild 1 DONE: 4/4 flights",
	}
	var printed testlog.Buffer
	go func() { // the backfill: start once the job is there, two steps, done
		ctx := t.Context()
		tick := time.NewTicker(testwait.Interval)
		defer tick.Stop()
		var open *jobs.RebuildJob
		for ; open == nil && ctx.Err() == nil; <-tick.C {
			open, _ = jobs.Rebuilds.LockOpen(ctx, db.Pool)
		}
		if open == nil {
			return
		}
		steps := []func() error{
			func() error { return jobs.Rebuilds.Start(ctx, db.Pool, open.ID, 4, now) },
			func() error {
				return jobs.AdvanceRebuild(ctx, db.Pool, open.ID, jobs.RebuildProgress{Phase: jobs.RebuildPhaseFlights, Cursor: "F2", Done: 2,
					Counts: jobs.RebuildCounts{Missing: 1, Repaired: 1}}, now)
			},
			func() error {
				return jobs.AdvanceRebuild(ctx, db.Pool, open.ID, jobs.RebuildProgress{Phase: jobs.RebuildPhaseFlights, Cursor: "F4", Done: 2,
					Counts: jobs.RebuildCounts{Stale: 1, Repaired: 1}}, now)
			},
			func() error { return jobs.Rebuilds.Finish(ctx, db.Pool, open.ID, jobs.StateDone, now) },
		}
		for i, step := range steps {
			for ; !strings.Contains(printed.String(), want[i]) && ctx.Err() == nil; <-tick.C {
			}
			if ctx.Err() != nil {
				return
			}
			if err := step(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	errOut, code := msgxctlTo(t, env, &printed, "rebuild-projection", "--flid", "F1,F2", "--flid", "F3", "--flid", "F4", "--comment", "INC-16")
	out := printed.String()
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "rebuild.repaired") || strings.Contains(out, "\r") {
		t.Errorf("want plain lines and then the rebuild's fields:\n%q", out)
	}

	// A second command while none is open starts a new one; -o json prints the final rebuild only.
	go func() {
		// Cancelled as soon as the command's rebuild is open.
		tick := time.NewTicker(testwait.Interval)
		defer tick.Stop()
		for ctx := t.Context(); ctx.Err() == nil; <-tick.C {
			if open, err := jobs.Rebuilds.LockOpen(ctx, db.Pool); err == nil && open != nil {
				_, _ = jobs.Rebuilds.Cancel(ctx, db.Pool, open.ID, jobs.Cancellation{By: "test"}, now)
				return
			}
		}
	}()
	out, errOut, code = msgxctl(t, env, "rebuild-projection", "--all", "--dry-run", "-o", "json")
	if code != ctl.ExitCode(codes.Aborted) {
		t.Fatalf("a cancelled rebuild: exit %d, want %d\n%s%s", code, ctl.ExitCode(codes.Aborted), out, errOut)
	}
	var final struct {
		Rebuild struct {
			State  string `json:"state"`
			DryRun bool   `json:"dryRun"`
		} `json:"rebuild"`
	}
	if err := json.Unmarshal([]byte(out), &final); err != nil || final.Rebuild.State != "REBUILD_STATE_CANCELLED" || !final.Rebuild.DryRun {
		t.Fatalf("json output %q: %v", out, err)
	}
	if !strings.Contains(errOut, "cancelled") {
		t.Errorf("stderr %q does not say the rebuild was cancelled", errOut)
	}

	// The rebuild's ID is the argument, as everywhere an ID is the subject, and completes from
	// the server's latest rebuilds.
	out, errOut, code = msgxctl(t, env, "get-projection-rebuild", "1", "-o", "name")
	if code != 0 || out != "1\n" {
		t.Errorf("get-projection-rebuild 1 -o name: exit %d, %q %s", code, out, errOut)
	}
	out, errOut, code = msgxctl(t, env, "__complete", "cancel-projection-rebuild", "")
	if code != 0 || !strings.Contains(out, "1\tDONE, 4 FLIDs\n") || !strings.Contains(out, "2\tCANCELLED, all flights, dry run\n") {
		t.Errorf("rebuild IDs do not complete: exit %d\n%s%s", code, out, errOut)
	}
}
