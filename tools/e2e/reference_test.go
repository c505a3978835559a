package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

var airport = time.FixedZone("CST", 8*3600)

func refMsg(seqn int, typ, styp string, recs int, body string) string {
	r := ""
	if recs >= 0 {
		r = fmt.Sprintf("<RECS>%d</RECS>", recs)
	}
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>%s</DTTM>`+
		`<TYPE>%s</TYPE><STYP>%s</STYP></META>%s%s</MSG>`, seqn, time.Now().In(airport).Format("20060102150405"), typ, styp, r, body)
}

// control is an operator's client of control, once control holds its role.
func (e *env) control(t *testing.T) (controlv1.ControlServiceClient, context.Context) {
	t.Helper()
	e.waitControlActive(t)
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+e.token)
	return controlv1.NewControlServiceClient(conn), ctx
}

// TestReferenceDataEndToEnd sends reference data and resource status through the five
// binaries, reads the result through control, and brings in a reference message an earlier
// version left SKIPPED(UNSUPPORTED) with a replay.
func TestReferenceDataEndToEnd(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// An earlier version skipped this AIRL ADD as unsupported, and its marker was written.
	legacy := &message{xml: refMsg(1, "AIRL", "ADD", 1, `<AIRL><ITOP>JR</ITOP><ONMC>幸福航空</ONMC>`+
		`<TRML MVIN="A" FLIN="D">T1</TRML><TRML MVIN="D" FLIN="D">T2</TRML></AIRL>`), want: "SUCCEEDED"}
	e.insert(t, []*message{legacy})
	e.pg.Exec(t, `INSERT INTO proc_state (msg_id, state, error_class, last_error, msg_type, msg_styp, enqueued_at, finished_at,
		backfill_next_at, updated_at) VALUES ($1, 'SKIPPED', 'UNSUPPORTED', 'unsupported: AIRL-ADD has no processor in this version',
		'AIRL', 'ADD', now(), now(), now(), now())`, legacy.id)

	now := time.Now().In(airport)
	msgs := []*message{
		{xml: refMsg(2, "GLST", "DNLD", 2, `<GLST><GCOD>G1</GCOD><GNMC>一号门</GNMC><PIER>A</PIER></GLST>`+
			`<GLST><GCOD>G2</GCOD><GNMC>二号门</GNMC><PIER></PIER></GLST>`), want: "SUCCEEDED"},
		{xml: refMsg(3, "CLST", "ADD", 1, `<CLST><CCOD>C1</CCOD><CTNM>Desk 1</CTNM><CNMC>柜台1</CNMC><CCAT>D</CCAT></CLST>`), want: "SUCCEEDED"},
		{xml: refMsg(4, "CHLT", "ADD", 1, `<CHLT><CCOD>C1</CCOD><CNMC>滑槽1</CNMC><CCAT>D</CCAT></CHLT>`), want: "SUCCEEDED"},
		{xml: refMsg(5, "GLST", "DEL", 1, `<GLST><GCOD>G1</GCOD></GLST>`), want: "SUCCEEDED"},
		{xml: refMsg(6, "GLST", "DNLD", 3, `<GLST><GCOD>G9</GCOD></GLST>`), want: "DEAD"}, // RECS 3, one record
		{xml: refMsg(7, "RSTA", "DNLD", -1, `<RSTA><RTYP>GATE</RTYP><RSID>G2</RSID><STAT>D</STAT><STRT>`+
			traffic.FormatTime(now.Add(-time.Hour))+`</STRT><ENDT>`+traffic.FormatTime(now.Add(time.Hour))+`</ENDT></RSTA>`), want: "SUCCEEDED"},
	}
	e.insert(t, msgs)
	e.startAll(t)
	for _, m := range msgs {
		testwait.ForState(t, 60*time.Second, fmt.Sprintf("message %d terminal and marked", m.id), func() (bool, string) {
			f := e.facts(t, m.id)
			return f.terminal && f.marked, f.String()
		})
		if f := e.facts(t, m.id); f.state != m.want || f.events != 0 {
			t.Errorf("message %d: %s with %d events, want %s and none", m.id, f.state, f.events, m.want)
		}
	}
	client, cctx := e.control(t)
	if _, err := client.GetReference(cctx, &controlv1.GetReferenceRequest{Rtype: "GLST", Rkey: "G1"}); err == nil {
		t.Error("GLST G1 is still there after its DEL")
	}
	g2, err := client.GetReference(cctx, &controlv1.GetReferenceRequest{Rtype: "GLST", Rkey: "G2"})
	if err != nil || !strings.Contains(g2.GetReference().GetPayloadJson(), `"PIER": ""`) {
		t.Errorf("GLST G2 = %v, %v; want PIER kept empty", g2, err)
	}
	clst, err1 := client.GetReference(cctx, &controlv1.GetReferenceRequest{Rtype: "CLST", Rkey: "C1"})
	chlt, err2 := client.GetReference(cctx, &controlv1.GetReferenceRequest{Rtype: "CHLT", Rkey: "C1"})
	if err1 != nil || err2 != nil || strings.Contains(clst.GetReference().GetPayloadJson(), "CCAT") ||
		!strings.Contains(chlt.GetReference().GetPayloadJson(), "CCAT") {
		t.Errorf("CLST C1 = %v (%v), CHLT C1 = %v (%v): want CCAT only in CHLT", clst, err1, chlt, err2)
	}
	st, err := client.GetResourceStatus(cctx, &controlv1.GetResourceStatusRequest{Rtyp: "GATE", Rsid: "G2"})
	if err != nil || st.GetAvailable() || !st.GetKnown() {
		t.Errorf("GATE G2 now = %v, %v; want disabled inside its window", st, err)
	}

	// The reader role sees the same through the views.
	var name string
	if err := e.pg.Pool.QueryRow(ctx, `SELECT payload->>'GNMC' FROM ref_effective WHERE rtype = 'GLST' AND rkey = 'G2'`).Scan(&name); err != nil || name != "二号门" {
		t.Errorf("ref_effective G2 = %q, %v", name, err)
	}

	// The legacy row comes in by a replay of its class.
	if _, err := client.GetReference(cctx, &controlv1.GetReferenceRequest{Rtype: "AIRL", Rkey: "JR"}); err == nil {
		t.Fatal("AIRL JR exists before the replay")
	}
	resp, err := client.Replay(cctx, &controlv1.ReplayRequest{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_UNSUPPORTED,
		Range: &controlv1.IdRange{First: legacy.id, Last: legacy.id}, Comment: "e2e: bring in reference data"})
	if err != nil || resp.GetReplayed() != 1 {
		t.Fatalf("replay = %v, %v; want the SKIPPED(UNSUPPORTED) row replayed", resp, err)
	}
	testwait.ForState(t, 60*time.Second, "the replayed AIRL ADD to succeed", func() (bool, string) {
		f := e.facts(t, legacy.id)
		return f.state == "SUCCEEDED" && f.marked, f.String()
	})
	airl, err := client.GetReference(cctx, &controlv1.GetReferenceRequest{Rtype: "AIRL", Rkey: "JR"})
	if err != nil || airl.GetReference().GetSourceMsgId() != legacy.id || !strings.Contains(airl.GetReference().GetPayloadJson(), `"TEXT": "T2"`) {
		t.Errorf("AIRL JR after the replay = %v, %v", airl, err)
	}
}
