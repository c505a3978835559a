package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// TestRequestReachesCOUTMSGS runs the production binaries: a schedule request registered
// through control is written to COUTMSGS by the dispatcher, exactly once, and marked SENT with
// the row's ID.
func TestRequestReachesCOUTMSGS(t *testing.T) {
	e := newEnv(t)
	e.start(t, "control", "dispatcher")
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := controlv1.NewControlServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+e.token)

	// A day within req.day-window of today (R-REQ-6).
	today := time.Now().In(time.FixedZone("CST", 8*3600)).Format(time.DateOnly)
	var req *controlv1.UpstreamRequest
	testwait.ForState(t, 30*time.Second, "control to register the request", func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := client.RequestSchedule(cctx, &controlv1.RequestScheduleRequest{FromDay: today, ToDay: today, Comment: "e2e"})
		if err != nil {
			return false, err.Error()
		}
		req = resp.GetRequest()
		return true, ""
	})
	var sent *controlv1.UpstreamRequest
	testwait.ForState(t, 30*time.Second, "the dispatcher to mark it SENT", func() (bool, string) {
		list, err := client.ListRequests(ctx, &controlv1.ListRequestsRequest{})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range list.GetRequests() {
			if r.GetReqId() == req.GetReqId() && r.GetState() == controlv1.RequestState_REQUEST_STATE_SENT {
				sent = r
				return true, ""
			}
		}
		return false, list.String()
	})
	rows, err := e.my.Admin.QueryContext(t.Context(), `SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG, ROUTINGID FROM coutmsgs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var text, routing string
		if err := rows.Scan(&id, &text, &routing); err != nil {
			t.Fatal(err)
		}
		n++
		if id != sent.GetCoutmsgsId() || text != req.GetPayload() || routing != "AODB" {
			t.Errorf("COUTMSGS row %d (%s) = %q, want %d with the registered payload", id, routing, text, sent.GetCoutmsgsId())
		}
	}
	if n != 1 {
		t.Errorf("COUTMSGS holds %d rows, want 1", n)
	}
}

// TestScheduleRequestRoundTrip is the request's whole path through the five binaries: a DNLD
// creates a day's flights; RequestSchedule registers an RQFD for that day, which the dispatcher
// writes to COUTMSGS; AODB's SCHD RESP omitting one flight arrives in the inbox; the pump
// applies it as the answer (the omitted flight deleted with its tombstone on Kafka) and the
// request is DONE.
func TestScheduleRequestRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.startAll(t)
	e.waitAllRolesActive(t)
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := controlv1.NewControlServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+e.token)

	// Today (airport time): a past day's deleted flight is moved to history by the backfill's
	// sweep at once, and the test looks at the current state.
	cst := time.FixedZone("CST", 8*3600)
	y, mo, d := time.Now().In(cst).Date()
	day := time.Date(y, mo, d, 0, 0, 0, 0, cst)
	dayText := day.Format(time.DateOnly)
	flights := []traffic.Flight{}
	for i, flid := range []string{"RT1", "RT2", "RT3"} {
		flights = append(flights, traffic.Flight{FLID: flid, ALCD: "CA", FLNO: fmt.Sprintf("CA%d", 1800+i), MVIN: "D",
			SODT: day.Add(time.Duration(9+i) * time.Hour), FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}})
	}
	now := time.Now()
	dnld := e.my.InsertInbox(t, traffic.DNLD(1, now, flights), &now)
	testwait.ForState(t, 60*time.Second, "the DNLD", func() (bool, string) {
		f := e.facts(t, dnld)
		return f.terminal && f.delivered, f.String()
	})
	var st, reason string
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT state, coalesce(last_error, '') FROM proc_state WHERE msg_id = $1`, dnld).
		Scan(&st, &reason); err != nil || st != "SUCCEEDED" {
		t.Fatalf("the DNLD ended %s (%s) %v", st, reason, err)
	}

	resp, err := client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{FromDay: dayText, ToDay: dayText, Comment: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetRequest().GetReqId()
	state := func() *controlv1.UpstreamRequest {
		list, err := client.ListRequests(ctx, &controlv1.ListRequestsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.GetRequests() {
			if r.GetReqId() == id {
				return r
			}
		}
		t.Fatalf("request %d not listed", id)
		return nil
	}
	testwait.ForState(t, 30*time.Second, "the RQFD in COUTMSGS", func() (bool, string) {
		r := state()
		return r.GetState() == controlv1.RequestState_REQUEST_STATE_SENT, r.String()
	})
	var text string
	if err := e.my.Admin.QueryRowContext(t.Context(), `SELECT COUTMSGS_CLOB_MSG FROM coutmsgs WHERE COUTMSGS_ID = ?`,
		state().GetCoutmsgsId()).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "<TYPE>RQFD</TYPE>") || !strings.Contains(text, "<STDB>"+strings.ToUpper(day.Format("02Jan06"))) {
		t.Fatalf("COUTMSGS holds %q, want the RQFD for %s", text, dayText)
	}

	now = time.Now()
	answer := e.my.InsertInbox(t, traffic.RESP(2, now, flights[:2]), &now)
	testwait.ForState(t, 60*time.Second, "the answer's five facts", func() (bool, string) {
		f := e.facts(t, answer)
		return f.terminal && f.marked && f.delivered, f.String()
	})
	if f := e.facts(t, answer); f.state != "SUCCEEDED" {
		t.Fatalf("the answer ended %s", f.state)
	}
	if r := state(); r.GetState() != controlv1.RequestState_REQUEST_STATE_DONE || r.GetAnswerMsgId() != answer {
		t.Errorf("request after the answer: %s", r)
	}
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT state FROM flight_schd WHERE flid = 'RT3'`).Scan(&st); err != nil || st != "DELETED" {
		t.Errorf("RT3, omitted by the answer: %s %v", st, err)
	}
	var tomb int64
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT event_id FROM msg_event WHERE msg_id = $1 AND target = 'KAFKA:schd'
		AND partition_key = 'RT3' AND event_type = 'TOMBSTONE'`, answer).Scan(&tomb); err != nil {
		t.Fatalf("no KAFKA:schd tombstone for RT3: %v", err)
	}
	if !e.records.has(tomb) {
		t.Error("the tombstone never reached Kafka")
	}
}

// TestRequestFloodIsBounded reproduces the COUTMSGS flood through the real control and
// dispatcher binaries (R-REQ-6): 300 RequestSchedule calls as fast as they go, each for other
// days, register no more than the caller's burst; with the rate raised, the cap of open requests
// stops them; a day outside the window is refused whatever the rate. COUTMSGS receives only the
// registered requests.
func TestRequestFloodIsBounded(t *testing.T) {
	e := newEnv(t)
	e.start(t, "control", "dispatcher")
	client, ctx := e.control(t)
	cst := time.FixedZone("CST", 8*3600)
	y, mo, d := time.Now().In(cst).Date()
	today := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
	const window = 31 // req.day-window's default
	// Every scope inside the window, ranges of 1 to 7 days (420): the first flood takes 300, the
	// second the rest, so no call of the second expires a request of the first (R-REQ-2).
	var all [][2]string
	for n := 1; n <= 7; n++ {
		for from := -window; from+n-1 <= window; from++ {
			all = append(all, [2]string{today.AddDate(0, 0, from).Format(time.DateOnly), today.AddDate(0, 0, from+n-1).Format(time.DateOnly)})
		}
	}
	specs, rest := all[:300], all[300:]
	testwait.ForState(t, 30*time.Second, "control to take writes", func() (bool, string) {
		_, err := client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{FromDay: specs[0][0], ToDay: specs[0][1], DryRun: true})
		return err == nil, fmt.Sprint(err)
	})
	flood := func(specs [][2]string) (map[codes.Code]int, time.Duration) {
		var mu sync.Mutex
		counts := map[codes.Code]int{}
		var wg sync.WaitGroup
		next := make(chan [2]string)
		start := time.Now()
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for sp := range next {
					_, err := client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{FromDay: sp[0], ToDay: sp[1], Comment: "flood"})
					mu.Lock()
					counts[status.Code(err)]++
					mu.Unlock()
				}
			}()
		}
		for _, sp := range specs {
			next <- sp
		}
		close(next)
		wg.Wait()
		return counts, time.Since(start)
	}
	open := func() (rows, days int) {
		t.Helper()
		if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*), coalesce(sum(to_day - from_day + 1), 0) FROM req_track
			WHERE req_type = 'RQFD' AND state IN ('PENDING', 'SENT')`).Scan(&rows, &days); err != nil {
			t.Fatal(err)
		}
		return rows, days
	}

	counts, took := flood(specs)
	rows, days := open()
	t.Logf("300 calls in %s at the default rate: %v; %d open RQFD rows covering %d days", took.Round(time.Millisecond), counts, rows, days)
	// The burst, and one more for each 6 s the flood took (10 a minute).
	allowed := 10 + int(took/(6*time.Second))
	if counts[codes.OK] < 10 || counts[codes.OK] > allowed || counts[codes.OK]+counts[codes.ResourceExhausted] != 300 || rows != counts[codes.OK] {
		t.Errorf("default rate (burst 10): %v and %d rows, want 10 to %d OK, the rest RESOURCE_EXHAUSTED, a row each OK", counts, rows, allowed)
	}

	// The rate raised far past the flood's: the cap of open requests holds it.
	e.stack.Stop("control", 10*time.Second)
	if err := e.stack.Start("control", nil, "MSGX_REQ_CALLER_PER_MINUTE=100000", "MSGX_REQ_CALLER_BURST=1000", "MSGX_REQ_MAX_OPEN=25"); err != nil {
		t.Fatal(err)
	}
	testwait.ForState(t, 30*time.Second, "control to take writes again", func() (bool, string) {
		_, err := client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{FromDay: specs[0][0], ToDay: specs[0][1], DryRun: true})
		return err == nil, fmt.Sprint(err)
	})
	before := rows
	counts, took = flood(rest)
	rows, days = open()
	t.Logf("%d more calls in %s with the rate raised and req.max-open=25: %v; %d open RQFD rows covering %d days",
		len(rest), took.Round(time.Millisecond), counts, rows, days)
	if counts[codes.OK] != 25-before || counts[codes.FailedPrecondition] != len(rest)-(25-before) || rows != 25 {
		t.Errorf("open cap 25: %v and %d rows, want %d OK, the rest FAILED_PRECONDITION, 25 rows", counts, rows, 25-before)
	}

	for _, sp := range [][2]string{
		{today.AddDate(0, 0, window+1).Format(time.DateOnly), today.AddDate(0, 0, window+1).Format(time.DateOnly)},
		{today.AddDate(0, 0, -window-1).Format(time.DateOnly), today.AddDate(0, 0, -window-1).Format(time.DateOnly)},
		{"2031-01-01", "2031-01-07"},
	} {
		_, err := client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{Comment: "INC-T", FromDay: sp[0], ToDay: sp[1]})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "req.day-window") {
			t.Errorf("%s..%s: %v, want INVALID_ARGUMENT naming req.day-window", sp[0], sp[1], err)
		}
	}

	// What reaches COUTMSGS is what was registered.
	var coutmsgs int
	testwait.ForState(t, 60*time.Second, "the dispatcher to write the 25 requests", func() (bool, string) {
		if err := e.my.Admin.QueryRowContext(t.Context(), `SELECT count(*) FROM coutmsgs`).Scan(&coutmsgs); err != nil {
			return false, err.Error()
		}
		return coutmsgs == 25, fmt.Sprint(coutmsgs, " rows")
	})
	time.Sleep(2 * time.Second) // a flood that got past the bounds would show up by now
	if err := e.my.Admin.QueryRowContext(t.Context(), `SELECT count(*) FROM coutmsgs`).Scan(&coutmsgs); err != nil || coutmsgs != 25 {
		t.Errorf("COUTMSGS holds %d rows (%v), want 25", coutmsgs, err)
	}
	t.Logf("COUTMSGS: %d rows after %d calls", coutmsgs, len(all))
}
