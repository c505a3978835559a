package app_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

// inbox-behind-watermark as ingest records it: GetStatus shows the violation and a negative
// lag (never "caught up"); resuming is refused while the inbox is behind, allowed once a row
// at or above W exists, audited, and clears the violation.
func TestResolveInboxBehindWatermark(t *testing.T) {
	t.Parallel()
	db, my := pgtest.New(t), mysqltest.New(t)
	for range 3 {
		my.InsertInbox(t, "<MSG/>", nil)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	since := now.Add(-time.Minute)
	if err := cursor.Save(t.Context(), db.Pool, 10, nil, since); err != nil {
		t.Fatal(err)
	}
	detail := "the inbox's largest ID 3 is below W 10"
	if err := cursor.RecordViolation(t.Context(), db.Pool, cursor.Violation{Kind: cursor.KindInboxBehind, Since: since, Detail: detail}); err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	in := startWith(t, db, "control-contract", now, func(cfg *config.Config) { cfg.MySQL.DSN = my.ServiceDSN }, logs)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)

	st, err := in.client.GetStatus(ctx, &controlv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	d := st.GetDiscovery()
	if v := d.GetContractViolation(); v.GetKind() != cursor.KindInboxBehind || !v.GetSince().AsTime().Equal(since) || v.GetDetail() != detail {
		t.Errorf("contract_violation = %v, want %s since %v", v, cursor.KindInboxBehind, since)
	}
	if d.Lag == nil || d.GetLag() != -7 || d.GetInboxMaxId() != 3 {
		t.Errorf("lag = %v, inbox max %d; want -7 and 3 (the inbox is behind W, not caught up)", d.Lag, d.GetInboxMaxId())
	}

	resume := &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindInboxBehindWatermark,
		Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, DryRun: true, Comment: "INC-77"}
	if _, err := in.client.ResolveContractViolation(ctx, resume); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "still below W") {
		t.Errorf("resume while behind = %v, want FailedPrecondition (still below W)", err)
	}
	wrong := &controlv1.ResolveContractViolationRequest{Comment: "INC-T", Kind: controlv1.KindMarkedAboveWatermark,
		Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME}
	if _, err := in.client.ResolveContractViolation(ctx, wrong); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), cursor.KindInboxBehind+" stands") {
		t.Errorf("resolving the other kind = %v, want FailedPrecondition naming the standing one", err)
	}

	// The database team sets the counter above W; the next row proves it.
	if _, err := my.Admin.ExecContext(t.Context(), `ALTER TABLE cminmsgs AUTO_INCREMENT = 11`); err != nil {
		t.Fatal(err)
	}
	if id := my.InsertInbox(t, "<MSG/>", nil); id != 11 {
		t.Fatalf("row after the fix = %d, want 11", id)
	}
	resp, err := in.client.ResolveContractViolation(ctx, resume)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetDryRun() || resp.GetWatermark() != 10 || resp.GetInboxMaxId() != 11 || resp.GetResolved().GetKind() != cursor.KindInboxBehind {
		t.Errorf("dry run = %v, want W 10, inbox max 11", resp)
	}
	if st, _ := in.client.GetStatus(ctx, &controlv1.GetStatusRequest{}); st.GetDiscovery().GetContractViolation() == nil {
		t.Error("the dry run cleared the violation")
	}
	resume.DryRun = false
	if resp, err = in.client.ResolveContractViolation(ctx, resume); err != nil || resp.GetWatermarkBefore() != 10 || resp.GetWatermark() != 10 ||
		!resp.GetResolvedAt().AsTime().Equal(now) {
		t.Fatalf("resume = %v, %v; want W 10 kept, resolved at %v", resp, err, now)
	}
	st, err = in.client.GetStatus(ctx, &controlv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d := st.GetDiscovery(); d.GetContractViolation() != nil || d.GetLag() != 1 {
		t.Errorf("after resume: violation %v, lag %d; want none and 1", d.GetContractViolation(), d.GetLag())
	}
	if _, err := in.client.ResolveContractViolation(ctx, resume); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second resume = %v, want FailedPrecondition (nothing stands)", err)
	}
	var audited []map[string]any
	for _, a := range audits(logs) {
		if strings.HasSuffix(a["method"].(string), "/ResolveContractViolation") {
			audited = append(audited, a)
		}
	}
	if len(audited) != 5 || !strings.Contains(audited[3]["request"].(string), "INC-77") || audited[3]["code"] != "OK" {
		t.Errorf("audit lines of ResolveContractViolation = %v, want 5 with the comment, the fourth OK", audited)
	}

	// since is checked before anything is read: not ahead of the server's clock by more than
	// the skew, and not at the zero of a timestamp left unset.
	for _, tc := range []struct {
		since *timestamppb.Timestamp
		want  string
	}{
		{timestamppb.New(now.Add(time.Hour)), "1h0m0s after the server's clock (2026-03-01T12:00:00Z)"},
		{&timestamppb.Timestamp{}, "since 1970-01-01T00:00:00Z is before 2020-01-01"},
	} {
		resume.Since = tc.since
		if _, err := in.client.ResolveContractViolation(ctx, resume); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("since %v: %v, want INVALID_ARGUMENT with %q", tc.since.AsTime(), err, tc.want)
		}
	}
}

// marked-above-watermark after a PostgreSQL restore: skip-marked moves W over the marked rows
// directly above it and reports where the run ended, only when forced; a dry run changes
// nothing and needs no force; a through that
// covers an unmarked row is refused; skip-marked of inbox-behind-watermark is invalid.
func TestResolveMarkedAboveWatermark(t *testing.T) {
	t.Parallel()
	db, my := pgtest.New(t), mysqltest.New(t)
	var ids []int64
	for range 6 {
		ids = append(ids, my.InsertInbox(t, "<MSG/>", nil))
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, err := my.Admin.ExecContext(t.Context(), `UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ? WHERE CMINMSGS_ID IN (?, ?, ?)`,
		now.Add(-time.Hour), ids[2], ids[3], ids[5]); err != nil {
		t.Fatal(err)
	}
	if err := cursor.Save(t.Context(), db.Pool, ids[1], nil, now); err != nil {
		t.Fatal(err)
	}
	if err := cursor.RecordViolation(t.Context(), db.Pool, cursor.Violation{Kind: cursor.KindMarkedAbove, Since: now, Detail: "row above W"}); err != nil {
		t.Fatal(err)
	}
	in := startWith(t, db, "control-contract-marked", now, func(cfg *config.Config) { cfg.MySQL.DSN = my.ServiceDSN }, nil)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)

	req := &controlv1.ResolveContractViolationRequest{Comment: "INC-T", Kind: controlv1.KindMarkedAboveWatermark,
		Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_SKIP_MARKED, Through: ids[5], Force: true}
	if _, err := in.client.ResolveContractViolation(ctx, req); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "no processed marker") {
		t.Errorf("skip through the unmarked row = %v, want FailedPrecondition", err)
	}
	req.Through, req.DryRun, req.Force = 0, true, false
	resp, err := in.client.ResolveContractViolation(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetDryRun() || resp.GetWatermarkBefore() != ids[1] || resp.GetWatermark() != ids[3] || resp.GetSkipped() != 2 ||
		resp.GetFirstUnmarkedId() != ids[4] || resp.GetMore() {
		t.Errorf("dry run = %v, want W %d → %d, 2 skipped, first unmarked %d", resp, ids[1], ids[3], ids[4])
	}
	if st, _ := in.client.GetStatus(ctx, &controlv1.GetStatusRequest{}); st.GetDiscovery().GetWatermark() != ids[1] ||
		st.GetDiscovery().GetContractViolation().GetKind() != cursor.KindMarkedAbove {
		t.Fatalf("after the dry run: discovery %v, want W %d and the violation standing", st.GetDiscovery(), ids[1])
	}
	// since names the violation the decision is for: another one is refused.
	req.DryRun, req.Since = false, timestamppb.New(now.Add(-time.Second))
	if _, err := in.client.ResolveContractViolation(ctx, req); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("skip naming another violation's since = %v, want FailedPrecondition", err)
	}
	req.Since = resp.GetResolved().GetSince()
	// The skip leaves consumers ahead of the flight state: refused unless forced (R-RESTORE-3).
	if _, err := in.client.ResolveContractViolation(ctx, req); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "set force") {
		t.Errorf("skip without force = %v, want FailedPrecondition naming force", err)
	}
	req.Force = true
	if resp, err = in.client.ResolveContractViolation(ctx, req); err != nil || resp.GetWatermark() != ids[3] {
		t.Fatalf("skip = %v, %v; want W %d", resp, err, ids[3])
	}
	st, err := in.client.GetStatus(ctx, &controlv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d := st.GetDiscovery(); d.GetWatermark() != ids[3] || d.GetContractViolation() != nil {
		t.Errorf("after the skip: discovery %v, want W %d and no violation", d, ids[3])
	}
	if _, err := in.client.ResolveContractViolation(ctx, &controlv1.ResolveContractViolationRequest{Comment: "INC-T", Kind: controlv1.KindInboxBehindWatermark,
		Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_SKIP_MARKED}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("skip-marked of inbox-behind-watermark = %v, want InvalidArgument", err)
	}
}

// resume of marked-above-watermark after a restore: refused until a version floor was recorded
// after the marker of the first marked row above W (the restored timeline's), so the rows run
// again are published above what consumers hold; force overrides, a floor from before the
// markers does not count (R-RESTORE-3).
func TestResumeAfterRestoreNeedsTheVersionFloor(t *testing.T) {
	t.Parallel()
	db, my := pgtest.New(t), mysqltest.New(t)
	var ids []int64
	for range 3 {
		ids = append(ids, my.InsertInbox(t, "<MSG/>", nil))
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	marked := now.Add(-time.Hour)
	if _, err := my.Admin.ExecContext(t.Context(), `UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ? WHERE CMINMSGS_ID IN (?, ?)`,
		marked, ids[1], ids[2]); err != nil {
		t.Fatal(err)
	}
	if err := cursor.StartMarkerWatch(t.Context(), db.Pool, now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := cursor.Save(t.Context(), db.Pool, ids[0], nil, now); err != nil {
		t.Fatal(err)
	}
	if err := cursor.RecordViolation(t.Context(), db.Pool, cursor.Violation{Kind: cursor.KindMarkedAbove, Since: now, Detail: "row above W"}); err != nil {
		t.Fatal(err)
	}
	in := startWith(t, db, "control-contract-floor", now, func(cfg *config.Config) { cfg.MySQL.DSN = my.ServiceDSN }, nil)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)
	req := &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
		Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, DryRun: true}
	for name, floorAt := range map[string]*time.Time{"no floor": nil, "a floor from before the markers": new(marked.Add(-time.Minute))} {
		if floorAt != nil {
			if _, err := flightstore.RaiseVersions(t.Context(), db.Pool, map[string]int64{"F1": 3}, 0, *floorAt); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := in.client.ResolveContractViolation(ctx, req); status.Code(err) != codes.FailedPrecondition ||
			!strings.Contains(err.Error(), "version-floor") {
			t.Errorf("%s: resume = %v, want FailedPrecondition naming version-floor", name, err)
		}
	}
	req.Force = true
	if _, err := in.client.ResolveContractViolation(ctx, req); err != nil {
		t.Errorf("forced resume dry run = %v, want it answered", err)
	}
	req.Force = false
	if _, err := flightstore.RaiseVersions(t.Context(), db.Pool, map[string]int64{"F1": 4}, 0, now); err != nil {
		t.Fatal(err)
	}
	if _, err := in.client.ResolveContractViolation(ctx, req); err != nil {
		t.Errorf("resume after the floor = %v, want it answered", err)
	}
}
