package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/service"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/services/control/internal/app"
	"github.com/msgexchange/msgexchange/services/control/internal/ctl"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

const token = "s3cret-operator-token-0123456789ab"

// instance is a running control instance and a client connection to it.
type instance struct {
	name   string
	addr   string
	conn   *grpc.ClientConn
	client controlv1.ControlServiceClient
	base   *service.Base
	// stop ends the instance as SIGTERM would and checks that it stopped cleanly; it also
	// runs at cleanup, once.
	stop func()
}

// startControl runs the production wiring (service.Base → app.New → Run) against db on a
// loopback port, with the clock standing at now, and stops it when the test ends. insecure
// sets control-insecure (allowInsecure).
func startControl(t *testing.T, db *pgtest.DB, name, configToken string, allowInsecure bool, now time.Time) *instance {
	t.Helper()
	return startWith(t, db, name, now, func(cfg *config.Config) {
		cfg.Control.Token = configToken
		cfg.Control.Insecure = allowInsecure
	}, nil)
}

// startWith is startControl with any configuration (edit) and the logs also copied to logs
// (may be nil). It returns once the instance listens; the client speaks plaintext unless the
// configuration serves TLS, in which case the caller dials itself (instance.addr).
func startWith(t *testing.T, db *pgtest.DB, name string, now time.Time, edit func(*config.Config), logs io.Writer) *instance {
	t.Helper()
	cfg := config.Default()
	cfg.PG.DSN = db.DSN
	cfg.Admin.Addr = "127.0.0.1:0"
	cfg.GRPC.Addr = "127.0.0.1:0"
	cfg.Control.Token = token
	cfg.Instance = name
	cfg.ShutdownTimeout = 10 * time.Second
	// No MySQL unless the test gives one: a closed port fails at once, never hangs.
	cfg.MySQL.DSN = "root@tcp(127.0.0.1:1)/none?parseTime=true"
	cfg.Inbox.Timeout = 2 * time.Second
	// Nor Redis: control only reads it for GetFlight, and connects lazily.
	cfg.Redis.URL = "redis://127.0.0.1:1/0"
	if edit != nil {
		edit(&cfg)
	}
	var out io.Writer = t.Output()
	if logs != nil {
		out = io.MultiWriter(t.Output(), logs)
	}
	logger := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))

	ctx, cancel := context.WithCancel(context.Background())
	b, err := service.New(ctx, "control", cfg, logger)
	if err != nil {
		cancel()
		t.Fatalf("service.New: %v", err)
	}
	b.Clock = testclock.New(now)
	a, err := app.New(b)
	if err != nil {
		b.Close()
		cancel()
		t.Fatalf("app.New: %v", err)
	}
	addr, err := a.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: Run returned %v after cancel, want nil", name, err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("%s: Run did not return within 15s of cancel", name)
		}
		b.Close()
	})
	t.Cleanup(stop)

	in := &instance{name: name, addr: addr.String(), base: b, stop: stop}
	if cfg.Control.TLSCert == "" {
		conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		in.conn, in.client = conn, controlv1.NewControlServiceClient(conn)
	}
	return in
}

func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitActive polls GetStatus until this instance holds the control role.
func waitActive(t *testing.T, in *instance) *controlv1.GetStatusResponse {
	t.Helper()
	var st *controlv1.GetStatusResponse
	testwait.ForState(t, 15*time.Second, "instance "+in.name+" to become the active control instance", func() (bool, string) {
		var err error
		st, err = in.client.GetStatus(withToken(callCtx(t), token), &controlv1.GetStatusRequest{})
		if err != nil {
			t.Fatalf("GetStatus: %v", err)
		}
		return st.GetServedByActive(), fmt.Sprint(st.GetRoles())
	})
	return st
}

func TestGetStatus(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }

	// Discovery: W = 42, a hole open for 3 minutes, seeded at an explicit ID; two released
	// holes (IDs 10-12 and 20) of which one late row was found and enqueued, another found.
	holeSince := ago(3 * time.Minute)
	if err := cursor.Save(ctx, db.Pool, 42, &holeSince, now); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `UPDATE inbox_cursor SET seeded_at = $1, seed_mode = 'id', seed_value = 7`, ago(24*time.Hour))
	if err := cursor.ReleaseHole(ctx, db.Pool, 10, 12, ago(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := cursor.ReleaseHole(ctx, db.Pool, 20, 20, ago(time.Hour)); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO inbox_late (msg_id, hole_first, detected_at, enqueued_at) VALUES
		(11, 10, $1, $1), (20, 20, $1, NULL)`, ago(time.Minute))
	// Two open holes above W with their own clocks (43 seen 3m ago, 50-51 1m ago), 15 rows
	// scanned beyond W and waiting, and three measured commit delays.
	if err := cursor.SaveOpenHoles(ctx, db.Pool, nil, []cursor.OpenHole{{First: 43, Last: 43, SeenAt: holeSince},
		{First: 50, Last: 51, SeenAt: ago(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	if err := cursor.SaveDiscovery(ctx, db.Pool, cursor.Discovery{ScannedTo: 60, WaitingRows: 15, WaitingSince: &holeSince,
		MaxCommitDelay: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := cursor.RecordFills(ctx, db.Pool, []float64{0.2, 1.5, 40}, ago(time.Hour)); err != nil {
		t.Fatal(err)
	}

	// Queue: 3 unfinished (oldest enqueued 20m ago), 4 terminal of which 3 finished within the
	// last five minutes; one marked, one abandoned, two awaiting their marker.
	row := func(id int64, state, class string, enqueued time.Time, finished, backfillAt *time.Time, reason string) {
		var abandoned *time.Time
		if reason != "" {
			abandoned = finished
		}
		db.Exec(t, `INSERT INTO proc_state (msg_id, state, error_class, enqueued_at, finished_at, backfill_at,
			backfill_abandoned_at, backfill_abandon_reason, updated_at)
			VALUES ($1, $2, nullif($3, ''), $4, $5, $6, $7, nullif($8, ''), $4)`,
			id, state, class, enqueued, finished, backfillAt, abandoned, reason)
	}
	at := func(d time.Duration) *time.Time { v := ago(d); return &v }
	row(1, "SUCCEEDED", "", ago(time.Hour), at(2*time.Hour), at(time.Hour), "")
	row(2, "SUCCEEDED", "", ago(time.Hour), at(4*time.Minute), nil, "MISSING_ROW")
	row(3, "SUCCEEDED", "", ago(time.Hour), at(3*time.Minute), nil, "")
	row(4, "DEAD", "EXHAUSTED", ago(time.Hour), at(2*time.Minute), nil, "")
	row(5, "FAILED", "INFRA", ago(20*time.Minute), nil, nil, "")
	row(6, "PENDING", "", ago(10*time.Minute), nil, nil, "")
	row(7, "PENDING", "", ago(time.Minute), nil, nil, "")

	// Outbox: KAFKA:msg has one pending event written 90s ago and one DEAD; KAFKA:schd is empty.
	for _, s := range []string{"PENDING", "DEAD"} {
		db.Exec(t, `INSERT INTO msg_event (target, partition_key, event_type, state_version, state, created_at, updated_at)
			VALUES ('KAFKA:msg', 'F1', 'UPSERT', 1, $1, $2, $2)`, s, ago(90*time.Second))
	}
	// A pump that died: its row is still there but no connection holds the lock.
	db.Exec(t, `INSERT INTO role_holder (role, instance, backend_pid, since, heartbeat_at)
		VALUES ('pump', 'pump-gone', 999999, $1, $2)`, ago(time.Hour), ago(30*time.Minute))

	in := startControl(t, db, "control-test-1", token, false, now)
	st := waitActive(t, in)

	if !st.GetObservedAt().AsTime().Equal(now) || st.GetServedBy() != "control-test-1" {
		t.Errorf("observed_at %v served_by %q, want %v and control-test-1", st.GetObservedAt().AsTime(), st.GetServedBy(), now)
	}

	// Roles: all five, in pipeline order; control held and active by this instance; pump held
	// but not active; the others never held.
	var roles []string
	for _, r := range st.GetRoles() {
		roles = append(roles, r.GetRole())
		switch r.GetRole() {
		case "control":
			if !r.GetHeld() || !r.GetActive() || r.GetInstance() != "control-test-1" || r.GetBackendPid() == 0 ||
				!r.GetSince().AsTime().Equal(now) || r.GetHeartbeatAt() == nil {
				t.Errorf("control role = %v, want held and active by control-test-1 since %v", r, now)
			}
		case "pump":
			if !r.GetHeld() || r.GetActive() || r.GetInstance() != "pump-gone" || r.GetBackendPid() != 999999 ||
				!r.GetHeartbeatAt().AsTime().Equal(ago(30*time.Minute)) {
				t.Errorf("pump role = %v, want recorded holder pump-gone, not active", r)
			}
		default:
			if r.GetHeld() || r.GetActive() || r.GetInstance() != "" {
				t.Errorf("%s role = %v, want never held", r.GetRole(), r)
			}
		}
	}
	if want := []string{"ingest", "pump", "dispatcher", "backfill", "control"}; !slices.Equal(roles, want) {
		t.Errorf("roles = %v, want %v", roles, want)
	}

	d := st.GetDiscovery()
	if d.GetWatermark() != 42 || !d.GetHoleSince().AsTime().Equal(holeSince) || d.GetHoleAge().AsDuration() != 3*time.Minute {
		t.Errorf("discovery W=%d hole_since=%v hole_age=%v, want 42, %v, 3m", d.GetWatermark(),
			d.GetHoleSince().AsTime(), d.GetHoleAge().AsDuration(), holeSince)
	}
	if !d.GetSeededAt().AsTime().Equal(ago(24*time.Hour)) || d.GetSeedMode() != "id" || d.GetSeedValue() != 7 {
		t.Errorf("seeding = %v %q %d, want %v id 7", d.GetSeededAt().AsTime(), d.GetSeedMode(), d.GetSeedValue(), ago(24*time.Hour))
	}
	if d.GetPermanentHoleRanges() != 2 || d.GetPermanentHoleIds() != 4 || d.GetLateDetected() != 2 || d.GetLateEnqueued() != 1 {
		t.Errorf("holes = %d ranges, %d IDs, %d late detected, %d late enqueued; want 2, 4, 2, 1",
			d.GetPermanentHoleRanges(), d.GetPermanentHoleIds(), d.GetLateDetected(), d.GetLateEnqueued())
	}

	if d.GetWaitingRows() != 15 || d.GetScannedTo() != 60 || d.GetOldestWaitingAge().AsDuration() != 3*time.Minute ||
		d.GetOpenHoleRanges() != 2 || d.GetOpenHoleIds() != 3 || len(d.GetOpenHoles()) != 2 ||
		d.GetOpenHoles()[1].GetAge().AsDuration() != time.Minute || !d.GetOpenHoles()[1].GetReleaseAt().AsTime().Equal(now.Add(4*time.Minute)) ||
		!d.GetNextReleaseAt().AsTime().Equal(now.Add(2*time.Minute)) || d.GetMaxCommitDelay().AsDuration() != 5*time.Minute {
		t.Errorf("waiting beyond W = %d rows (scanned to %d, oldest %v), open holes %d/%d %v, next release %v; want 15 (60, 3m), 2/3, next in 2m",
			d.GetWaitingRows(), d.GetScannedTo(), d.GetOldestWaitingAge().AsDuration(), d.GetOpenHoleRanges(), d.GetOpenHoleIds(),
			d.GetOpenHoles(), d.GetNextReleaseAt().AsTime())
	}
	if cd := d.GetCommitDelay(); cd.GetFills() != 3 || cd.GetMax().AsDuration() != 40*time.Second ||
		!cd.GetMaxAt().AsTime().Equal(ago(time.Hour)) || cd.GetP99Bound().AsDuration() != 60*time.Second {
		t.Errorf("commit delay = %v, want 3 fills, max 40s an hour ago, p99 within the 60s bucket", cd)
	}

	wantStates := []*controlv1.StateCount{
		{State: controlv1.MessageState_MESSAGE_STATE_PENDING, Count: 2},
		{State: controlv1.MessageState_MESSAGE_STATE_FAILED, Count: 1},
		{State: controlv1.MessageState_MESSAGE_STATE_SUCCEEDED, Count: 3},
		{State: controlv1.MessageState_MESSAGE_STATE_SKIPPED, Count: 0},
		{State: controlv1.MessageState_MESSAGE_STATE_DEAD, Count: 1},
	}
	if !protoSlicesEqual(st.GetByState(), wantStates) {
		t.Errorf("by_state = %v, want %v", st.GetByState(), wantStates)
	}
	wantClasses := []*controlv1.ErrorClassCount{
		{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_INFRA, Count: 1},
		{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED, Count: 1},
	}
	if !protoSlicesEqual(st.GetByErrorClass(), wantClasses) {
		t.Errorf("by_error_class = %v, want %v", st.GetByErrorClass(), wantClasses)
	}

	bl := st.GetBacklog()
	// 3 finished in the window → 0.01/s; 3 unfinished and 15 waiting for discovery → 1800s.
	if bl.GetUnfinished() != 3 || bl.GetOldestUnfinishedAge().AsDuration() != 20*time.Minute || bl.GetWaitingDiscovery() != 15 ||
		bl.GetFinishedLast_5M() != 3 || bl.GetFinishedPerSecond() != 0.01 || bl.GetEstimatedDrain().AsDuration() != 1800*time.Second {
		t.Errorf("backlog = %v, want 3 unfinished, 15 waiting, oldest 20m, 3 finished in 5m, 0.01/s, drain 1800s", bl)
	}

	bf := st.GetBackfill()
	wantReasons := []*controlv1.AbandonedCount{{Reason: controlv1.AbandonReason_ABANDON_REASON_MISSING_ROW, Count: 1}}
	if bf.GetPending() != 2 || bf.GetAbandoned() != 1 || !protoSlicesEqual(bf.GetAbandonedByReason(), wantReasons) {
		t.Errorf("backfill = %v, want 2 pending, 1 abandoned (MISSING_ROW)", bf)
	}

	wantOutbox := []*controlv1.OutboxTarget{
		{Target: "KAFKA:msg", Pending: 1, Dead: 1, OldestPendingAge: st.GetOutbox()[0].GetOldestPendingAge()},
		{Target: "KAFKA:schd"},
	}
	if !protoSlicesEqual(st.GetOutbox(), wantOutbox) || st.GetOutbox()[0].GetOldestPendingAge().AsDuration() != 90*time.Second {
		t.Errorf("outbox = %v, want KAFKA:msg 1 pending (90s) 1 dead, KAFKA:schd empty", st.GetOutbox())
	}
}

// TestGetStatusEstimatesTheBulkStates: past queue.ExactCountBelow rows a week's SUCCEEDED rows
// are the planner's estimate, flagged, so the call never counts the whole table; the rare
// states stay counted.
func TestGetStatusEstimatesTheBulkStates(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	bulk := int64(queue.ExactCountBelow * 3 / 2)
	db.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, finished_at, backfill_at, updated_at)
		SELECT i, 'SUCCEEDED', $2, $2, $2, $2 FROM generate_series(1, $1::bigint) AS i`, bulk, now.Add(-time.Hour))
	db.Exec(t, `INSERT INTO proc_state (msg_id, state, error_class, enqueued_at, finished_at, updated_at) VALUES
		($1, 'SKIPPED', 'UNSUPPORTED', $2, $2, $2), ($1 + 1, 'DEAD', 'MALFORMED', $2, $2, $2), ($1 + 2, 'PENDING', NULL, $2, NULL, $2)`,
		bulk+1, now.Add(-time.Minute))
	db.Exec(t, `ANALYZE proc_state`)

	st := waitActive(t, startControl(t, db, "control-bulk", token, false, now))
	for _, c := range st.GetByState() {
		switch c.GetState() {
		case controlv1.MessageState_MESSAGE_STATE_SUCCEEDED:
			if !c.GetEstimated() || c.GetCount() < bulk*95/100 || c.GetCount() > bulk*105/100 {
				t.Errorf("SUCCEEDED = %v, want an estimate within 5%% of %d", c, bulk)
			}
		default:
			want := int64(1)
			if c.GetState() == controlv1.MessageState_MESSAGE_STATE_FAILED {
				want = 0
			}
			if c.GetEstimated() || c.GetCount() != want {
				t.Errorf("%s = %v, want exactly %d", c.GetState(), c, want)
			}
		}
	}
	wantClasses := []*controlv1.ErrorClassCount{
		{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_MALFORMED, Count: 1},
		{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_UNSUPPORTED, Count: 1},
	}
	if !protoSlicesEqual(st.GetByErrorClass(), wantClasses) {
		t.Errorf("by_error_class = %v, want %v", st.GetByErrorClass(), wantClasses)
	}
}

func protoSlicesEqual[M proto.Message](got, want []M) bool {
	return slices.EqualFunc(got, want, func(a, b M) bool { return proto.Equal(a, b) })
}

func TestGetMessage(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	db.Exec(t, `INSERT INTO proc_state (msg_id, state, error_class, last_error, attempts, identity_key, msg_type, msg_styp,
		received_at, enqueued_at, processing_started_at, finished_at, backfill_next_at, backfill_attempts,
		backfill_abandoned_at, backfill_abandon_reason, trace_parent, updated_at)
		VALUES (77, 'DEAD', 'EXHAUSTED', 'redis: timeout', 5, 'FLOP|F1|ESTT|1', 'FLOP', 'ESTT',
		$1, $2, $2, $3, $3, 3, $3, 'TRANSIENT_DEADLINE', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', $3)`,
		now.Add(-time.Hour), now.Add(-50*time.Minute), now.Add(-time.Minute))
	in := startControl(t, db, "control-test-2", token, false, now)
	ctx := withToken(callCtx(t), token)

	t.Run("known", func(t *testing.T) {
		got, err := in.client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: 77})
		if err != nil {
			t.Fatal(err)
		}
		m := got.GetMessage()
		if m.GetMsgId() != 77 || m.GetState() != controlv1.MessageState_MESSAGE_STATE_DEAD ||
			m.GetErrorClass() != controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED || m.GetLastError() != "redis: timeout" ||
			m.GetAttempts() != 5 || m.GetIdentityKey() != "FLOP|F1|ESTT|1" || m.GetMsgType() != "FLOP" || m.GetMsgStyp() != "ESTT" {
			t.Errorf("message = %v", m)
		}
		if !m.GetReceivedAt().AsTime().Equal(now.Add(-time.Hour)) || !m.GetEnqueuedAt().AsTime().Equal(now.Add(-50*time.Minute)) ||
			!m.GetFinishedAt().AsTime().Equal(now.Add(-time.Minute)) || m.GetBackfillAt() != nil || m.GetNextAttemptAt() != nil {
			t.Errorf("times: received %v enqueued %v finished %v backfill_at %v next_attempt %v", m.GetReceivedAt(),
				m.GetEnqueuedAt(), m.GetFinishedAt(), m.GetBackfillAt(), m.GetNextAttemptAt())
		}
		if m.GetBackfillAttempts() != 3 || m.GetBackfillAbandonReason() != controlv1.AbandonReason_ABANDON_REASON_TRANSIENT_DEADLINE ||
			m.GetBackfillAbandonedAt() == nil || m.GetTraceParent() == "" {
			t.Errorf("backfill/trace fields = %v", m)
		}
	})
	t.Run("unknown is NotFound", func(t *testing.T) {
		_, err := in.client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: 78})
		if code := status.Code(err); code != codes.NotFound {
			t.Errorf("GetMessage(78) = %v, want NotFound", err)
		}
	})
	t.Run("traced with the caller's trace context", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		in.base.Telemetry.Provider.RegisterSpanProcessor(rec)
		const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		tctx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		if _, err := in.client.GetMessage(tctx, &controlv1.GetMessageRequest{MsgId: 77}); err != nil {
			t.Fatal(err)
		}
		// The server ends its span after the response is on its way, so the client can see
		// the answer first: wait for the span rather than look once.
		testwait.ForState(t, 5*time.Second, "a GetMessage span in trace "+traceID, func() (bool, string) {
			var names []string
			for _, span := range rec.Ended() {
				names = append(names, span.Name())
				if span.Name() == "msgx.control.v1.ControlService/GetMessage" && span.SpanContext().TraceID().String() == traceID {
					return true, ""
				}
			}
			return false, fmt.Sprintf("spans ended: %v", names)
		})
	})
	t.Run("zero is InvalidArgument", func(t *testing.T) {
		_, err := in.client.GetMessage(ctx, &controlv1.GetMessageRequest{})
		if code := status.Code(err); code != codes.InvalidArgument {
			t.Errorf("GetMessage(0) = %v, want InvalidArgument", err)
		}
	})
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	in := startControl(t, db, "control-test-3", token, false, time.Now())

	for name, ctx := range map[string]context.Context{
		"no token":     callCtx(t),
		"wrong token":  withToken(callCtx(t), token+"x"),
		"empty token":  withToken(callCtx(t), ""),
		"wrong scheme": metadata.AppendToOutgoingContext(callCtx(t), "authorization", "Basic "+token),
		"token prefix": withToken(callCtx(t), token[:len(token)-1]),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := in.client.GetStatus(ctx, &controlv1.GetStatusRequest{})
			if code := status.Code(err); code != codes.Unauthenticated {
				t.Errorf("GetStatus = %v, want Unauthenticated", err)
			}
			// The check runs before the handler: an unknown message is not revealed as NotFound.
			_, err = in.client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: 1})
			if code := status.Code(err); code != codes.Unauthenticated {
				t.Errorf("GetMessage = %v, want Unauthenticated", err)
			}
		})
	}
	t.Run("right token", func(t *testing.T) {
		if _, err := in.client.GetStatus(withToken(callCtx(t), token), &controlv1.GetStatusRequest{}); err != nil {
			t.Errorf("GetStatus with the token: %v", err)
		}
	})
	t.Run("health needs no token", func(t *testing.T) {
		for _, svc := range []string{"", "msgx.control.v1.ControlService"} {
			resp, err := healthpb.NewHealthClient(in.conn).Check(callCtx(t), &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health %q = %v, %v; want SERVING", svc, resp, err)
			}
		}
	})
	t.Run("reflection needs a token", func(t *testing.T) {
		stream, err := reflectionpb.NewServerReflectionClient(in.conn).ServerReflectionInfo(callCtx(t))
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("reflection without a token: %v, want UNAUTHENTICATED", err)
		}
	})
	t.Run("reflection lists and describes the control service with a token", func(t *testing.T) {
		stream, err := reflectionpb.NewServerReflectionClient(in.conn).ServerReflectionInfo(withToken(callCtx(t), token))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = stream.CloseSend() }()
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
		}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("list services: %v", err)
		}
		var services []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			services = append(services, s.GetName())
		}
		if !slices.Contains(services, "msgx.control.v1.ControlService") {
			t.Errorf("reflection lists %v, want msgx.control.v1.ControlService", services)
		}
		// grpcurl describe: the file that defines the service, with every RPC.
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "msgx.control.v1.ControlService"},
		}); err != nil {
			t.Fatal(err)
		}
		resp, err = stream.Recv()
		if err != nil {
			t.Fatalf("file containing symbol: %v", err)
		}
		var methods []string
		for _, raw := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
			var fd descriptorpb.FileDescriptorProto
			if err := proto.Unmarshal(raw, &fd); err != nil {
				t.Fatal(err)
			}
			for _, svc := range fd.GetService() {
				if fd.GetPackage()+"."+svc.GetName() == "msgx.control.v1.ControlService" {
					for _, m := range svc.GetMethod() {
						methods = append(methods, m.GetName())
					}
				}
			}
		}
		var want []string
		ms := controlv1.File_msgx_control_v1_control_proto.Services().ByName("ControlService").Methods()
		for i := range ms.Len() {
			want = append(want, string(ms.Get(i).Name()))
		}
		if !slices.Equal(methods, want) || !slices.Contains(methods, "Replay") {
			t.Errorf("described methods = %v, want %v", methods, want)
		}
	})
}

func TestStartRefusedWithoutToken(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Admin.Addr = "127.0.0.1:0"
	cfg.PG.DSN = "postgres://nobody@127.0.0.1:1/none"
	cfg.MySQL.DSN = "nobody@tcp(127.0.0.1:1)/none"
	cfg.Redis.URL = "redis://127.0.0.1:1/0"
	// No connection is made: the pool connects lazily and New fails first.
	b, err := service.New(t.Context(), "control", cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = app.New(b)
	if err == nil {
		t.Fatal("app.New without any token succeeded; want a refusal naming MSGX_CONTROL_INSECURE")
	}
	t.Logf("refusal: %v", err)
}

func TestInsecureServesWithoutToken(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	in := startControl(t, db, "control-test-4", "", true, time.Now())
	if _, err := in.client.GetStatus(callCtx(t), &controlv1.GetStatusRequest{}); err != nil {
		t.Errorf("GetStatus on an insecure server without a token: %v", err)
	}
}

// TestStandbyServesReads runs two instances on one database: one holds the control role, the
// other stands by and still answers GetStatus, naming the active one. When the active one
// stops, the standby takes over.
func TestStandbyServesReads(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Now()
	first := startControl(t, db, "control-a", token, false, now)
	waitActive(t, first)
	second := startControl(t, db, "control-b", token, false, now)

	st, err := second.client.GetStatus(withToken(callCtx(t), token), &controlv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetServedBy() != "control-b" || st.GetServedByActive() {
		t.Errorf("standby reports served_by %q active %v, want control-b, false", st.GetServedBy(), st.GetServedByActive())
	}
	if r := roleOf(st, "control"); r.GetInstance() != "control-a" || !r.GetActive() {
		t.Errorf("standby reports the control role as %v, want held by control-a", r)
	}
	// The chart's readiness probe (issue #56, finding 5): only the holder is ready for
	// traffic; the standby is alive and its dependencies ready, so nothing restarts it.
	wantAdmin(t, first, "/readyz/active", http.StatusOK, "active")
	wantAdmin(t, second, "/readyz/active", http.StatusServiceUnavailable, "standby")
	wantAdmin(t, second, "/readyz", http.StatusOK, "ready")
	wantAdmin(t, second, "/healthz", http.StatusOK, "ok")

	// The real msgxctl tells "reached a standby" (exit 3, naming the active instance) from
	// "cannot reach the server" (24).
	env := []string{ctl.EnvAddr + "=" + second.addr, ctl.EnvToken + "=" + token}
	_, errOut, code := msgxctl(t, env, "reopen", "1", "--comment", "INC-1")
	if code != ctl.ExitStandby || !strings.Contains(errOut, "control-a") {
		t.Errorf("msgxctl reopen on the standby: exit %d, want %d naming control-a: %s", code, ctl.ExitStandby, errOut)
	}
	_, errOut, code = msgxctl(t, []string{ctl.EnvAddr + "=127.0.0.1:1", ctl.EnvToken + "=" + token}, "reopen", "1", "--comment", "INC-1")
	if code != ctl.ExitCode(codes.Unavailable) {
		t.Errorf("msgxctl reopen without a server: exit %d, want %d: %s", code, ctl.ExitCode(codes.Unavailable), errOut)
	}

	first.stop()
	st = waitActive(t, second)
	if r := roleOf(st, "control"); r.GetInstance() != "control-b" || !r.GetActive() {
		t.Errorf("after the takeover the control role is %v, want held by control-b", r)
	}
	wantAdmin(t, second, "/readyz/active", http.StatusOK, "active")
}

// wantAdmin asks the instance's admin endpoints for path and checks the answer.
func wantAdmin(t *testing.T, in *instance, path string, code int, body string) {
	t.Helper()
	rec := httptest.NewRecorder()
	in.base.Admin.ServeHTTP(rec, httptest.NewRequestWithContext(callCtx(t), http.MethodGet, path, nil))
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != code || got != body {
		t.Errorf("%s %s = %d %q, want %d %q", in.name, path, rec.Code, got, code, body)
	}
}

func roleOf(st *controlv1.GetStatusResponse, role string) *controlv1.RoleStatus {
	for _, r := range st.GetRoles() {
		if r.GetRole() == role {
			return r
		}
	}
	return nil
}
