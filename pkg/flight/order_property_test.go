package flight_test

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// The property of the R-ORDER rules: whatever the order in which messages are applied (in ID
// order, one delayed, k replayed late, a snapshot after the FLOPs that followed it), every
// flight ends as applying them in ID order leaves it, except for the exceptions written in
// docs/flight-domain.md ("Order-safe application"), which the comparison names.

// world is the current state of a few flights, applied to the way the pump's processors do:
// load the target, its children and its masters, decide, write what was decided.
type world struct {
	flights map[string]flight.Flight
	// changed records, per message, the flights it wrote: changed, or its provenance alone
	// (not skipped)
	changed map[int64]map[string]bool
}

func newWorld() *world {
	return &world{flights: map[string]flight.Flight{}, changed: map[int64]map[string]bool{}}
}

// msg is one generated message: a FLOP (FDEL included), an ADFT or a DNLD.
type msg struct {
	id   int64
	kind string // FLOP, FDEL, ADFT, DNLD
	styp string
	recs []sis.FlightRecord
}

func (m msg) String() string {
	var flids []string
	for _, r := range m.recs {
		flids = append(flids, r.FLID)
	}
	return fmt.Sprintf("%d:%s/%s[%s]", m.id, m.kind, m.styp, strings.Join(flids, ","))
}

// touches reports whether m speaks of flid's existence: a schedule naming it (or a DNLD, which
// covers the day), an FDEL of it or of its master.
func (m msg) touches(flid string) bool {
	switch m.kind {
	case "DNLD":
		return true
	case "ADFT":
		return m.recs[0].FLID == flid
	case "FDEL":
		return m.recs[0].FLID == flid || m.recs[0].FLID == propMaster
	}
	return false
}

func (w *world) children(master string) []flight.Flight {
	var out []flight.Flight
	for _, id := range slices.Sorted(maps.Keys(w.flights)) {
		if f := w.flights[id]; f.Scalars["MAID"] == master && id != master {
			out = append(out, f)
		}
	}
	return out
}

func (w *world) write(id int64, fs ...flight.Flight) {
	for _, f := range fs {
		if w.changed[id] == nil {
			w.changed[id] = map[string]bool{}
		}
		w.changed[id][f.FLID] = true
	}
	w.record(fs...)
}

func (w *world) record(fs ...flight.Flight) {
	for _, f := range fs {
		f.MAFL = nil // never stored
		w.flights[f.FLID] = f.Clone()
	}
}

func (w *world) apply(t testing.TB, m msg) {
	t.Helper()
	w.decide(t, m)
	// Never an active child under a deleted master, in any order, after any message
	// (R-CODESHARE-4, R-CODESHARE-5).
	for _, id := range propFLIDs[1:] {
		c, ok := w.flights[id]
		if ok && c.State == flight.Active && c.Scalars["MAID"] == propMaster && w.flights[propMaster].State == flight.Deleted {
			t.Fatalf("after %v: %s is active under its deleted master %s", m, id, propMaster)
		}
	}
}

func (w *world) decide(t testing.TB, m msg) {
	t.Helper()
	if m.kind == "DNLD" {
		w.applySnapshot(t, m)
		return
	}
	rec := m.recs[0]
	kind := flight.KindFLOP
	switch m.kind {
	case "FDEL":
		kind = flight.KindFDEL
	case "ADFT":
		kind = flight.KindADFT
	}
	in := flight.Input{MsgID: m.id, STYP: m.styp, Now: now, Record: rec, Children: w.children(rec.FLID)}
	var cur *flight.Flight
	if f, ok := w.flights[rec.FLID]; ok {
		cur = &f
	}
	g := flight.Group{Masters: map[string]flight.Flight{}, Siblings: map[string][]flight.Flight{}}
	var masters []string
	if cur != nil && flight.IsChild(*cur) {
		masters = append(masters, cur.Scalars["MAID"])
	}
	if v := rec.Scalars["MAID"]; kind == flight.KindADFT && v.Value != "" && v.Value != rec.FLID {
		masters = append(masters, v.Value)
	}
	for _, id := range masters {
		if f, ok := w.flights[id]; ok {
			g.Masters[id] = f
			g.Siblings[id] = w.children(id)
		}
	}
	o := flight.Decide(kind, cur, in, g, snapDays)
	if o.Skip != "" {
		return
	}
	sameProjection(t, m, o)
	w.write(m.id, o.Writes...)
	w.write(m.id, o.Recorded...)
}

func (w *world) applySnapshot(t testing.TB, m msg) {
	t.Helper()
	s := &sis.Schd{STYP: "DNLD", RECS: len(m.recs), Records: m.recs}
	p, r := flight.ValidatePackage(s, snapDays)
	if r != nil {
		t.Fatalf("%v refused: %s", m, r)
	}
	scope, err := p.Scope(nil)
	if err != nil {
		t.Fatal(err)
	}
	var stored []flight.Flight
	for _, id := range slices.Sorted(maps.Keys(w.flights)) {
		stored = append(stored, w.flights[id])
	}
	plan, refusal := flight.PlanSnapshot(flight.SnapshotInput{MsgID: m.id, Now: now, Package: p, Scope: scope, Stored: stored})
	if refusal != nil {
		t.Fatalf("%v refused: %s", m, refusal)
	}
	for _, b := range plan.Batches(2) {
		o := b.Outcome()
		sameProjection(t, m, o)
		w.write(m.id, o.Writes...)
		w.write(m.id, o.Recorded...)
	}
}

// sameProjection checks that an outcome projects what building every state's document
// projects: the documents it takes from its KAFKA:schd events are those of its states.
func sameProjection(t testing.TB, m msg, o flight.Outcome) {
	t.Helper()
	got, want := o.Projected(), flight.Project(o.Project)
	if len(got) != len(want) {
		t.Fatalf("after %v: %d states projected, want %d", m, len(got), len(want))
	}
	for i := range want {
		if got[i].FLID != want[i].FLID || got[i].Version != want[i].Version || !bytes.Equal(got[i].Document, want[i].Document) {
			t.Fatalf("after %v: projects %s v%d %s\nwant %s v%d %s", m, got[i].FLID, got[i].Version, got[i].Document,
				want[i].FLID, want[i].Version, want[i].Document)
		}
	}
}

// The generated flights: F1 is a master, F2 and F3 may be its code-share children, F4 stands
// alone. Every flight is a departure of the same day, so a DNLD covers them all.
const propMaster = "F1"

var propFLIDs = []string{"F1", "F2", "F3", "F4"}

func field(v string) sis.Field { return sis.Field{Present: true, Value: v} }

// pick returns one of vs, "" standing for "sent empty" and "-" for "not sent".
func pick(r *rand.Rand, vs ...string) string { return vs[r.IntN(len(vs))] }

func setMaybe(r *rand.Rand, sc map[string]sis.Field, tag string, vs ...string) {
	if v := pick(r, vs...); v != "-" {
		sc[tag] = field(v)
	}
}

func gates(r *rand.Rand) *sis.Collection {
	n := r.IntN(3)
	c := &sis.Collection{NoAllocation: n == 0}
	for i := range n {
		c.Items = append(c.Items, sis.Item{Seq: strconv.Itoa(i + 1), Fields: map[string]sis.Field{"GATE": field(pick(r, "A1", "B2", "C3"))}})
	}
	return c
}

func routes(r *rand.Rand) *sis.Collection {
	c := &sis.Collection{}
	for i := range 1 + r.IntN(6) {
		c.Items = append(c.Items, sis.Item{Seq: strconv.Itoa(i + 1), Fields: map[string]sis.Field{"APCD": field(pick(r, "PEK", "SHA", "CAN", "HKG"))}})
	}
	return c
}

// schedRecord is a schedule record of flid: its identity always, then a random part of its
// schedule state. full adds what a snapshot's record always carries.
func schedRecord(r *rand.Rand, flid string) sis.FlightRecord {
	sc := map[string]sis.Field{
		"SODT": field(sodt(d1)), "MVIN": field("D"), "FLNO": field("CA10" + flid[1:]),
	}
	setMaybe(r, sc, "ESTT", "-", "30NOV261000", "30NOV261015", "")
	setMaybe(r, sc, "ACFT", "-", "320", "330")
	setMaybe(r, sc, "REMC", "-", "ok", "")
	setMaybe(r, sc, "FHAG", "-", "H1", "")
	setMaybe(r, sc, "CNCL", "-", "Y")
	if flid == "F2" || flid == "F3" {
		setMaybe(r, sc, "MAID", "-", propMaster, propMaster, "")
	}
	rec := sis.FlightRecord{FLID: flid, Scalars: sc, Collections: map[string]*sis.Collection{}, Raw: map[string][]string{}}
	if r.IntN(2) == 0 {
		rec.Collections["GTDT"] = gates(r)
	}
	if r.IntN(4) == 0 {
		rec.Raw["SRVT"] = []string{pick(r, "<A/>", "<B/>")}
	}
	return rec
}

// flopRecord is a FLOP of one of a few STYPs, each with sent, empty and absent tags.
func flopRecord(r *rand.Rand, flid, styp string) sis.FlightRecord {
	sc := map[string]sis.Field{}
	rec := sis.FlightRecord{FLID: flid, Scalars: sc, Collections: map[string]*sis.Collection{}, Raw: map[string][]string{}}
	switch styp {
	case "ESTT":
		sc["ESTT"] = field(pick(r, "30NOV261000", "30NOV261030", ""))
	case "ACTT":
		sc["ACTT"] = field(pick(r, "30NOV261001", ""))
	case "CNCL":
		sc["CNCL"] = field(pick(r, "Y", ""))
	case "REMC":
		sc["REMC"] = field(pick(r, "late", "ok", ""))
	case "BOTM":
		sc["BOTM"] = field(pick(r, "30NOV260920", ""))
	case "HNAG":
		setMaybe(r, sc, "FHAG", "-", "H1", "H2", "")
		setMaybe(r, sc, "PHAG", "-", "P1", "")
		setMaybe(r, sc, "MHAG", "-", "M1", "")
	case "FDIV":
		sc["FDIV"] = field(pick(r, "weather", ""))
		setMaybe(r, sc, "FDIV_DDES", "-", "CAN", "SHA", "")
		setMaybe(r, sc, "FDIV_DDIR", "-", "1", "")
	case "TAOP":
		setMaybe(r, sc, "TAOP", "-", "CA", "")
		setMaybe(r, sc, "TAFL", "-", "CA200", "CA300", "")
		setMaybe(r, sc, "TAID", "-", "F9", "")
	case "GTDT":
		rec.Collections["GTDT"] = gates(r)
	case "ROUT":
		rec.Collections["ROUT"] = routes(r)
	}
	if r.IntN(5) == 0 {
		rec.Raw["VIPF"] = []string{pick(r, "<V/>", "<W/>")}
	}
	return rec
}

var propSTYPs = []string{"ESTT", "ACTT", "CNCL", "REMC", "BOTM", "HNAG", "FDIV", "TAOP", "GTDT", "ROUT"}

// sequence is n random messages with IDs 1..n: it opens with a schedule so that most FLOPs
// find their flight.
func sequence(r *rand.Rand, n int) []msg {
	out := make([]msg, 0, n)
	for i := 1; i <= n; i++ {
		id := int64(i * 10)
		flid := propFLIDs[r.IntN(len(propFLIDs))]
		switch k := r.IntN(20); {
		case i == 1 || k < 2:
			var recs []sis.FlightRecord
			for _, f := range propFLIDs {
				if i == 1 || r.IntN(4) > 0 {
					recs = append(recs, schedRecord(r, f))
				}
			}
			out = append(out, msg{id: id, kind: "DNLD", styp: "DNLD", recs: recs})
		case k < 6:
			out = append(out, msg{id: id, kind: "ADFT", styp: "ADFT", recs: []sis.FlightRecord{schedRecord(r, flid)}})
		case k < 8:
			out = append(out, msg{id: id, kind: "FDEL", styp: "FDEL", recs: []sis.FlightRecord{{FLID: flid}}})
		default:
			styp := propSTYPs[r.IntN(len(propSTYPs))]
			out = append(out, msg{id: id, kind: "FLOP", styp: styp, recs: []sis.FlightRecord{flopRecord(r, flid, styp)}})
		}
	}
	return out
}

// schedules are the out-of-order applications of seq the property checks: one message
// delayed to the end, k messages replayed late in a random order, and a snapshot (or any
// message) arriving after some of the messages that followed it.
func schedules(r *rand.Rand, seq []msg) map[string][]msg {
	out := map[string][]msg{}
	one := r.IntN(len(seq))
	out["one delayed to the end"] = append(slices.Delete(slices.Clone(seq), one, one+1), seq[one])

	k := 1 + r.IntN(min(3, len(seq)))
	late := r.Perm(len(seq))[:k]
	var rest, replayed []msg
	for i, m := range seq {
		if slices.Contains(late, i) {
			replayed = append(replayed, m)
		} else {
			rest = append(rest, m)
		}
	}
	r.Shuffle(len(replayed), func(i, j int) { replayed[i], replayed[j] = replayed[j], replayed[i] })
	out[fmt.Sprintf("%d replayed late", k)] = append(rest, replayed...)

	var snaps []int
	for i, m := range seq {
		if m.kind == "DNLD" && i < len(seq)-1 {
			snaps = append(snaps, i)
		}
	}
	from := r.IntN(len(seq) - 1)
	if len(snaps) > 0 && r.IntN(3) > 0 {
		from = snaps[r.IntN(len(snaps))]
	}
	to := from + 1 + r.IntN(len(seq)-from-1)
	moved := slices.Clone(seq)
	m := moved[from]
	moved = slices.Insert(slices.Delete(moved, from, from+1), to, m)
	out["arrives after later messages"] = moved
	return out
}

// exempt reports why a flight may differ from the in-order run: a message changed it in one
// run and not in the other because a message older than it that speaks of the flight's
// existence was applied after it (R-ORDER-6: a message for a flight that did not exist yet, or
// was deleted, when it was applied is final; a deletion keeps the details a FLOP had written
// before the deletion arrived). "" when the flight must be equal.
func exempt(flid string, order []msg, inOrder, outOfOrder *world) string {
	if why := exemptOwn(flid, order, inOrder, outOfOrder); why != "" {
		return why
	}
	// A master's MAFL is derived from its children (R-CODESHARE-2), and a master's deletion
	// takes its children (R-CODESHARE-4).
	related := []string{propMaster}
	if flid == propMaster {
		related = propFLIDs[1:]
	}
	for _, c := range related {
		if why := exemptOwn(c, order, inOrder, outOfOrder); why != "" && c != flid {
			return "code-share: " + why
		}
	}
	return ""
}

func exemptOwn(flid string, order []msg, inOrder, outOfOrder *world) string {
	pos := make(map[int64]int, len(order))
	for i, m := range order {
		pos[m.id] = i
	}
	for _, m := range order {
		if inOrder.changed[m.id][flid] == outOfOrder.changed[m.id][flid] {
			continue
		}
		for _, l := range order {
			if l.id < m.id && pos[l.id] > pos[m.id] && l.touches(flid) {
				return fmt.Sprintf("%v applied %v before %v", flid, m, l)
			}
		}
	}
	return ""
}

// published is what consumers see of a flight: its document without the version (the count of
// changes differs out of ID order, R-ORDER-6), or only its deletion.
func published(w *world, flid string) string {
	f, ok := w.flights[flid]
	switch {
	case !ok:
		return "absent"
	case f.State == flight.Deleted:
		return "DELETED"
	}
	p := flight.Published(f, w.children(flid))
	p.Version, p.UpdatedAt = 0, now
	return string(flight.Document(p))
}

// TestOrderProperty is the property test of the R-ORDER rules: MSGX_ORDER_SEQUENCES random
// sequences (10,000 by default, seeded; the seed is printed on failure and
// MSGX_ORDER_SEED replays it).
// Guards R-INV-24.
func TestOrderProperty(t *testing.T) {
	t.Parallel()
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("MSGX_ORDER_SEQUENCES")); err == nil && v > 0 {
		n = v
	}
	seed := uint64(rand.Int64())
	if v, err := strconv.ParseUint(os.Getenv("MSGX_ORDER_SEED"), 10, 64); err == nil {
		seed = v
	}
	r := rand.New(rand.NewPCG(seed, 0x6d736778))
	exempted, compared := 0, 0
	for i := range n {
		seq := sequence(r, 6+r.IntN(10))
		ref := newWorld()
		for _, m := range seq {
			ref.apply(t, m)
		}
		for name, order := range schedules(r, seq) {
			got := newWorld()
			for _, m := range order {
				got.apply(t, m)
			}
			for _, flid := range propFLIDs {
				want, have := published(ref, flid), published(got, flid)
				if want == have {
					compared++
					continue
				}
				if why := exempt(flid, order, ref, got); why != "" {
					exempted++
					continue
				}
				t.Fatalf("seed %d (MSGX_ORDER_SEED=%d), sequence %d, %s: %s differs\n in order: %s\n     got: %s\n sequence: %v\n    order: %v\n provenance in order: %+v\n provenance got: %+v",
					seed, seed, i, name, flid, want, have, seq, order, ref.flights[flid].Prov, got.flights[flid].Prov)
			}
		}
	}
	t.Logf("seed %d: %d sequences, %d flight states equal, %d differ under a named exception", seed, n, compared, exempted)
	if compared == 0 {
		t.Fatal("no state compared")
	}
}
