package app_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/services/control/internal/ctl"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

// Named tokens and required comments (issue #56, finding 8): behind control.tokens the audit
// and requested_by say which person acted, and a change without a comment is refused, through
// the server and the real msgxctl.
func TestCallerNamesAndComments(t *testing.T) {
	t.Parallel()
	const (
		alice = "alice-operator-token-0123456789abcdef"
		bob   = "bob-reader-token-0123456789abcdef0123"
	)
	db := pgtest.New(t)
	logs := &testlog.Buffer{}
	// Lines, as the chart's mounted file holds them, with a comment line.
	callers := "# on call\nalice:operator=" + alice + "\nbob:reader=" + bob + "\n"
	in := startWith(t, db, "control-callers", time.Now(), func(cfg *config.Config) { cfg.Control.Tokens = callers }, logs)
	waitActive(t, in)

	r, err := in.client.RebuildProjection(withToken(callCtx(t), alice), &controlv1.RebuildProjectionRequest{Flid: []string{"F1"}, Comment: "INC-8"})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetRebuild().GetRequestedBy(); got != "alice" {
		t.Errorf("requested_by = %q, want alice", got)
	}
	_, err = in.client.RebuildProjection(withToken(callCtx(t), alice), &controlv1.RebuildProjectionRequest{Flid: []string{"F2"}, Comment: "  "})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "comment") {
		t.Errorf("a change without a comment: %v, want INVALID_ARGUMENT naming comment", err)
	}
	if _, err := in.client.RebuildProjection(withToken(callCtx(t), alice), &controlv1.RebuildProjectionRequest{Flid: []string{"F3"}, DryRun: true}); err != nil {
		t.Errorf("a dry run without a comment: %v, want it served (it changes nothing)", err)
	}
	if _, err := in.client.RebuildProjection(withToken(callCtx(t), bob), &controlv1.RebuildProjectionRequest{Flid: []string{"F4"}, Comment: "x"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a named reader changing: %v, want PERMISSION_DENIED", err)
	}
	// The audit names the person, for the refusals too.
	var names []string
	for _, a := range audits(logs) {
		if c, ok := a["caller"].(map[string]any); ok {
			names = append(names, c["token"].(string)+" "+a["code"].(string))
		}
	}
	if got := strings.Join(names, ","); got != "alice OK,alice InvalidArgument,alice OK,bob PermissionDenied" {
		t.Errorf("audited callers %q", got)
	}

	// The real msgxctl: no --comment is a usage mistake the server names (exit 13).
	env := []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvToken + "=" + alice}
	_, errOut, code := msgxctl(t, env, "rebuild-projection", "F5")
	if code != ctl.ExitCode(codes.InvalidArgument) || !strings.Contains(errOut, "comment") {
		t.Errorf("msgxctl rebuild-projection without --comment: exit %d: %s", code, errOut)
	}
	if out, errOut, code := msgxctl(t, env, "rebuild-projection", "F5", "--comment", "INC-9", "--detach", "-o", "json"); code != 0 || !strings.Contains(out, `"alice"`) {
		t.Errorf("msgxctl rebuild-projection --comment: exit %d: %s%s", code, out, errOut)
	}

	// control.require-comment=false accepts a change without one.
	off := startWith(t, pgtest.New(t), "control-no-comment", time.Now(), func(cfg *config.Config) { cfg.Control.RequireComment = false }, nil)
	waitActive(t, off)
	if _, err := off.client.RebuildProjection(withToken(callCtx(t), token), &controlv1.RebuildProjectionRequest{Flid: []string{"F1"}}); err != nil {
		t.Errorf("with control.require-comment=false a change without a comment: %v", err)
	}
}
