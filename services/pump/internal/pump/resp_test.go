package pump_test

import (
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// respRoute is the router msgx-pump runs: the RESP guard on, req.timeout 30 minutes.
func (e *env) respRoute(batch int) func() (processor.Option, processor.Option) {
	return func() (processor.Option, processor.Option) {
		return processor.WithBatchSize(batch), processor.WithRequests(30 * time.Minute)
	}
}

// sentRequest registers a request as control does and marks it written as the dispatcher does,
// at sent.
func (e *env) sentRequest(t *testing.T, spec request.Spec, sent time.Time) request.Request {
	t.Helper()
	reg, err := request.Register(t.Context(), e.pg.Pool, spec, request.Outbound{Encoder: sis.Encoder{Sender: "OMMS"}, RoutingID: "AODB"}, sent)
	if err != nil {
		t.Fatal(err)
	}
	if err := request.MarkSent(t.Context(), e.pg.Pool, reg.Request.ID, 77, sent); err != nil {
		t.Fatal(err)
	}
	return reg.Request
}

func (e *env) requestState(t *testing.T, id int64) (state string, answer int64) {
	t.Helper()
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT state, coalesce(answer_msg_id, 0) FROM req_track WHERE req_id = $1`, id).
		Scan(&state, &answer); err != nil {
		t.Fatal(err)
	}
	return state, answer
}

func (e *env) resp(flights ...traffic.Flight) string {
	return traffic.RESP(e.nextSeq(), e.now(), flights)
}

// A SCHD RESP is applied only as the answer of an open RQFD: scoped by the request's days (a
// flight of a requested day the RESP omits is deleted, one of another day is left alone), in
// batches, and the request is DONE with the answer. Without an open request, answering an
// expired one, or older than the request, it is SKIPPED with the reason and changes nothing.
func TestScheduleRESPAnswersItsRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	b, r := e.respRoute(2)()
	p := e.newPump(t, options{route: processor.Route(flight.DayRule{Zone: zone}, b, r)})
	day3 := day2.AddDate(0, 0, 1)
	e.add(t, e.dnld(snap("K1", day1, 9), snap("K2", day2, 9), snap("K3", day2, 10), snap("K4", day3, 9)))
	drain(t, p, s, e)

	// No request: skipped, nothing changes.
	stray := e.add(t, e.resp(snap("K2", day2, 11)))
	drain(t, p, s, e)
	if m := e.get(t, stray); m.State != queue.Skipped || deref(m.LastError) != request.SkipNoOpenRequest {
		t.Fatalf("a RESP without request: %s %q", m.State, deref(m.LastError))
	}
	if _, ok := e.row(t, "K3"); !ok || e.count(t, `SELECT count(*) FROM flight_schd WHERE state = 'DELETED'`) != 0 {
		t.Fatal("an unrequested RESP changed the flights")
	}

	// A request for day1..day2, sent now; its answer carries K1 and K2 only (K3 omitted).
	req := e.sentRequest(t, request.ScheduleSpec(day1, day2), e.now())
	e.clk.Advance(time.Minute)
	answer := e.add(t, e.resp(snap("K1", day1, 9), snap("K2", day2, 12)))
	drain(t, p, s, e)
	wantState(t, e.get(t, answer), queue.Succeeded, "")
	if k3, _ := e.row(t, "K3"); k3.state != "DELETED" {
		t.Errorf("K3 of a requested day, omitted by the answer, is %s", k3.state)
	}
	if k4, _ := e.row(t, "K4"); k4.state != "ACTIVE" || k4.version != 1 {
		t.Errorf("K4 of a day not requested: %+v", k4)
	}
	if st, by := e.requestState(t, req.ID); st != "DONE" || by != answer {
		t.Errorf("request %d is %s answered by %d, want DONE by %d", req.ID, st, by, answer)
	}
	if !strings.Contains(e.eventsOf(t, answer), "KAFKA:schd TOMBSTONE K3") {
		t.Errorf("no tombstone for K3: %s", e.eventsOf(t, answer))
	}
	// The request is closed: the same answer again is no longer one.
	again := e.add(t, e.resp(snap("K1", day1, 9), snap("K2", day2, 12)))
	drain(t, p, s, e)
	if m := e.get(t, again); m.State != queue.Skipped {
		t.Errorf("a second answer to a closed request: %s", m.State)
	}

	// Expired: sent 31 minutes before its answer.
	late := e.sentRequest(t, request.ScheduleSpec(day3, day3), e.now())
	e.clk.Advance(31 * time.Minute)
	tooLate := e.add(t, e.resp(snap("K4", day3, 15)))
	drain(t, p, s, e)
	if m := e.get(t, tooLate); m.State != queue.Skipped || deref(m.LastError) != request.SkipRequestExpired {
		t.Errorf("an answer after req.timeout: %s %q", m.State, deref(m.LastError))
	}
	if st, _ := e.requestState(t, late.ID); st == "DONE" {
		t.Error("an expired request was closed")
	}

	// Older than the request: the answer's DTTM is an hour before the request was sent.
	e.sentRequest(t, request.ScheduleSpec(day3, day3), e.now())
	old := e.add(t, traffic.RESP(e.nextSeq(), e.now().Add(-time.Hour), []traffic.Flight{snap("K4", day3, 16)}))
	drain(t, p, s, e)
	if m := e.get(t, old); m.State != queue.Skipped || deref(m.LastError) != request.SkipOlderThanRequest {
		t.Errorf("an answer older than the request: %s %q", m.State, deref(m.LastError))
	}
	if k4, _ := e.row(t, "K4"); k4.version != 1 {
		t.Errorf("a skipped answer changed K4: %+v", k4)
	}
}

// A reference RESP is applied only as the answer of an open RQRD of its category, which it closes.
func TestReferenceRESPAnswersItsRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session(t)
	b, r := e.respRoute(200)()
	p := e.newPump(t, options{route: processor.Route(flight.DayRule{Zone: zone}, b, r)})
	glst := func() string { return traffic.GLSTRESP(e.nextSeq(), e.now(), "G12") }
	stray := e.add(t, glst())
	drain(t, p, s, e)
	if m := e.get(t, stray); m.State != queue.Skipped || deref(m.LastError) != request.SkipNoOpenRequest {
		t.Fatalf("a GLST RESP without request: %s %q", m.State, deref(m.LastError))
	}
	if n := e.count(t, `SELECT count(*) FROM ref_master WHERE rtype = 'GLST'`); n != 0 {
		t.Fatalf("an unrequested RESP wrote %d records", n)
	}
	req := e.sentRequest(t, request.ReferenceSpec("GLST", ""), e.now())
	e.clk.Advance(time.Minute)
	answer := e.add(t, glst())
	drain(t, p, s, e)
	wantState(t, e.get(t, answer), queue.Succeeded, "")
	if st, by := e.requestState(t, req.ID); st != "DONE" || by != answer {
		t.Errorf("request %s answered by %d", st, by)
	}
	if n := e.count(t, `SELECT count(*) FROM ref_master WHERE rtype = 'GLST'`); n != 1 {
		t.Errorf("%d GLST records after the answer, want 1", n)
	}
}
