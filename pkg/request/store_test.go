package request_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

var (
	t0  = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	out = request.Outbound{Encoder: sis.Encoder{Sender: "OMMS", Zone: sis.DefaultZone()}, RoutingID: "AODB"}
)

func day(s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

// register registers spec in its own transaction.
func register(t *testing.T, pg *pgtest.DB, spec request.Spec, now time.Time) request.Registered {
	t.Helper()
	var res request.Registered
	err := pgx.BeginFunc(t.Context(), pg.Pool, func(tx pgx.Tx) error {
		var err error
		res, err = request.Register(t.Context(), tx, spec, out, now)
		return err
	})
	if err != nil {
		t.Fatalf("register %v: %v", spec, err)
	}
	return res
}

// state reads request id as control lists it (request.List, one row from id on).
func state(t *testing.T, pg *pgtest.DB, id int64) request.Request {
	t.Helper()
	rs, err := request.List(t.Context(), pg.Pool, request.Filter{After: id - 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].ID != id {
		t.Fatalf("request %d not found (listed %+v)", id, rs)
	}
	return rs[0]
}

func TestRegister(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx := t.Context()

	a := register(t, pg, request.ScheduleSpec(day("2026-03-02"), day("2026-03-03")), t0)
	r := a.Request
	if r.State != request.StatePending || r.Scope != "2026-03-02..2026-03-03" || r.STYP != "NONE" || r.Sender != "OMMS" ||
		r.RoutingID != "AODB" || r.SEQN <= 0 || !r.From.Equal(day("2026-03-02")) || !r.To.Equal(day("2026-03-03")) || len(a.Expired) != 0 {
		t.Errorf("registered %+v", a)
	}
	m, err := sis.Decode(r.Payload, sis.Options{Zone: sis.DefaultZone()})
	if err != nil {
		t.Fatalf("payload does not decode: %v\n%s", err, r.Payload)
	}
	body, ok := m.Body.(*sis.RQFD)
	if !ok || m.Meta.TYPE != "RQFD" || m.Meta.SEQNText != sis.FormatSEQN(int(r.SEQN)) || !m.Meta.DTTM.Equal(t0) ||
		body.STDB.Value != "02MAR260000" || body.STDE.Value != "03MAR262359" {
		t.Errorf("payload = %+v %+v", m.Meta, m.Body)
	}

	// Another scope of the same type stays open beside it; the same scope expires it.
	other := register(t, pg, request.ScheduleSpec(day("2026-03-02"), day("2026-03-02")), t0.Add(time.Minute))
	again := register(t, pg, request.ScheduleSpec(day("2026-03-02"), day("2026-03-03")), t0.Add(2*time.Minute))
	if !slices.Equal(again.Expired, []int64{r.ID}) || len(other.Expired) != 0 || again.Request.SEQN <= other.Request.SEQN {
		t.Errorf("re-registration expired %v (other %v), seqn %d after %d", again.Expired, other.Expired, again.Request.SEQN, other.Request.SEQN)
	}
	if old := state(t, pg, r.ID); old.State != request.StateExpired || old.ExpiredAt == nil || !old.ExpiredAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("older request = %s at %v, want EXPIRED at +2m", old.State, old.ExpiredAt)
	}
	if again.Request.Payload == r.Payload {
		t.Error("a new registration carries the old payload; its SEQN and DTTM must differ")
	}

	// Reference requests: the category, and RSTA with its resource type.
	gate := register(t, pg, request.ReferenceSpec("RSTA", "GATE"), t0)
	glst := register(t, pg, request.ReferenceSpec("GLST", ""), t0)
	if gate.Request.Scope != "RSTA:GATE" || gate.Request.STYP != "RSTA" || gate.Request.RTYP != "GATE" ||
		!strings.Contains(gate.Request.Payload, "<STYP>RSTA</STYP>") || !strings.Contains(gate.Request.Payload, "<RTYP>GATE</RTYP>") {
		t.Errorf("RSTA request %+v", gate.Request)
	}
	if glst.Request.Scope != "GLST" || !strings.Contains(glst.Request.Payload, "<RTYP>GLST</RTYP>") || glst.Request.From != nil {
		t.Errorf("GLST request %+v", glst.Request)
	}

	// An invalid specification writes nothing.
	if _, err := request.Register(ctx, pg.Pool, request.ScheduleSpec(day("2026-03-01"), day("2026-03-09")), out, t0); !errors.Is(err, request.ErrInvalid) {
		t.Errorf("9-day RQFD: %v, want ErrInvalid", err)
	}

	// The index keeps one open request per (type, scope) whatever the writer.
	_, err = pg.Pool.Exec(ctx, `INSERT INTO req_track (req_type, req_styp, scope, sndr, created_at, updated_at)
		VALUES ('RQRD', 'GLST', 'GLST', 'X', now(), now())`)
	if !db.IsUniqueViolation(err) {
		t.Errorf("a second open GLST: %v, want a unique violation", err)
	}

	all, err := request.List(ctx, pg.Pool, request.Filter{Type: request.TypeRQFD}, 10)
	if err != nil || len(all) != 3 {
		t.Fatalf("List RQFD = %d, %v", len(all), err)
	}
	exp, err := request.List(ctx, pg.Pool, request.Filter{State: request.StateExpired}, 10)
	if err != nil || len(exp) != 1 || exp[0].ID != r.ID {
		t.Errorf("List EXPIRED = %v, %v", exp, err)
	}
	page, err := request.List(ctx, pg.Pool, request.Filter{After: all[0].ID}, 2)
	if err != nil || len(page) != 2 || page[0].ID <= all[0].ID {
		t.Errorf("List after %d = %v, %v", all[0].ID, page, err)
	}
}

func TestConcurrentRegistrationConflicts(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx := t.Context()
	tx1, err := pg.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx1.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := request.Register(ctx, tx1, request.ReferenceSpec("AIRL", ""), out, t0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- pgx.BeginFunc(ctx, pg.Pool, func(tx pgx.Tx) error {
			_, err := request.Register(ctx, tx, request.ReferenceSpec("AIRL", ""), out, t0)
			return err
		})
	}()
	pg.WaitForLockWait(t) // the second one waits on the first one's index entry
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, request.ErrOpenConflict) {
		t.Errorf("concurrent registration: %v, want ErrOpenConflict", err)
	}
	open, err := request.List(ctx, pg.Pool, request.Filter{State: request.StatePending}, 10)
	if err != nil || len(open) != 1 {
		t.Errorf("open requests = %v, %v; want one", open, err)
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx := t.Context()
	timeout := 30 * time.Minute
	a := register(t, pg, request.ReferenceSpec("GLST", ""), t0).Request
	b := register(t, pg, request.ReferenceSpec("AIRL", ""), t0).Request

	pending, err := request.PendingForSend(ctx, pg.Pool, 10)
	if err != nil || len(pending) != 2 || pending[0].ID != a.ID || pending[1].ID != b.ID {
		t.Fatalf("PendingForSend = %v, %v", pending, err)
	}
	// Only PENDING becomes SENT, once.
	if err := request.MarkAttempted(ctx, pg.Pool, a.ID, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := request.MarkSent(ctx, pg.Pool, a.ID, 77, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := request.MarkSent(ctx, pg.Pool, a.ID, 78, t0.Add(2*time.Second)); !errors.Is(err, request.ErrNotPending) {
		t.Errorf("second MarkSent: %v, want ErrNotPending", err)
	}
	if got := state(t, pg, a.ID); got.State != request.StateSent || *got.CoutmsgsID != 77 || !got.SentAt.Equal(t0.Add(time.Second)) ||
		!got.AttemptedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("after MarkSent: %+v", got)
	}
	if err := request.MarkSent(ctx, pg.Pool, b.ID, 79, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// A PENDING request that is expired by a new registration is not marked SENT after it.
	c := register(t, pg, request.ReferenceSpec("BLST", ""), t0).Request
	register(t, pg, request.ReferenceSpec("BLST", ""), t0.Add(time.Minute))
	if err := request.MarkSent(ctx, pg.Pool, c.ID, 80, t0.Add(time.Minute)); !errors.Is(err, request.ErrNotPending) {
		t.Errorf("MarkSent of an expired request: %v, want ErrNotPending", err)
	}

	// Done closes b; Expire then takes only a, once it is timeout old.
	if err := request.Done(ctx, pg.Pool, b.ID, 500, t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := request.Done(ctx, pg.Pool, b.ID, 501, t0.Add(6*time.Minute)); !errors.Is(err, request.ErrNotOpen) {
		t.Errorf("second Done: %v, want ErrNotOpen", err)
	}
	if ids, err := request.Expire(ctx, pg.Pool, t0.Add(timeout), timeout); err != nil || len(ids) != 0 {
		t.Errorf("Expire a second early = %v, %v", ids, err)
	}
	ids, err := request.Expire(ctx, pg.Pool, t0.Add(time.Second+timeout), timeout)
	if err != nil || !slices.Equal(ids, []int64{a.ID}) {
		t.Errorf("Expire = %v, %v; want [%d]", ids, err, a.ID)
	}
	if got := state(t, pg, b.ID); got.State != request.StateDone || *got.AnswerMsgID != 500 {
		t.Errorf("b = %+v", got)
	}
	if err := request.Done(ctx, pg.Pool, a.ID, 502, t0.Add(time.Hour)); !errors.Is(err, request.ErrNotOpen) {
		t.Errorf("Done of an expired request: %v, want ErrNotOpen", err)
	}
	if ok, err := request.RegisteredSince(ctx, pg.Pool, request.TypeRQRD, "BLST", t0.Add(time.Minute)); err != nil || !ok {
		t.Errorf("RegisteredSince = %v, %v", ok, err)
	}
	if ok, err := request.RegisteredSince(ctx, pg.Pool, request.TypeRQRD, "BLST", t0.Add(2*time.Minute)); err != nil || ok {
		t.Errorf("RegisteredSince later = %v, %v", ok, err)
	}

	// Retention: the closed rows go, the open one stays.
	n, err := request.DeleteClosed(ctx, pg.Pool, t0.Add(2*time.Hour), 100)
	if err != nil || n != 3 {
		t.Errorf("DeleteClosed = %d, %v; want a, b and c (3)", n, err)
	}
	left, err := request.List(ctx, pg.Pool, request.Filter{}, 10)
	if err != nil || len(left) != 1 || left[0].State != request.StatePending || left[0].Scope != "BLST" {
		t.Errorf("left = %v, %v", left, err)
	}
}

func TestMatchOpen(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx := t.Context()
	timeout := 30 * time.Minute
	sent := func(spec request.Spec, at time.Time, coutID int64) request.Request {
		r := register(t, pg, spec, at).Request
		if err := request.MarkSent(ctx, pg.Pool, r.ID, coutID, at); err != nil {
			t.Fatal(err)
		}
		return r
	}
	week := sent(request.ScheduleSpec(day("2026-03-02"), day("2026-03-04")), t0, 1)
	gate := sent(request.ReferenceSpec("RSTA", "GATE"), t0, 2)
	sent(request.ReferenceSpec("AIRL", ""), t0.Add(-2*time.Hour), 3)
	if _, err := request.Expire(ctx, pg.Pool, t0, timeout); err != nil { // expires old only
		t.Fatal(err)
	}
	register(t, pg, request.ReferenceSpec("GLST", ""), t0) // PENDING, never sent

	now := t0.Add(10 * time.Minute)
	tests := []struct {
		name string
		a    request.Answer
		want int64
		skip string
	}{
		{"schedule inside the range", request.Answer{Type: request.TypeRQFD, From: day("2026-03-03"), To: day("2026-03-04"), DTTM: now}, week.ID, ""},
		{"schedule beyond the range", request.Answer{Type: request.TypeRQFD, From: day("2026-03-04"), To: day("2026-03-05"), DTTM: now}, 0, request.SkipNoOpenRequest},
		{"schedule older than the request", request.Answer{Type: request.TypeRQFD, From: day("2026-03-02"), To: day("2026-03-02"), DTTM: t0.Add(-time.Hour)}, 0, request.SkipOlderThanRequest},
		{"resource status of the type", request.Answer{Type: request.TypeRQRD, Scope: "RSTA:GATE", DTTM: now}, gate.ID, ""},
		{"resource status of another type", request.Answer{Type: request.TypeRQRD, Scope: "RSTA:BELT", DTTM: now}, 0, request.SkipNoOpenRequest},
		{"late answer", request.Answer{Type: request.TypeRQRD, Scope: "AIRL", DTTM: now}, 0, request.SkipRequestExpired},
		{"answer before sending", request.Answer{Type: request.TypeRQRD, Scope: "GLST", DTTM: now}, 0, request.SkipOlderThanRequest},
	}
	for _, tc := range tests {
		m, err := request.MatchOpen(ctx, pg.Pool, tc.a, now, timeout)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got int64
		if m.Request != nil {
			got = m.Request.ID
		}
		if got != tc.want || m.Skip != tc.skip {
			t.Errorf("%s: MatchOpen = %d %q, want %d %q", tc.name, got, m.Skip, tc.want, tc.skip)
		}
	}

	// The RESP guard: match and close in one transaction; the candidate stays locked meanwhile,
	// so the dispatcher's expiry waits for it and then finds it DONE.
	tx, err := pg.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := request.MatchOpen(ctx, tx, request.Answer{Type: request.TypeRQRD, Scope: "RSTA:GATE", DTTM: now}, now, timeout)
	if err != nil || m.Request == nil {
		t.Fatalf("match = %+v, %v", m, err)
	}
	expired := make(chan []int64, 1)
	go func() {
		ids, _ := request.Expire(ctx, pg.Pool, t0.Add(timeout), timeout)
		expired <- ids
	}()
	pg.WaitForLockWait(t) // the expiry waits on the matched row
	if err := request.Done(ctx, tx, m.Request.ID, 900, now); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := <-expired; slices.Contains(ids, gate.ID) {
		t.Errorf("the expiry took the request the answer closed: %v", ids)
	}
	if got := state(t, pg, gate.ID); got.State != request.StateDone {
		t.Errorf("gate = %s, want DONE", got.State)
	}
	// A second answer changes nothing.
	m, err = request.MatchOpen(ctx, pg.Pool, request.Answer{Type: request.TypeRQRD, Scope: "RSTA:GATE", DTTM: now}, now, timeout)
	if err != nil || m.Request != nil || m.Skip != request.SkipNoOpenRequest {
		t.Errorf("second answer = %+v, %v", m, err)
	}
}

// The cap of open requests counts what stays open after a registration: the open requests
// other than those of the registered type and scope, which it expires (R-REQ-2, R-REQ-6).
func TestOpenOthers(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx := t.Context()
	week := request.ScheduleSpec(day("2026-03-01"), day("2026-03-07"))
	register(t, pg, week, t0)
	oneDay := register(t, pg, request.ScheduleSpec(day("2026-03-02"), day("2026-03-02")), t0)
	glst := register(t, pg, request.ReferenceSpec("GLST", ""), t0)
	// SENT is open; DONE is not.
	for _, err := range []error{
		request.MarkSent(ctx, pg.Pool, oneDay.Request.ID, 1, t0),
		request.MarkSent(ctx, pg.Pool, glst.Request.ID, 2, t0),
		request.Done(ctx, pg.Pool, glst.Request.ID, 99, t0.Add(time.Minute)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	count := func(spec request.Spec) int {
		t.Helper()
		n, err := request.OpenOthers(ctx, pg.Pool, spec.Type, spec.Scope())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(week); n != 1 {
		t.Errorf("open besides the week: %d, want 1 (the SENT day; GLST is DONE)", n)
	}
	if n := count(request.ReferenceSpec("AIRL", "")); n != 2 {
		t.Errorf("open besides AIRL: %d, want 2", n)
	}
	register(t, pg, week, t0.Add(time.Minute)) // expires the first week
	if n := count(request.ReferenceSpec("AIRL", "")); n != 2 {
		t.Errorf("open besides AIRL after the week was registered again: %d, want 2 (the older week expired)", n)
	}
}
