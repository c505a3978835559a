package app_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/flight"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/services/control/internal/ctl"
	"github.com/msgexchange/msgexchange/testkit/flights"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

const readerToken = "s3cret-reader-token-0123456789abcd"

// The dry runs docs/control.md promises on every mutating call (issue #57 finding 6, issue #56
// finding 4): Republish, both cancels and AcknowledgeDead report what they would do and change
// nothing, a reader is refused them, and a cancel keeps who asked and why on the job row, which
// Get, List and msgxctl show. Through the real msgxctl: --dry-run, and republish --all refused
// without a terminal to confirm on.
func TestDryRunsOfJobsAndAcknowledgements(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, flid := range []string{"F1", "F2", "F3"} {
		f := flight.New(flid)
		f.Version, f.CreatedAt, f.UpdatedAt, f.OperationDay = 1, now, now, &day
		f.Scalars = map[string]string{"FLNO": "CA1501", "ALCD": "CA"}
		flights.Write(t, pg.Pool, f)
	}
	procRow(t, pg, 1, "DEAD", "MALFORMED", now)
	procRow(t, pg, 2, "DEAD", "MALFORMED", now)
	in := startWith(t, pg, "control-dry-runs", now, func(cfg *config.Config) { cfg.Control.ReaderToken = readerToken }, nil)
	waitActive(t, in)
	op, reader := withToken(callCtx(t), token), withToken(callCtx(t), readerToken)
	jobCount := func() int {
		var n int
		if err := pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM schd_republish`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Republish: the would-be job with its flights counted, and nothing registered.
	all, err := in.client.Republish(op, &controlv1.RepublishRequest{All: true, DryRun: true, Comment: "INC-1"})
	if err != nil || !all.GetDryRun() || all.GetAlreadyRunning() || all.GetRepublish().GetRepublishId() != 0 ||
		all.GetRepublish().GetTotal() != 3 || all.GetRepublish().GetState() != controlv1.RebuildState_REBUILD_STATE_PENDING {
		t.Fatalf("dry run of republish --all: %v, %v", all, err)
	}
	some, err := in.client.Republish(op, &controlv1.RepublishRequest{Flid: []string{"FX", "F1", "F0"}, DryRun: true})
	if err != nil || some.GetRepublish().GetTotal() != 3 || some.GetRepublish().GetUnknown() != 2 ||
		!slices.Equal(some.GetUnknownFlid(), []string{"F0", "FX"}) {
		t.Fatalf("dry run of republish F0 F1 FX: %v, %v", some, err)
	}
	if n := jobCount(); n != 0 {
		t.Fatalf("dry runs registered %d republishes", n)
	}

	// A reader is refused every one of these, dry run or not.
	for name, call := range map[string]func() error{
		"Republish": func() error {
			_, err := in.client.Republish(reader, &controlv1.RepublishRequest{All: true, DryRun: true})
			return err
		},
		"CancelRepublish": func() error {
			_, err := in.client.CancelRepublish(reader, &controlv1.CancelRepublishRequest{RepublishId: 1, DryRun: true})
			return err
		},
		"CancelProjectionRebuild": func() error {
			_, err := in.client.CancelProjectionRebuild(reader, &controlv1.CancelProjectionRebuildRequest{RebuildId: 1, DryRun: true})
			return err
		},
		"AcknowledgeDead": func() error {
			_, err := in.client.AcknowledgeDead(reader, &controlv1.AcknowledgeDeadRequest{MsgIds: []int64{1}, Reason: "r", DryRun: true})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("dry run of %s with the reader token: %v, want PERMISSION_DENIED", name, err)
		}
	}

	// Cancel: the dry run answers the job as the cancel would leave it; the job stays as it was.
	req, err := in.client.Republish(op, &controlv1.RepublishRequest{Flid: []string{"F1"}, Comment: "INC-2"})
	if err != nil {
		t.Fatal(err)
	}
	id := req.GetRepublish().GetRepublishId()
	pre, err := in.client.CancelRepublish(op, &controlv1.CancelRepublishRequest{RepublishId: id, DryRun: true, Comment: "peak hour"})
	if err != nil || !pre.GetDryRun() || pre.GetRepublish().GetState() != controlv1.RebuildState_REBUILD_STATE_CANCELLED ||
		pre.GetRepublish().GetCancelledBy() != "operator-token" || pre.GetRepublish().GetCancelComment() != "peak hour" {
		t.Fatalf("dry run of the cancel: %v, %v", pre, err)
	}
	got, err := in.client.GetRepublish(op, &controlv1.GetRepublishRequest{RepublishId: id})
	if err != nil || got.GetRepublish().GetState() != controlv1.RebuildState_REBUILD_STATE_PENDING || got.GetRepublish().GetCancelRequested() ||
		got.GetRepublish().GetCancelledBy() != "" {
		t.Fatalf("after the cancel's dry run: %v, %v", got, err)
	}
	if _, err := in.client.CancelProjectionRebuild(op, &controlv1.CancelProjectionRebuildRequest{RebuildId: 99, DryRun: true}); status.Code(err) != codes.NotFound {
		t.Errorf("dry run of the cancel of no rebuild: %v, want NOT_FOUND", err)
	}

	// AcknowledgeDead: the rows it would take, none taken.
	ack, err := in.client.AcknowledgeDead(op, &controlv1.AcknowledgeDeadRequest{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_MALFORMED,
		Reason: "INC-3", DryRun: true})
	if err != nil || !ack.GetDryRun() || ack.GetAcknowledged() != 2 || !slices.Equal(ack.GetAcknowledgedIds(), []int64{1, 2}) {
		t.Fatalf("dry run of acknowledge-dead: %v, %v", ack, err)
	}
	var acked int
	if err := pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_state WHERE acknowledged_at IS NOT NULL`).Scan(&acked); err != nil || acked != 0 {
		t.Fatalf("a dry run acknowledged %d rows (%v)", acked, err)
	}

	// msgxctl: --dry-run through the binary, and the confirmation of --all.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvTokenFile + "=" + tokenFile}
	if _, err := in.client.CancelRepublish(op, &controlv1.CancelRepublishRequest{RepublishId: id, Comment: "INC-2 done"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args       []string
		code       int
		out, notes string
	}{
		// The republish of F1 was cancelled above, so nothing is open: --all would request one.
		{[]string{"republish", "--all", "--comment", "INC-4"}, ctl.ExitUsage, "",
			"would write the current state of 3 flights to KAFKA:schd"},
		{[]string{"republish", "--all", "--dry-run"}, 0, "republish.total", "dry run: nothing was requested"},
		{[]string{"republish", "F1", "F9", "--dry-run"}, 0, "republish.unknown", "1 are not in the current state (F9)"},
		{[]string{"acknowledge-dead", "1", "--reason", "INC-5", "--dry-run"}, 0, "acknowledged_ids", "dry run: 1 DEAD messages would be acknowledged"},
		{[]string{"get-republish", "1"}, 0, "republish.cancelled_by", ""},
	} {
		out, errOut, code := msgxctl(t, env, tc.args...)
		t.Logf("msgxctl %s: exit %d\n%s%s", strings.Join(tc.args, " "), code, out, errOut)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(out+errOut, tc.notes) {
			t.Errorf("msgxctl %s: exit %d (want %d), want %q in stdout and %q:\n%s%s", strings.Join(tc.args, " "), code, tc.code, tc.out, tc.notes, out, errOut)
		}
	}
	if _, errOut, _ := msgxctl(t, env, "republish", "--all"); !strings.Contains(errOut, "stdin is not a terminal: add --yes") {
		t.Errorf("the refusal of republish --all without a terminal does not name --yes:\n%s", errOut)
	}
	if n := jobCount(); n != 1 {
		t.Fatalf("%d republishes after msgxctl's dry runs and refusals, want the one cancelled above", n)
	}
	list, err := in.client.ListRepublishes(op, &controlv1.ListRepublishesRequest{})
	if err != nil || len(list.GetRepublishes()) != 1 || list.GetRepublishes()[0].GetCancelledBy() != "operator-token" ||
		list.GetRepublishes()[0].GetCancelComment() != "INC-2 done" || list.GetRepublishes()[0].GetCancelRequestedAt() == nil {
		t.Fatalf("list after the cancel: %v, %v", list, err)
	}
	// --yes requests it without asking (--detach: no backfill runs here to follow).
	if out, errOut, code := msgxctl(t, env, "republish", "--all", "--yes", "--detach", "--comment", "INC-6"); code != 0 || !strings.Contains(out, "PENDING") {
		t.Errorf("republish --all --yes: exit %d\n%s%s", code, out, errOut)
	}
	if n := jobCount(); n != 2 {
		t.Errorf("%d republishes after republish --all --yes, want 2", n)
	}
}
