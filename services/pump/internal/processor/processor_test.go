package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
)

var zone = time.FixedZone("CST", 8*3600)

func flopXML(seqn int, flid, styp, inner string) string {
	return fmt.Sprintf(`<MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20261130090000</DTTM><TYPE>FLOP</TYPE><STYP>%s</STYP></META>`+
		`<FLOP><FLID>%s</FLID><FFID>CA-CA%s-D-30NOV260900-D</FFID>%s</FLOP></MSG>`, seqn, styp, flid, flid, inner)
}

func adftXML(seqn int, fltr string) string {
	return fmt.Sprintf(`<MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20261130090000</DTTM><TYPE>SCHD</TYPE><STYP>ADFT</STYP></META>`+
		`<SCHD><RECS>1</RECS><FLTR>%s</FLTR></SCHD></MSG>`, seqn, fltr)
}

type env struct {
	pg    *pgtest.DB
	rd    *redistest.Redis
	reg   *prometheus.Registry
	route pump.Router
	proj  *projection.Projection
	now   time.Time
}

func newEnv(t testing.TB) *env {
	reg := prometheus.NewRegistry()
	rd := redistest.New(t)
	return &env{
		pg: pgtest.New(t), rd: rd, reg: reg,
		route: processor.Route(flight.DayRule{Zone: zone}, processor.WithMetrics(reg)),
		proj:  projection.New(rd.Client, rd.Prefix, 5*time.Second),
		now:   time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC),
	}
}

// step runs step ① in one transaction and step ② (the projection), as the pump does; it
// leaves step ③ out, which is the crash the re-run tests simulate.
// applied is what a processor made of a message in a test, as the pump reads it: the result,
// or the reason of its decision to skip or reject the message.
type applied struct {
	pump.Result
	Skip, Protocol string
}

// apply runs proc.Apply in tx as the pump does: a decision rolls the transaction back
// (errRolledBack) and is reported in Skip or Protocol.
func apply(ctx context.Context, tx pgx.Tx, proc pump.Processor, in pump.Input) (applied, error) {
	res, err := proc.Apply(ctx, tx, in)
	a := applied{Result: res}
	d := pump.DecisionOf(err)
	switch {
	case d == nil:
		return a, err
	case d.Class == queue.Protocol:
		a.Protocol = d.Reason
	default:
		a.Skip = d.Reason
	}
	return a, errRolledBack
}

func (e *env) step(t testing.TB, msgID int64, xml string) applied {
	t.Helper()
	ctx := context.Background()
	m, err := sis.Decode(xml, sis.Options{Zone: zone})
	if err != nil {
		t.Fatal(err)
	}
	proc, why := e.route(m)
	if proc == nil {
		t.Fatalf("not routed: %s", why)
	}
	e.now = e.now.Add(time.Second)
	var res applied
	if err := db.WithTx(ctx, e.pg.Pool, func(tx pgx.Tx) error {
		res, err = apply(ctx, tx, proc, pump.Input{MsgID: msgID, Message: m, Now: e.now})
		return err
	}); err != nil && !errors.Is(err, errRolledBack) {
		t.Fatal(err)
	}
	if _, err := e.proj.Write(ctx, res.Project); err != nil {
		t.Fatal(err)
	}
	return res
}

func (e *env) load(t testing.TB, flid string) *flight.Flight {
	t.Helper()
	f, err := flightstore.Load(context.Background(), e.pg.Pool, flid, false)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// event is one msg_event row.
type event struct {
	Target, FLID, Type string
	Version            int64
	MsgID              int64
	Payload            string
}

func (e *env) events(t testing.TB) []event {
	t.Helper()
	rows, err := e.pg.Pool.Query(context.Background(), `SELECT target, partition_key, event_type, state_version, msg_id,
		coalesce(payload::text, '') FROM msg_event ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (event, error) {
		var ev event
		err := r.Scan(&ev.Target, &ev.FLID, &ev.Type, &ev.Version, &ev.MsgID, &ev.Payload)
		return ev, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) msgEvents(t testing.TB, flid string) []event {
	var out []event
	for _, ev := range e.events(t) {
		if ev.Target == flight.TargetMsg && ev.FLID == flid {
			out = append(out, ev)
		}
	}
	return out
}

// redisDoc returns the projected document of flid, or nil when there is none.
func (e *env) redisDoc(t testing.TB, flid string) map[string]any {
	t.Helper()
	raw, err := e.rd.Client.Get(context.Background(), projection.FlightKey(e.rd.Prefix, flid)).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

const plan = `<FLID>F1</FLID><ALCD>CA</ALCD><FLNO>CA101</FLNO><MVIN>D</MVIN><SODT>30NOV260900</SODT><FLTY>J</FLTY><FLIN>D</FLIN>` +
	`<ROUT RTNO="1"><APCD>PEK</APCD><SCDT>30NOV260900</SCDT></ROUT>`

// TestRerunIsIdempotent is G-FLOP-IDEMPOTENT at processor level: a crash after the domain
// commit (①) and before the terminal commit (③) re-runs the message; the state, the version
// and the logical changes are those of one run, and the projection is still (re)written.
func TestRerunIsIdempotent(t *testing.T) {
	e := newEnv(t)
	e.step(t, 1, adftXML(1, plan))
	msgs := []string{
		flopXML(2, "F1", "ESTT", `<ESTT>30NOV260930</ESTT>`),
		flopXML(3, "F1", "BOTM", `<BOTM>30NOV260905</BOTM>`),
		flopXML(4, "F1", "GTDT", `<GTDT GTNO="1"><GATE>A1</GATE></GTDT><GTDT GTNO="2"><GATE>A1</GATE></GTDT>`),
		flopXML(5, "F1", "TAOP", `<TAOP>CA</TAOP><TAFL>CA201</TAFL><TAID>9</TAID>`),
		flopXML(6, "F1", "CKDT", `<CKDT CKNO="0"/>`),
		flopXML(7, "F1", "ROUT", `<ROUT RTNO="1"><APCD>PEK</APCD></ROUT><ROUT RTNO="2"><APCD>SHA</APCD></ROUT>`),
		flopXML(8, "F1", "FDIV", `<FDIV DDES="HKG" DDIR="TO">WX</FDIV>`),
		flopXML(9, "F1", "FDEL", `<FDEL/>`),
	}
	for i, x := range msgs {
		id := int64(i + 2)
		first := e.step(t, id, x)
		after := e.load(t, "F1")
		events := e.events(t)
		// The crash: Redis lost the write (or never got it); the message runs again.
		if err := e.rd.Client.Del(context.Background(), projection.FlightKey(e.rd.Prefix, "F1")).Err(); err != nil {
			t.Fatal(err)
		}
		again := e.step(t, id, x)
		if got := e.load(t, "F1"); !flight.SameContent(*got, *after) || got.Version != after.Version || got.LastMsgID != after.LastMsgID {
			t.Errorf("msg %d: re-run changed the state: v%d → v%d", id, after.Version, got.Version)
		}
		if got := e.events(t); !slices.Equal(got, events) {
			t.Errorf("msg %d: re-run wrote events:\n%v\n%v", id, events, got)
		}
		if len(again.Project) == 0 || again.Project[0].Version != first.Project[0].Version {
			t.Errorf("msg %d: re-run must project the current state", id)
		}
		doc := e.redisDoc(t, "F1")
		switch {
		case after.State == flight.Deleted && doc != nil:
			t.Errorf("msg %d: deleted flight projected", id)
		case after.State == flight.Active && (doc == nil || int64(doc["STATE_VERSION"].(float64)) != after.Version):
			t.Errorf("msg %d: projection not restored by the re-run: %v", id, doc)
		}
	}
	if got := e.load(t, "F1"); got.Version != int64(len(msgs)+1) {
		t.Errorf("final version %d, want %d (one per accepted change)", got.Version, len(msgs)+1)
	}
	if n := len(e.msgEvents(t, "F1")); n != len(msgs)+1 {
		t.Errorf("KAFKA:msg events %d, want %d", n, len(msgs)+1)
	}
}

func TestNoChangeWritesNoEvent(t *testing.T) {
	e := newEnv(t)
	e.step(t, 1, adftXML(1, plan))
	e.step(t, 2, flopXML(2, "F1", "ESTT", `<ESTT>30NOV260930</ESTT>`))
	before := e.events(t)
	// A different message that says what the state already says.
	e.step(t, 3, flopXML(3, "F1", "ESTT", `<ESTT>30NOV260930</ESTT>`))
	if got := e.events(t); !slices.Equal(got, before) {
		t.Errorf("a message that changes nothing wrote events")
	}
	if f := e.load(t, "F1"); f.Version != 2 || f.LastMsgID != 2 {
		t.Errorf("version %d last msg %d, want 2 and 2", f.Version, f.LastMsgID)
	}
}

func TestUnknownAndDeletedTargetsAreSkipped(t *testing.T) {
	e := newEnv(t)
	if res := e.step(t, 1, flopXML(1, "NOPE", "ESTT", `<ESTT>30NOV260930</ESTT>`)); res.Skip != flight.SkipUnknownFlight {
		t.Errorf("unknown: skip = %q", res.Skip)
	}
	if e.load(t, "NOPE") != nil || len(e.events(t)) != 0 {
		t.Errorf("a FLOP invented a flight or an event")
	}
	e.step(t, 2, adftXML(2, plan))
	e.step(t, 3, flopXML(3, "F1", "FDEL", `<FDEL/>`))
	n := len(e.events(t))
	if res := e.step(t, 4, flopXML(4, "F1", "ACTT", `<ACTT>30NOV260930</ACTT>`)); res.Skip != flight.SkipDeletedFlight {
		t.Errorf("deleted: skip = %q", res.Skip)
	}
	if len(e.events(t)) != n {
		t.Errorf("a skipped message wrote events")
	}
	for reason, want := range map[string]float64{flight.SkipUnknownFlight: 1, flight.SkipDeletedFlight: 1} {
		got := testutil.ToFloat64(counter(t, e.reg, reason))
		if got != want {
			t.Errorf("msgx_flight_skipped_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	// FDEL of an unknown flight is an idempotent success, not a skip.
	if res := e.step(t, 5, flopXML(5, "NOPE", "FDEL", `<FDEL/>`)); res.Skip != "" || len(res.Project) != 0 {
		t.Errorf("FDEL unknown: %+v", res)
	}
}

func counter(t testing.TB, reg *prometheus.Registry, reason string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "probe"})
	for _, mf := range mfs {
		if mf.GetName() != "msgx_flight_skipped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				c.Add(m.GetCounter().GetValue())
			}
		}
	}
	return c
}

func TestFDELKeepsDetailsAndTombstones(t *testing.T) {
	e := newEnv(t)
	e.step(t, 1, adftXML(1, plan))
	e.step(t, 2, flopXML(2, "F1", "FDEL", `<FDEL/>`))
	f := e.load(t, "F1")
	if f.State != flight.Deleted || f.Version != 2 || len(f.Collections["ROUT"]) != 1 {
		t.Fatalf("after FDEL: %+v", f)
	}
	var deletedAt *time.Time
	if err := e.pg.Pool.QueryRow(context.Background(), `SELECT deleted_at FROM flight_schd WHERE flid = 'F1'`).Scan(&deletedAt); err != nil || deletedAt == nil {
		t.Errorf("deleted_at not set: %v", err)
	}
	evs := e.events(t)
	var tomb int
	for _, ev := range evs {
		if ev.Type == flight.Tombstone && ev.Version == 2 {
			tomb++
		}
	}
	if tomb != 2 {
		t.Errorf("tombstones %d, want KAFKA:msg + KAFKA:schd: %v", tomb, evs)
	}
	if e.redisDoc(t, "F1") != nil {
		t.Errorf("deleted flight still in Redis")
	}
	e.step(t, 3, flopXML(3, "F1", "FDEL", `<FDEL/>`))
	if got := e.events(t); !slices.Equal(got, evs) || e.load(t, "F1").Version != 2 {
		t.Errorf("repeated FDEL changed something")
	}
}

func TestCodeShareThroughTheStore(t *testing.T) {
	e := newEnv(t)
	e.step(t, 1, adftXML(1, `<FLID>M</FLID><FLNO>CA100</FLNO><SODT>30NOV260900</SODT>`))
	e.step(t, 2, adftXML(2, `<FLID>C2</FLID><FLNO>MU100</FLNO><MAID>M</MAID>`))
	e.step(t, 3, adftXML(3, `<FLID>C1</FLID><FLNO>ZH100</FLNO><MAID>M</MAID>`))
	e.step(t, 4, adftXML(4, `<FLID>S</FLID><FLNO>XX1</FLNO><MAID>S</MAID>`))    // self-reference
	e.step(t, 5, adftXML(5, `<FLID>O</FLID><FLNO>XX2</FLNO><MAID>GONE</MAID>`)) // dangling

	m := e.load(t, "M")
	if m.Version != 3 || m.LastMsgID != 3 {
		t.Errorf("master version %d last %d, want 3 and 3 (one per child joining)", m.Version, m.LastMsgID)
	}
	doc := e.redisDoc(t, "M")
	wantMAFL := `[{"FLID":"C1","FLNO":"ZH100"},{"FLID":"C2","FLNO":"MU100"}]`
	if b, _ := json.Marshal(doc["MAFL"]); string(b) != wantMAFL {
		t.Errorf("Redis MAFL = %s, want %s", b, wantMAFL)
	}
	if c := e.redisDoc(t, "C1"); c == nil || c["MAFL"] != nil || c["MAID"] != "M" {
		t.Errorf("child document: %v", c)
	}
	if e.redisDoc(t, "O") == nil || e.redisDoc(t, "S")["MAFL"] != nil {
		t.Errorf("dangling or self-referencing flights mishandled")
	}
	notes := e.msgEvents(t, "M")
	if len(notes) != 3 || notes[2].MsgID != 3 {
		t.Fatalf("master notifications: %v", notes)
	}
	var note struct {
		CHANGED []string
		VIA     string
	}
	_ = json.Unmarshal([]byte(notes[2].Payload), &note)
	if !slices.Equal(note.CHANGED, []string{"MAFL"}) || note.VIA != "C1" {
		t.Errorf("master note: %+v", note)
	}
	var schdVersion int64
	if err := e.pg.Pool.QueryRow(context.Background(), `SELECT state_version FROM msg_event WHERE target = 'KAFKA:schd' AND partition_key = 'M'`).
		Scan(&schdVersion); err != nil || schdVersion != 3 {
		t.Errorf("master KAFKA:schd version %d (%v), want 3", schdVersion, err)
	}

	// Deleting a child recomputes the master.
	e.step(t, 6, flopXML(6, "C2", "FDEL", `<FDEL/>`))
	if b, _ := json.Marshal(e.redisDoc(t, "M")["MAFL"]); string(b) != `[{"FLID":"C1","FLNO":"ZH100"}]` {
		t.Errorf("after child deletion MAFL = %s", b)
	}
	// Deleting the master deletes its remaining children in the same transaction.
	x := flopXML(7, "M", "FDEL", `<FDEL/>`)
	e.step(t, 7, x)
	for _, id := range []string{"M", "C1"} {
		if f := e.load(t, id); f.State != flight.Deleted || f.LastMsgID != 7 {
			t.Errorf("%s: state %s last %d", id, f.State, f.LastMsgID)
		}
		if e.redisDoc(t, id) != nil {
			t.Errorf("%s still projected", id)
		}
	}
	evs := e.events(t)
	e.step(t, 7, x) // re-run of the cascade
	if got := e.events(t); !slices.Equal(got, evs) {
		t.Errorf("re-run of the cascade wrote events")
	}
}
