package app_test

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/pkg/sis"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
	"github.com/msgexchange/msgexchange/testkit/testlog"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

func TestRequestRPCs(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	logs := &testlog.Buffer{}
	in := startWith(t, db, "control-req", now, func(c *config.Config) { c.Outbound.RoutingID = "AODB-TEST" }, logs)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)
	count := func() int {
		t.Helper()
		var n int
		if err := db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM req_track`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	dry, err := in.client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{FromDay: "2026-03-02", ToDay: "2026-03-03", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !dry.GetDryRun() || dry.GetRequest().GetScope() != "2026-03-02..2026-03-03" || dry.GetRequest().GetReqId() != 0 || count() != 0 {
		t.Errorf("dry run = %v, %d rows", dry, count())
	}

	first, err := in.client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{FromDay: "2026-03-02", ToDay: "2026-03-03", Comment: "OPS-1"})
	if err != nil {
		t.Fatal(err)
	}
	r := first.GetRequest()
	if r.GetReqId() == 0 || r.GetState() != controlv1.RequestState_REQUEST_STATE_PENDING || r.GetType() != controlv1.RequestType_REQUEST_TYPE_RQFD ||
		r.GetFromDay() != "2026-03-02" || r.GetToDay() != "2026-03-03" || r.GetRoutingId() != "AODB-TEST" || len(r.GetSeqn()) != 6 ||
		!strings.Contains(r.GetPayload(), "<STDB>02MAR260000</STDB>") || !strings.Contains(r.GetPayload(), "<SNDR>OMMS</SNDR>") ||
		!r.GetCreatedAt().AsTime().Equal(now) {
		t.Errorf("registered %v", r)
	}
	// The dry run of the same scope now names the open request; the call then expires it.
	dry, err = in.client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{FromDay: "2026-03-02", ToDay: "2026-03-03", DryRun: true})
	if err != nil || !slices.Equal(dry.GetExpiredIds(), []int64{r.GetReqId()}) {
		t.Errorf("dry run over an open request = %v, %v", dry, err)
	}
	second, err := in.client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{Comment: "INC-T", FromDay: "2026-03-02", ToDay: "2026-03-03"})
	if err != nil || !slices.Equal(second.GetExpiredIds(), []int64{r.GetReqId()}) {
		t.Fatalf("second registration = %v, %v", second, err)
	}

	gate, err := in.client.RequestReference(ctx, &controlv1.RequestReferenceRequest{Comment: "INC-T", Category: "RSTA", Rtyp: "GATE"})
	if err != nil || gate.GetRequest().GetScope() != "RSTA:GATE" || gate.GetRequest().GetType() != controlv1.RequestType_REQUEST_TYPE_RQRD {
		t.Fatalf("RSTA request = %v, %v", gate, err)
	}
	m, err := sis.Decode(gate.GetRequest().GetPayload(), sis.Options{})
	if err != nil || m.Meta.STYP != "RSTA" || m.Body.(*sis.RQRD).RTYP != "GATE" {
		t.Errorf("RSTA payload = %+v, %v", m, err)
	}
	if _, err := in.client.RequestReference(ctx, &controlv1.RequestReferenceRequest{Comment: "INC-T", Category: "GLST"}); err != nil {
		t.Fatal(err)
	}

	for name, call := range map[string]func() error{
		"eight days": func() error {
			_, err := in.client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{Comment: "INC-T", FromDay: "2026-03-01", ToDay: "2026-03-08"})
			return err
		},
		"reversed": func() error {
			_, err := in.client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{Comment: "INC-T", FromDay: "2026-03-03", ToDay: "2026-03-01"})
			return err
		},
		"RSTA without type": func() error {
			_, err := in.client.RequestReference(ctx, &controlv1.RequestReferenceRequest{Comment: "INC-T", Category: "RSTA"})
			return err
		},
		"unknown category": func() error {
			_, err := in.client.RequestReference(ctx, &controlv1.RequestReferenceRequest{Comment: "INC-T", Category: "FLOP"})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	if n := count(); n != 4 {
		t.Errorf("%d requests after the refusals, want 4", n)
	}

	// ListRequests: filters and pages.
	list, err := in.client.ListRequests(ctx, &controlv1.ListRequestsRequest{State: controlv1.RequestState_REQUEST_STATE_EXPIRED})
	if err != nil || len(list.GetRequests()) != 1 || list.GetRequests()[0].GetReqId() != r.GetReqId() || list.GetNextPageToken() != "" {
		t.Errorf("expired = %v, %v", list, err)
	}
	list, err = in.client.ListRequests(ctx, &controlv1.ListRequestsRequest{Type: controlv1.RequestType_REQUEST_TYPE_RQRD})
	if err != nil || len(list.GetRequests()) != 2 {
		t.Errorf("RQRD = %v, %v", list, err)
	}
	var seen []int64
	tok := ""
	for range 5 {
		page, err := in.client.ListRequests(ctx, &controlv1.ListRequestsRequest{PageSize: 3, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.GetRequests() {
			seen = append(seen, r.GetReqId())
		}
		if tok = page.GetNextPageToken(); tok == "" {
			break
		}
	}
	if len(seen) != 4 || !slices.IsSorted(seen) {
		t.Errorf("pages = %v, want the 4 requests in order", seen)
	}
	if _, err := in.client.ListRequests(ctx, &controlv1.ListRequestsRequest{PageToken: "bogus"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bogus token: %v", err)
	}

	// The mutating calls are audited with their comment; the list is a read, not audited.
	var methods []string
	for _, a := range audits(logs) {
		methods = append(methods, a["method"].(string))
		if strings.HasSuffix(a["method"].(string), "/RequestSchedule") && strings.Contains(a["request"].(string), "OPS-1") && a["code"] != "OK" {
			t.Errorf("audit of the first registration = %v", a)
		}
	}
	if n := countSuffix(methods, "/RequestSchedule"); n != 6 {
		t.Errorf("RequestSchedule audited %d times, want 6: %v", n, methods)
	}
	if n := countSuffix(methods, "/RequestReference"); n != 4 {
		t.Errorf("RequestReference audited %d times, want 4", n)
	}
	if n := countSuffix(methods, "/ListRequests"); n != 0 {
		t.Errorf("ListRequests audited %d times, want 0 (a read)", n)
	}
}

func countSuffix(methods []string, suffix string) int {
	n := 0
	for _, m := range methods {
		if strings.HasSuffix(m, suffix) {
			n++
		}
	}
	return n
}

func TestRequestRPCsRefusedByAStandby(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	active := startControl(t, db, "control-a", token, false, now)
	waitActive(t, active)
	standby := startControl(t, db, "control-b", token, false, now)
	ctx := withToken(callCtx(t), token)
	_, err := standby.client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{Comment: "INC-T", FromDay: "2026-03-02", ToDay: "2026-03-02"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "control-a") {
		t.Errorf("standby RequestSchedule = %v, want UNAVAILABLE naming control-a", err)
	}
	_, err = standby.client.RequestReference(ctx, &controlv1.RequestReferenceRequest{Comment: "INC-T", Category: "GLST"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("standby RequestReference = %v, want UNAVAILABLE", err)
	}
	// Reads are served by every instance.
	if _, err := standby.client.ListRequests(ctx, &controlv1.ListRequestsRequest{}); err != nil {
		t.Errorf("standby ListRequests = %v", err)
	}
	var n int
	if err := db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM req_track`).Scan(&n); err != nil || n != 0 {
		t.Errorf("req_track holds %d rows after the standby's refusals", n)
	}
}

func TestDailyScheduleRequest(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	// 03:00:10 airport time (UTC+8) on 1 March.
	now := time.Date(2026, 2, 28, 19, 0, 10, 0, time.UTC)
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	daily := func(c *config.Config) {
		c.Schd.DailyRequest, c.Schd.DailyRequestAt, c.Airport.Zone = true, 3*time.Hour, shanghai
	}
	in := startWith(t, db, "control-daily", now, daily, nil)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)
	var got []*controlv1.UpstreamRequest
	testwait.For(t, 15*time.Second, "the daily RQFD request", func() bool {
		list, err := in.client.ListRequests(ctx, &controlv1.ListRequestsRequest{Type: controlv1.RequestType_REQUEST_TYPE_RQFD})
		if err != nil {
			t.Fatal(err)
		}
		got = list.GetRequests()
		return len(got) > 0
	})
	if len(got) != 1 || got[0].GetScope() != "2026-03-02..2026-03-02" || got[0].GetState() != controlv1.RequestState_REQUEST_STATE_PENDING {
		t.Fatalf("daily requests = %v, want the one for 2 March", got)
	}
	// A new term the same day (a restart) finds the day's request and registers nothing.
	in.stop()
	logs := &testlog.Buffer{}
	again := startWith(t, db, "control-daily-2", now.Add(time.Hour), daily, logs)
	waitActive(t, again)
	testwait.For(t, 15*time.Second, "the new term's daily timer to find the day's request", func() bool {
		return strings.Contains(logs.String(), "daily schedule request already registered today")
	})
	rows, err := request.List(t.Context(), db.Pool, request.Filter{Type: request.TypeRQFD}, 10)
	if err != nil || len(rows) != 1 {
		t.Errorf("after a restart the same day: %d RQFD requests, %v; want 1", len(rows), err)
	}
}

// The bounds of R-REQ-6 through the production wiring, on the injected clock: a caller's burst
// then RESOURCE_EXHAUSTED until the clock has moved on; the cap of open requests
// FAILED_PRECONDITION; days outside the window around the clock's today INVALID_ARGUMENT, and
// the window moves with the clock. Each refusal names its setting.
func TestRequestLimits(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	in := startWith(t, db, "control-req-limits", now, func(c *config.Config) {
		c.Req.CallerPerMinute, c.Req.CallerBurst, c.Req.MaxOpen, c.Req.DayWindow = 2, 3, 5, 10
	}, io.Discard)
	waitActive(t, in)
	clk := in.base.Clock.(*testclock.Clock)
	ctx := withToken(callCtx(t), token)
	schedule := func(from, to string) error {
		_, err := in.client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{Comment: "INC-T", FromDay: from, ToDay: to})
		return err
	}
	refused := func(what string, err error, code codes.Code, setting string) {
		t.Helper()
		if status.Code(err) != code || !strings.Contains(err.Error(), setting) {
			t.Errorf("%s: %v, want %s naming %s", what, err, code, setting)
		}
	}

	// Today is 2026-03-01 (airport time, 20:00): the window is 2026-02-19..2026-03-11.
	refused("a day after the window", schedule("2026-03-12", "2026-03-12"), codes.InvalidArgument, "req.day-window")
	refused("a day before the window", schedule("2026-02-18", "2026-02-19"), codes.InvalidArgument, "req.day-window")
	for _, d := range []string{"2026-03-01", "2026-03-02", "2026-03-03"} {
		if err := schedule(d, d); err != nil {
			t.Fatalf("%s within the burst: %v", d, err)
		}
	}
	err := schedule("2026-03-04", "2026-03-04")
	refused("past the burst", err, codes.ResourceExhausted, "req.caller-per-minute")
	var retry time.Duration
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri.GetRetryDelay().AsDuration()
		}
	}
	if retry != 30*time.Second {
		t.Errorf("past the burst: RetryInfo %s, want 30s (2 a minute)", retry)
	}
	// A dry run spends nothing.
	if _, err := in.client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{FromDay: "2026-03-04", ToDay: "2026-03-04", DryRun: true}); err != nil {
		t.Errorf("a dry run past the burst: %v", err)
	}
	clk.Advance(30 * time.Second) // 2 a minute: one more
	if err := schedule("2026-03-04", "2026-03-04"); err != nil {
		t.Fatalf("after 30 s: %v", err)
	}
	clk.Advance(time.Minute)
	if _, err := in.client.RequestReference(ctx, &controlv1.RequestReferenceRequest{Comment: "INC-T", Category: "GLST"}); err != nil {
		t.Fatalf("the fifth open request: %v", err)
	}
	refused("a sixth open request", schedule("2026-03-05", "2026-03-05"), codes.FailedPrecondition, "req.max-open")
	// The same scope again expires its older request: the count stays at the cap. (The refused
	// call spent its allowance too: a refusal still costs a transaction.)
	clk.Advance(30 * time.Second)
	if err := schedule("2026-03-01", "2026-03-01"); err != nil {
		t.Errorf("registering an open scope again at the cap: %v", err)
	}
	var open int
	if err := db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM req_track WHERE state IN ('PENDING', 'SENT')`).Scan(&open); err != nil || open != 5 {
		t.Errorf("%d open requests (%v), want 5", open, err)
	}

	clk.Advance(20 * 24 * time.Hour) // today 2026-03-21: 2026-03-12 is inside, 2026-03-05 outside
	if _, err := db.Pool.Exec(t.Context(), `UPDATE req_track SET state = 'EXPIRED', expired_at = now()`); err != nil {
		t.Fatal(err)
	}
	if err := schedule("2026-03-12", "2026-03-12"); err != nil {
		t.Errorf("2026-03-12 with today 2026-03-21: %v", err)
	}
	refused("2026-03-05 with today 2026-03-21", schedule("2026-03-05", "2026-03-05"), codes.InvalidArgument, "req.day-window")
}
