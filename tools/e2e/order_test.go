package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// TestLateArrivalNeverOverwritesNewerData runs a real late arrival through the five binaries:
// two FLOPs whose MariaDB transaction stays open past pipeline.max-commit-delay, so ingest
// releases their IDs and the newer messages behind them are applied first; when the
// transaction commits, the late-arrival watch enqueues them and the pump applies them out of ID
// order (R-INGEST-9). The one that carries only an older ESTT ends SKIPPED(superseded) and
// leaves the newer estimate; the one that carries an older FHAG and a PHAG nobody newer wrote
// ends SUCCEEDED with FHAG superseded (R-ORDER-2). msgxctl flight-history shows both messages
// next to the newer ones that superseded them (R-ORDER-8).
func TestLateArrivalNeverOverwritesNewerData(t *testing.T) {
	e := newEnv(t)
	const flid = "E2E-ORDER"
	cst := time.FixedZone("CST", 8*3600)
	today := time.Now().In(cst)
	day := time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, cst) // the history sweep leaves today's flights
	f := traffic.Flight{FLID: flid, ALCD: "CA", FLNO: "CA1601", MVIN: "D", SODT: day.Add(9 * time.Hour), FLTY: "W", FLIN: "D",
		ACFT: "33L", TRML: "T3", Route: []string{"PEK", "SHA"}}
	dttm := day.Add(6 * time.Hour)
	at := func(min int) string { return traffic.FormatTime(f.SODT.Add(time.Duration(min) * time.Minute)) }
	flop := func(seq int64, styp, inner string) string {
		return traffic.FLOP(seq, dttm.Add(time.Duration(seq)*time.Minute), flid, f.FFID(), styp, inner)
	}
	now := time.Now()
	created := e.my.InsertInbox(t, traffic.ADFT(1, dttm, f), &now)
	late, commit := e.my.HoldInbox(t, []string{
		flop(2, "ESTT", "<ESTT>"+at(10)+"</ESTT>"),
		flop(3, "HNAG", "<FHAG>H1</FHAG><PHAG>P1</PHAG>"),
	}, &now)
	newerESTT := e.my.InsertInbox(t, flop(4, "ESTT", "<ESTT>"+at(25)+"</ESTT>"), &now)
	newerHNAG := e.my.InsertInbox(t, flop(5, "HNAG", "<FHAG>H2</FHAG>"), &now)

	e.start(t, "dispatcher", "backfill", "pump", "control")
	if err := e.stack.Start("ingest", nil, "MSGX_PIPELINE_MAX_COMMIT_DELAY=1s", "MSGX_PIPELINE_LATE_DETECT_PERIOD=300ms"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{created, newerESTT, newerHNAG} {
		testwait.ForState(t, 90*time.Second, fmt.Sprintf("message %d SUCCEEDED before the late rows commit", id), func() (bool, string) {
			f := e.facts(t, id)
			return f.state == "SUCCEEDED", f.String()
		})
	}
	commit()
	for _, id := range late {
		testwait.ForState(t, 90*time.Second, fmt.Sprintf("late message %d terminal and marked", id), func() (bool, string) {
			f := e.facts(t, id)
			return f.terminal && f.marked, f.String()
		})
	}
	var found int
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM inbox_late WHERE msg_id = ANY($1)`, late).Scan(&found); err != nil || found != 2 {
		t.Fatalf("late arrivals recorded: %d, %v; want both held rows found late", found, err)
	}

	state := func(id int64) (string, string) {
		var st, reason string
		if err := e.pg.Pool.QueryRow(t.Context(), `SELECT state, coalesce(last_error, '') FROM proc_state WHERE msg_id = $1`, id).
			Scan(&st, &reason); err != nil {
			t.Fatal(err)
		}
		return st, reason
	}
	if st, reason := state(late[0]); st != "SKIPPED" || reason != fmt.Sprintf("superseded: ESTT newer at msg %d", newerESTT) {
		t.Errorf("late ESTT %d: %s %q, want SKIPPED superseded by %d", late[0], st, reason, newerESTT)
	}
	if st, _ := state(late[1]); st != "SUCCEEDED" {
		t.Errorf("late HNAG %d: %s, want SUCCEEDED (its PHAG is new)", late[1], st)
	}
	var estt, fhag, phag string
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(estt, ''), coalesce(fhag, ''), coalesce(phag, '') FROM flight_schd WHERE flid = $1`,
		flid).Scan(&estt, &fhag, &phag); err != nil {
		t.Fatal(err)
	}
	if estt != at(25) || fhag != "H2" || phag != "P1" {
		t.Errorf("flight after the late arrivals: ESTT %q (want the newer %s), FHAG %q (want H2), PHAG %q (want P1)", estt, at(25), fhag, phag)
	}
	// The projection and the last KAFKA:schd state carry the newer values too.
	testwait.ForState(t, 30*time.Second, "the projection with the newer values", func() (bool, string) {
		doc, err := e.redis.Client.Get(context.Background(), e.redis.Prefix+"flight:"+flid).Result()
		return err == nil && strings.Contains(doc, `"ESTT":"`+at(25)+`"`) && strings.Contains(doc, `"PHAG":"P1"`) &&
			strings.Contains(doc, `"FHAG":"H2"`), doc
	})

	client, ctx := e.control(t)
	msg, err := client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: late[1]})
	if err != nil {
		t.Fatal(err)
	}
	var terminal string
	for _, s := range msg.GetTimeline() {
		if s.GetStep() == "terminal" {
			terminal = s.GetDetail()
		}
	}
	if want := fmt.Sprintf("superseded %s FHAG by msg %d", flid, newerHNAG); !strings.Contains(terminal, want) {
		t.Errorf("GetMessage(%d) terminal step %q, want it to name %q", late[1], terminal, want)
	}

	out, errOut, code := e.msgxctl(t, "flight-history", flid)
	if code != 0 {
		t.Fatalf("msgxctl flight-history: exit %d: %s", code, errOut)
	}
	t.Logf("msgxctl flight-history %s:\n%s", flid, out)
	for _, want := range []string{
		fmt.Sprintf("msg %d  FLOP/ESTT", late[0]),
		fmt.Sprintf("superseded: ESTT newer at msg %d", newerESTT),
		fmt.Sprintf("msg %d  FLOP/HNAG", late[1]),
		fmt.Sprintf("newer at msg %d", newerHNAG),
		fmt.Sprintf("msg %d  FLOP/ESTT", newerESTT),
		fmt.Sprintf("msg %d  FLOP/HNAG", newerHNAG),
		"PHAG",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("flight-history lacks %q", want)
		}
	}
	if i, j := strings.Index(out, fmt.Sprintf("msg %d ", late[0])), strings.Index(out, fmt.Sprintf("msg %d ", newerESTT)); i < 0 || j < 0 || i > j {
		t.Errorf("flight-history is not in message ID order")
	}
}
