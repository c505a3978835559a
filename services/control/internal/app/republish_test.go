package app_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

// Republish registers one job (audited, with who asked) and reports the unsent KAFKA:schd rows;
// a second call while it is open gets it back; Get, List and Cancel answer for it.
func TestRepublishRPCs(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	logs := &testlog.Buffer{}
	in := startWith(t, db, "control-republish", now, nil, logs)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)
	db.Exec(t, `INSERT INTO msg_event (target, partition_key, event_type, state_version, created_at, updated_at)
		VALUES ('KAFKA:schd', 'F9', 'TOMBSTONE', 3, now(), now())`)

	first, err := in.client.Republish(ctx, &controlv1.RepublishRequest{Flid: []string{"F2", "F1", "F2"}, Comment: "INC-733"})
	if err != nil {
		t.Fatal(err)
	}
	r := first.GetRepublish()
	if first.GetAlreadyRunning() || r.GetState() != controlv1.RebuildState_REBUILD_STATE_PENDING || r.GetAll() ||
		strings.Join(r.GetFlid(), ",") != "F1,F2" || r.GetRequestedBy() != "operator-token" || r.GetOutboxPending() != 1 {
		t.Fatalf("first request: %v", first)
	}
	second, err := in.client.Republish(ctx, &controlv1.RepublishRequest{Comment: "INC-T", All: true})
	if err != nil || !second.GetAlreadyRunning() || second.GetRepublish().GetRepublishId() != r.GetRepublishId() {
		t.Fatalf("second request while the first is open: %v, %v; want republish %d back", second, err, r.GetRepublishId())
	}
	var audited []string
	for _, a := range audits(logs) {
		audited = append(audited, a["method"].(string))
	}
	if strings.Count(strings.Join(audited, " "), "/Republish") != 2 {
		t.Errorf("audit lines %v, want both Republish calls", audited)
	}
	got, err := in.client.GetRepublish(ctx, &controlv1.GetRepublishRequest{RepublishId: r.GetRepublishId()})
	if err != nil || got.GetRepublish().GetComment() != "INC-733" {
		t.Fatalf("get: %v, %v", got, err)
	}
	if _, err := in.client.GetRepublish(ctx, &controlv1.GetRepublishRequest{RepublishId: 999}); status.Code(err) != codes.NotFound {
		t.Errorf("get of an unknown republish: %v, want NOT_FOUND", err)
	}
	if _, err := in.client.Republish(ctx, &controlv1.RepublishRequest{Comment: "INC-T"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("republish of nothing: %v, want INVALID_ARGUMENT", err)
	}
	c, err := in.client.CancelRepublish(ctx, &controlv1.CancelRepublishRequest{Comment: "INC-T", RepublishId: r.GetRepublishId()})
	if err != nil || c.GetRepublish().GetState() != controlv1.RebuildState_REBUILD_STATE_CANCELLED {
		t.Fatalf("cancel a pending republish: %v, %v", c, err)
	}
	if _, err := in.client.CancelRepublish(ctx, &controlv1.CancelRepublishRequest{Comment: "INC-T", RepublishId: r.GetRepublishId()}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("cancel an ended republish: %v, want FAILED_PRECONDITION", err)
	}
	third, err := in.client.Republish(ctx, &controlv1.RepublishRequest{Comment: "INC-T", All: true})
	if err != nil || third.GetAlreadyRunning() || !third.GetRepublish().GetAll() {
		t.Fatalf("request after the cancel: %v, %v", third, err)
	}
	list, err := in.client.ListRepublishes(ctx, &controlv1.ListRepublishesRequest{PageSize: 1})
	if err != nil || len(list.GetRepublishes()) != 1 || list.GetRepublishes()[0].GetRepublishId() != third.GetRepublish().GetRepublishId() || list.GetNextPageToken() == "" {
		t.Fatalf("list page 1: %v, %v", list, err)
	}
	list, err = in.client.ListRepublishes(ctx, &controlv1.ListRepublishesRequest{PageSize: 1, PageToken: list.GetNextPageToken()})
	if err != nil || len(list.GetRepublishes()) != 1 || list.GetRepublishes()[0].GetRepublishId() != r.GetRepublishId() {
		t.Fatalf("list page 2: %v, %v", list, err)
	}
}
