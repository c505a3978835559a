package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/refstore"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func refXML(seqn int, typ, styp string, recs int, body string) string {
	r := ""
	if recs >= 0 {
		r = fmt.Sprintf("<RECS>%d</RECS>", recs)
	}
	return fmt.Sprintf(`<MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20240315090000</DTTM><TYPE>%s</TYPE><STYP>%s</STYP></META>%s%s</MSG>`,
		seqn, typ, styp, r, body)
}

type refEnv struct {
	pg    *pgtest.DB
	route pump.Router
	now   time.Time
}

func newRefEnv(t *testing.T) *refEnv {
	return &refEnv{pg: pgtest.New(t), route: processor.Route(flight.DayRule{Zone: zone}),
		now: time.Date(2024, 3, 15, 1, 0, 0, 0, time.UTC)}
}

var errRolledBack = errors.New("rolled back like the pump does")

// apply runs step ① as the pump does: a decision (skip or rejection) rolls the transaction back.
func (e *refEnv) apply(t *testing.T, proc pump.Processor, msgID int64, xml string) applied {
	t.Helper()
	ctx := context.Background()
	m, err := sis.Decode(xml, sis.Options{Zone: zone})
	if err != nil {
		t.Fatal(err)
	}
	if proc == nil {
		var why string
		if proc, why = e.route(m); proc == nil {
			t.Fatalf("not routed: %s", why)
		}
	}
	e.now = e.now.Add(time.Minute)
	var res applied
	err = db.WithTx(ctx, e.pg.Pool, func(tx pgx.Tx) error {
		var err error
		res, err = apply(ctx, tx, proc, pump.Input{MsgID: msgID, Message: m, Now: e.now})
		return err
	})
	if err != nil && !errors.Is(err, errRolledBack) {
		t.Fatal(err)
	}
	if len(res.Project) != 0 {
		t.Errorf("reference message %d asks to project %d flights", msgID, len(res.Project))
	}
	return res
}

func (e *refEnv) ok(t *testing.T, msgID int64, xml string) {
	t.Helper()
	if res := e.apply(t, nil, msgID, xml); res.Protocol != "" || res.Skip != "" {
		t.Fatalf("msg %d: %+v, want applied", msgID, res)
	}
}

// rows returns rtype's records as key → payload.
func (e *refEnv) rows(t *testing.T, rtype string) map[string]map[string]any {
	t.Helper()
	es, err := refstore.List(context.Background(), e.pg.Pool, rtype, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, en := range es {
		var m map[string]any
		if err := json.Unmarshal(en.Payload, &m); err != nil {
			t.Fatal(err)
		}
		out[en.RKey] = m
	}
	return out
}

func sortedKeys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func checkin(code, name, cat string) string {
	return "<CLST><CCOD>" + code + "</CCOD><CTNM>Desk</CTNM><CNMC>" + name + "</CNMC><CCAT>" + cat + "</CCAT><CTML>T1</CTML></CLST>"
}

func chute(code, name, cat string) string {
	return "<CHLT><CCOD>" + code + "</CCOD><CHNM>Chute</CHNM><CNMC>" + name + "</CNMC><CTML>T2</CTML><CCAT>" + cat + "</CCAT></CHLT>"
}

func TestReferenceDNLDReplacesOnlyItsRType(t *testing.T) {
	t.Parallel()
	e := newRefEnv(t)
	e.ok(t, 1, refXML(1, "CLST", "DNLD", 3, checkin("C1", "柜台1", "D")+checkin("C2", "柜台2", "D")+checkin("C3", "柜台3", "I")))
	e.ok(t, 2, refXML(2, "CHLT", "DNLD", 2, chute("C1", "滑槽1", "D")+chute("C2", "滑槽2", "I")))
	// CLST and CHLT share their tags and keys; only RTYPE tells them apart. CLST drops CCAT and
	// CTNM (R-REF-5), CHLT keeps its CCAT.
	clst, chlt := e.rows(t, "CLST"), e.rows(t, "CHLT")
	if _, ok := clst["C1"]["CCAT"]; ok || clst["C1"]["CNMC"] != "柜台1" || clst["C1"]["CTNM"] != nil {
		t.Errorf("CLST C1 = %v", clst["C1"])
	}
	if chlt["C1"]["CCAT"] != "D" || chlt["C1"]["CNMC"] != "滑槽1" || chlt["C1"]["CHNM"] != "Chute" {
		t.Errorf("CHLT C1 = %v", chlt["C1"])
	}

	// A RESP is applied like a DNLD while there is no request guard (docs/reference-data.md).
	e.ok(t, 3, refXML(3, "CLST", "RESP", 2, checkin("C2", "柜台二", "D")+checkin("C4", "柜台4", "D")))
	if got := sortedKeys(e.rows(t, "CLST")); !slices.Equal(got, []string{"C2", "C4"}) {
		t.Errorf("CLST after the second batch = %v, want [C2 C4]", got)
	}
	if got := sortedKeys(e.rows(t, "CHLT")); !slices.Equal(got, []string{"C1", "C2"}) {
		t.Errorf("CHLT after CLST's batch = %v, want [C1 C2] untouched", got)
	}
	en, err := refstore.Get(context.Background(), e.pg.Pool, "CLST", "C2")
	if err != nil || en.MsgID != 3 || en.Batch != "AODB|CLST|RESP|3" || en.PublishedAt == nil || !en.RefreshedAt.Equal(e.now) {
		t.Errorf("CLST C2 = %+v, %v: want msg 3, its batch, published now", en, err)
	}

	refused := []struct{ name, xml, want string }{
		{"RECS too high", refXML(4, "CLST", "DNLD", 2, checkin("C9", "x", "D")), "declares RECS 2 but carries 1"},
		{"no RECS", refXML(4, "CLST", "DNLD", -1, checkin("C9", "x", "D")), "without RECS"},
		{"a key twice", refXML(4, "CLST", "DNLD", 2, checkin("C9", "x", "D")+checkin("C9", "y", "D")), `"C9" twice`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			res := e.apply(t, nil, 4, tc.xml)
			if !strings.Contains(res.Protocol, tc.want) {
				t.Errorf("Protocol = %q, want %q", res.Protocol, tc.want)
			}
			if got := sortedKeys(e.rows(t, "CLST")); !slices.Equal(got, []string{"C2", "C4"}) {
				t.Errorf("CLST after a refused batch = %v, want it unchanged", got)
			}
		})
	}
	var events int
	if err := e.pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM msg_event`).Scan(&events); err != nil || events != 0 {
		t.Errorf("msg_event rows = %d, %v: reference data takes no part in Kafka", events, err)
	}
}

func TestReferenceIncrements(t *testing.T) {
	t.Parallel()
	e := newRefEnv(t)
	gate := func(code, name, pier string) string {
		return "<GLST><GCOD>" + code + "</GCOD><GNMC>" + name + "</GNMC><GTML>T1</GTML><PIER>" + pier + "</PIER></GLST>"
	}
	e.ok(t, 1, refXML(1, "GLST", "DNLD", 2, gate("G1", "一号", "A")+gate("G2", "二号", "B")))
	e.ok(t, 2, refXML(2, "GLST", "ADD", 1, gate("G3", "三号", "C")))
	// UPD carries the whole record: an empty tag is "not available", stored as "", not a delete
	// of the field (the opposite of the flight rules); a tag it omits is gone with the old record.
	e.ok(t, 3, refXML(3, "GLST", "UPD", 1, "<GLST><GCOD>G1</GCOD><GNMC>一号门</GNMC><PIER></PIER></GLST>"))
	// An UPD of a key not stored is an upsert.
	e.ok(t, 4, refXML(4, "GLST", "UPD", 1, gate("G4", "四号", "D")))
	e.ok(t, 5, refXML(5, "GLST", "DEL", 1, "<GLST><GCOD>G2</GCOD></GLST>"))
	rows := e.rows(t, "GLST")
	if got := sortedKeys(rows); !slices.Equal(got, []string{"G1", "G3", "G4"}) {
		t.Fatalf("GLST = %v, want [G1 G3 G4]", got)
	}
	if g1 := rows["G1"]; g1["GNMC"] != "一号门" || g1["PIER"] != "" || g1["GTML"] != nil {
		t.Errorf("G1 after UPD = %v, want GNMC 一号门, PIER \"\" and no GTML", g1)
	}
	if g3, _ := refstore.Get(context.Background(), e.pg.Pool, "GLST", "G3"); g3.MsgID != 2 {
		t.Errorf("G3 source msg = %d, want 2 (the later messages did not touch it)", g3.MsgID)
	}

	t.Run("an older message replayed after newer ones is superseded", func(t *testing.T) {
		res := e.apply(t, nil, 3, refXML(3, "GLST", "DNLD", 1, gate("G2", "二号", "B")))
		if !strings.Contains(res.Skip, "superseded: GLST is at msg 5") {
			t.Errorf("result %+v, want superseded", res)
		}
		if got := sortedKeys(e.rows(t, "GLST")); !slices.Equal(got, []string{"G1", "G3", "G4"}) {
			t.Errorf("GLST = %v after a superseded DNLD", got)
		}
	})
	t.Run("another category is not held back by GLST's progress", func(t *testing.T) {
		e.ok(t, 4, refXML(4, "BLST", "ADD", 1, "<BLST><BCOD>B1</BCOD><BTNM>x</BTNM><BNMC>一号转盘</BNMC><BCAT>D</BCAT></BLST>"))
		if b := e.rows(t, "BLST")["B1"]; b["BNMC"] != "一号转盘" || b["BTNM"] != nil || b["BCAT"] != nil {
			t.Errorf("BLST B1 = %v", b)
		}
	})
}

// refuseGuard refuses every RESP, the way request tracking refuses one without an open request.
type refuseGuard struct{ scopes []processor.RESPScope }

func (g *refuseGuard) AdmitRESP(_ context.Context, _ pgx.Tx, in pump.Input, s processor.RESPScope) (string, error) {
	g.scopes = append(g.scopes, s)
	return "no open RQRD for " + s.Type, nil
}

// TestReferenceRESPGuard checks the seam the request guard plugs into: a RESP it refuses
// writes nothing; DNLD and increments never ask it.
func TestReferenceRESPGuard(t *testing.T) {
	t.Parallel()
	e := newRefEnv(t)
	g := &refuseGuard{}
	proc := processor.NewReference(zone, nil, g)
	res := e.apply(t, proc, 1, refXML(1, "TLST", "RESP", 1, "<TLST><TCOD>T1</TCOD></TLST>"))
	if res.Skip != "no open RQRD for TLST" || len(e.rows(t, "TLST")) != 0 {
		t.Errorf("RESP with a refusing guard: %+v, rows %v", res, e.rows(t, "TLST"))
	}
	res = e.apply(t, proc, 2, refXML(2, "RSTA", "RESP", 2,
		rstaRec("GATE", "G1", "D", "", "")+rstaRec("BELT", "B1", "D", "", "")))
	if res.Skip == "" {
		t.Errorf("RSTA RESP with a refusing guard: %+v", res)
	}
	if len(g.scopes) != 2 || !slices.Equal(g.scopes[1].RTYPs, []string{"GATE", "BELT"}) {
		t.Errorf("guard scopes = %+v, want TLST then RSTA with GATE and BELT", g.scopes)
	}
	if res := e.apply(t, proc, 3, refXML(3, "TLST", "DNLD", 1, "<TLST><TCOD>T1</TCOD></TLST>")); res.Skip != "" || len(g.scopes) != 2 {
		t.Errorf("DNLD: %+v, guard asked %d times", res, len(g.scopes))
	}
}

func rstaRec(rtyp, rsid, stat, strt, endt string) string {
	s := "<RSTA><RTYP>" + rtyp + "</RTYP><RSID>" + rsid + "</RSID><STAT>" + stat + "</STAT>"
	if strt != "" {
		s += "<STRT>" + strt + "</STRT>"
	}
	if endt != "" {
		s += "<ENDT>" + endt + "</ENDT>"
	}
	return s + "</RSTA>"
}

func TestResourceStatus(t *testing.T) {
	t.Parallel()
	e := newRefEnv(t)
	ctx := context.Background()
	local := func(day, hh int) time.Time { return time.Date(2024, 3, day, hh, 0, 0, 0, zone) }
	statusAt := func(rtyp, rsid string, at time.Time) refstore.Status {
		t.Helper()
		st, err := refstore.StatusAt(ctx, e.pg.Pool, rtyp, rsid, at)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	e.ok(t, 1, refXML(1, "RSTA", "DNLD", -1, rstaRec("GATE", "G17", "D", "15MAR241000", "15MAR241800")))
	e.ok(t, 2, refXML(2, "RSTA", "RESP", 2, rstaRec("STND", "501", "D", "", "")+rstaRec("BELT", "B3", "E", "15MAR240800", "")))
	for _, tc := range []struct {
		rtyp, rsid string
		at         time.Time
		available  bool
	}{
		{"GATE", "G17", local(15, 9), true},   // before the window
		{"GATE", "G17", local(15, 12), false}, // inside
		{"GATE", "G17", local(15, 18), true},  // at its end: available again without a message
		{"STND", "501", local(15, 8), true},   // before the message's DTTM (no STRT)
		{"STND", "501", local(25, 8), false},  // no end: disabled until a later event
		{"BELT", "B3", local(15, 12), true},
		{"CNTR", "C1", local(15, 12), true}, // never mentioned: available by default
	} {
		if st := statusAt(tc.rtyp, tc.rsid, tc.at); st.Available != tc.available {
			t.Errorf("%s %s at %s: available %v, want %v", tc.rtyp, tc.rsid, tc.at, st.Available, tc.available)
		}
	}
	// A DNLD about one resource leaves the others as they were; a re-enable starting at 13:00
	// leaves the open disable in force until then.
	e.ok(t, 3, refXML(3, "RSTA", "DNLD", -1, rstaRec("STND", "501", "E", "16MAR241300", "")))
	if !statusAt("GATE", "G17", local(15, 12)).Known || statusAt("GATE", "G17", local(15, 12)).Available {
		t.Error("GATE G17 lost its window when another resource's status came")
	}
	if statusAt("STND", "501", local(16, 12)).Available || !statusAt("STND", "501", local(16, 13)).Available {
		t.Error("STND 501: want disabled until the re-enable's start, available from it")
	}
	if st := statusAt("STND", "501", local(16, 14)); st.Governing == nil || st.Governing.MsgID != 3 || st.Batch != "AODB|RSTA|DNLD|3" {
		t.Errorf("STND 501 governed by %+v batch %q, want msg 3", st.Governing, st.Batch)
	}

	refused := []struct{ name, xml, want string }{
		{"a DNLD of two", refXML(4, "RSTA", "DNLD", -1, rstaRec("GATE", "G1", "D", "", "")+rstaRec("GATE", "G2", "D", "", "")), "one status update"},
		{"a re-enable with an end", refXML(4, "RSTA", "DNLD", -1, rstaRec("GATE", "G1", "E", "15MAR241000", "15MAR241100")), "only a start"},
		{"an empty window", refXML(4, "RSTA", "DNLD", -1, rstaRec("GATE", "G1", "D", "15MAR241000", "15MAR240900")), "window is empty"},
	}
	for _, tc := range refused {
		if res := e.apply(t, nil, 4, tc.xml); !strings.Contains(res.Protocol, tc.want) {
			t.Errorf("%s: %+v, want Protocol %q", tc.name, res, tc.want)
		}
	}
	if statusAt("GATE", "G1", local(15, 12)).Known {
		t.Error("a refused RSTA wrote a status")
	}

	// A replayed older RESP: the resource with a newer status keeps it, the other one is new.
	e.ok(t, 2, refXML(2, "RSTA", "RESP", 2, rstaRec("STND", "501", "D", "", "")+rstaRec("GATE", "G5", "D", "", "")))
	if !statusAt("STND", "501", local(16, 14)).Available || statusAt("GATE", "G5", local(16, 14)).Available {
		t.Error("a replayed older RESP: want STND 501 still enabled by msg 3 and GATE G5 disabled")
	}
	if res := e.apply(t, nil, 1, refXML(1, "RSTA", "DNLD", -1, rstaRec("STND", "501", "D", "", ""))); !strings.HasPrefix(res.Skip, "superseded") {
		t.Errorf("a replayed status older than every resource's: %+v, want superseded", res)
	}
}
