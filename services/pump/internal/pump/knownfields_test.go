package pump_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// The property of issue #57's third finding: whatever fields the items of a collection carry,
// known or not, the state the pump stores, the state reloaded from PostgreSQL, the Redis
// projection and the published KAFKA:schd document are the same state, and it is the
// collections' known fields alone.

// genItems renders n random items of collection tag: each known field sent with a value, sent
// empty or left out, and unknown children and attributes mixed in. It returns the XML and the
// items the state must keep (the known fields with a value; ROUT sent by a FLOP keeps no SCAT
// or SCDT, R-FLOP-ROUT).
func genItems(r *rand.Rand, tag string, n int, flop bool) (string, []flight.Item) {
	def, _ := flight.CollectionOf(tag)
	var b strings.Builder
	want := make([]flight.Item, 0, n)
	value := func(field string) string {
		if sis.IsTimeTag(field) {
			return traffic.FormatTime(start.Add(time.Duration(r.IntN(48*60)) * time.Minute).In(zone))
		}
		return fmt.Sprintf("%c%d", 'A'+rune(r.IntN(26)), r.IntN(1000))
	}
	for i := range n {
		seq := strconv.Itoa(i + 1)
		it := flight.Item{Fields: map[string]string{}}
		var attrs, children []string
		if def.Seq != "" {
			it.Seq = seq
			attrs = append(attrs, fmt.Sprintf(`%s="%s"`, def.Seq, seq))
		}
		text := ""
		for _, f := range def.Fields {
			switch r.IntN(4) {
			case 0: // left out
				continue
			case 1: // sent empty: not kept
				if tag != "DELY" {
					children = append(children, "<"+f+"/>")
				}
				continue
			}
			v := value(f)
			switch {
			case tag == "DELY" && f == "TEXT":
				text = v
			case tag == "DELY":
				attrs = append(attrs, fmt.Sprintf(`%s="%s"`, f, v))
			case r.IntN(3) == 0:
				attrs = append(attrs, fmt.Sprintf(`%s="%s"`, f, v))
			default:
				children = append(children, fmt.Sprintf("<%s>%s</%s>", f, v, f))
			}
			if !(flop && tag == "ROUT" && (f == "SCAT" || f == "SCDT")) {
				it.Fields[f] = v
			}
		}
		if tag == "DELY" && len(attrs) == 0 && text == "" {
			// A bare <DELY/> alone is "no delay now"; a code keeps this one an item.
			v := value("CODE")
			attrs, it.Fields["CODE"] = append(attrs, `CODE="`+v+`"`), v
		}
		for k := range r.IntN(6) {
			name := fmt.Sprintf("QX%c%02d", 'A'+rune(r.IntN(26)), k)
			if tag == "DELY" || r.IntN(2) == 0 {
				attrs = append(attrs, fmt.Sprintf(`%s="junk%d"`, name, r.IntN(100)))
			} else {
				children = append(children, fmt.Sprintf("<%s>junk%d</%s>", name, r.IntN(100), name))
			}
		}
		fmt.Fprintf(&b, "<%s %s>%s%s</%s>", tag, strings.Join(attrs, " "), text, strings.Join(children, ""), tag)
		want = append(want, it)
	}
	return b.String(), want
}

// flopCollections are the collections a FLOP STYP of the same name replaces.
var flopCollections = []string{"ABTM", "CHDT", "CHOT", "CKDT", "CLDT", "DELY", "GTDT", "PSDT", "ROUT"}

// states returns the flight's four states as documents: the published KAFKA:schd payload (as
// the dispatcher reads it), the Redis projection, and the state reloaded from PostgreSQL, and
// the reloaded state itself.
func (e *env) states(t *testing.T, flid string) (published, projected, reloaded string, f *flight.Flight) {
	t.Helper()
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT payload::text FROM msg_event WHERE target = 'KAFKA:schd' AND partition_key = $1`,
		flid).Scan(&published); err != nil {
		t.Fatalf("published document of %s: %v", flid, err)
	}
	f, err := flightstore.ReadPublished(t.Context(), e.pg.Pool, flid)
	if err != nil || f == nil {
		t.Fatalf("reload %s: %v (%v)", flid, f, err)
	}
	return published, e.projected(t, flid), string(flight.Document(*f)), f
}

// sameJSON reports whether two documents are the same JSON value (jsonb's text orders and
// spaces keys its own way).
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%v: %q", err, a)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%v: %q", err, b)
	}
	return reflect.DeepEqual(x, y)
}

// TestKnownFieldsProperty: MSGX_KNOWN_MESSAGES random messages (200 by default, seeded; the seed
// is printed and MSGX_KNOWN_SEED replays it) on a few flights, each an ADFT whose FLTR carries
// random collections or a FLOP replacing one, with items of known and unknown fields, through
// the pump on the real servers. After each, the stored and reloaded state, the Redis
// projection and the published document are the same, byte for byte where the bytes are the
// pump's (Redis, the reloaded document) and as JSON values against jsonb's text, and each
// collection holds exactly the known fields sent with a value.
func TestKnownFieldsProperty(t *testing.T) {
	t.Parallel()
	n := 200
	if v, err := strconv.Atoi(os.Getenv("MSGX_KNOWN_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	seed := uint64(rand.Int64())
	if v, err := strconv.ParseUint(os.Getenv("MSGX_KNOWN_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (MSGX_KNOWN_SEED replays it), %d messages", seed, n)
	r := rand.New(rand.NewPCG(seed, 57))
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{quiet: true})
	flids := []string{"5701", "5702", "5703"}
	want := map[string]map[string][]flight.Item{}
	for _, flid := range flids {
		e.add(t, e.adft(flid))
		want[flid] = map[string][]flight.Item{}
	}
	drain(t, p, s, e)
	for _, flid := range flids {
		// The ADFT's route.
		_, _, _, f := e.states(t, flid)
		want[flid]["ROUT"] = f.Collections["ROUT"]
	}
	for i := range n {
		flid := flids[r.IntN(len(flids))]
		var xml, what string
		if r.IntN(3) == 0 {
			fl := testFlight(flid)
			var extra strings.Builder
			tags := []string{"GTDT", "CKDT", "ERUT", "DELY", "CHOT"}
			for _, tag := range tags {
				if r.IntN(2) == 0 {
					continue
				}
				x, items := genItems(r, tag, 1+r.IntN(4), false)
				extra.WriteString(x)
				want[flid][tag] = items
			}
			fl.Extra = extra.String()
			// The FLTR's own ROUT replaces the route whole (R-ADFT-1), as sent.
			xml, what = traffic.ADFT(e.nextSeq(), e.now(), fl), "ADFT "+extra.String()
			want[flid]["ROUT"] = nil
		} else {
			tag := flopCollections[r.IntN(len(flopCollections))]
			x, items := genItems(r, tag, 1+r.IntN(5), true)
			if tag == "ROUT" && len(items) > 4 {
				items = items[:4] // a departure keeps the first four points (R-FLOP-ROUT)
			}
			want[flid][tag] = items
			xml, what = traffic.FLOP(e.nextSeq(), e.now(), flid, testFlight(flid).FFID(), tag, x), "FLOP "+x
		}
		id := e.add(t, xml)
		drain(t, p, s, e)
		if m := e.get(t, id); m.State != queue.Succeeded && m.State != queue.Skipped {
			t.Fatalf("seed %d, message %d (%s): %s %q", seed, i, what, m.State, deref(m.LastError))
		}
		published, projected, reloaded, f := e.states(t, flid)
		if projected != reloaded {
			t.Fatalf("seed %d, message %d (%s): the Redis document differs from the state reloaded from PostgreSQL\n redis:    %s\n reloaded: %s",
				seed, i, what, projected, reloaded)
		}
		if !sameJSON(t, published, reloaded) {
			t.Fatalf("seed %d, message %d (%s): the published document differs from the state reloaded from PostgreSQL\n published: %s\n reloaded:  %s",
				seed, i, what, published, reloaded)
		}
		for tag, items := range want[flid] {
			if items == nil {
				want[flid][tag] = f.Collections[tag] // the ADFT's own route, built by traffic
				continue
			}
			if got := f.Collections[tag]; !reflect.DeepEqual(got, items) {
				t.Fatalf("seed %d, message %d (%s): %s of %s is %+v, want the known fields sent, %+v", seed, i, what, tag, flid, got, items)
			}
		}
		if strings.Contains(published, `"QX`) || strings.Contains(projected, `"QX`) {
			t.Fatalf("seed %d, message %d (%s): an unknown field was published: %s", seed, i, what, published)
		}
	}
}

// TestDocumentOverMaxMessageBytesIsRefused: a message whose flight document would not fit in a
// Kafka record of kafka.max-message-bytes is refused by the codec's limits: DEAD(MALFORMED) with
// both sizes in its reason, nothing written (no version, no event, no history row, no
// projection change), its text kept; the messages after it go on. A FLOP, an ADFT of two
// flights whose second is too large (the first's writes roll back with it) and a schedule
// snapshot (refused before its first batch, with its trail row) alike.
func TestDocumentOverMaxMessageBytesIsRefused(t *testing.T) {
	t.Parallel()
	const limit = 2048
	e := newEnv(t)
	s := e.session(t)
	p := e.newPump(t, options{route: processor.Route(flight.DayRule{Zone: zone}, processor.WithMaxMessageBytes(limit))})
	e.add(t, e.adft("5711"))
	e.add(t, e.adft("5712"))
	drain(t, p, s, e)
	remark := strings.Repeat("R", 1900)
	versions := map[string]int64{"5711": e.flightVersion(t, "5711"), "5712": e.flightVersion(t, "5712")}
	docs := map[string]string{"5711": e.projected(t, "5711"), "5712": e.projected(t, "5712")}

	flop := e.add(t, e.remark("5711", remark))
	// An ADFT of two flights: a new one, then 5712 with the remark.
	big := testFlight("5712")
	big.Extra = "<REMC>" + remark + "</REMC>"
	second := traffic.ADFT(0, e.now(), big)
	fltr := second[strings.Index(second, "<FLTR>") : strings.Index(second, "</FLTR>")+len("</FLTR>")]
	adft := traffic.ADFT(e.nextSeq(), e.now(), testFlight("5713"))
	adft = strings.Replace(strings.Replace(adft, "<RECS>1</RECS>", "<RECS>2</RECS>", 1), "</SCHD>", fltr+"</SCHD>", 1)
	twoFlights := e.add(t, adft)
	snapBig := snap("5711", day1, 10)
	snapBig.Extra = "<REMC>" + remark + "</REMC>"
	dnld := e.add(t, e.dnld(snapBig, snap("5712", day1, 11)))
	after := e.add(t, e.remark("5711", "small"))
	drain(t, p, s, e)

	for _, c := range []struct {
		name string
		id   int64
		flid string
	}{{"FLOP", flop, "5711"}, {"ADFT", twoFlights, "5712"}, {"DNLD", dnld, "5711"}} {
		m := e.get(t, c.id)
		wantState(t, m, queue.Dead, queue.Malformed)
		reason := deref(m.LastError)
		t.Logf("%s refused: %s", c.name, reason)
		for _, want := range []string{"over the codec's limits", "KAFKA:schd document of flight " + c.flid + " would be ",
			"over the " + strconv.Itoa(limit) + " of kafka.max-message-bytes"} {
			if !strings.Contains(reason, want) {
				t.Errorf("%s: reason %q does not say %q", c.name, reason, want)
			}
		}
		if n := e.count(t, `SELECT count(*) FROM msg_event WHERE msg_id = $1`, c.id); n != 0 {
			t.Errorf("%s: the refused message wrote %d events", c.name, n)
		}
		if n := e.count(t, `SELECT count(*) FROM flight_change WHERE msg_id = $1`, c.id); n != 0 {
			t.Errorf("%s: the refused message wrote %d history rows", c.name, n)
		}
		if n := e.count(t, `SELECT count(*) FROM proc_raw WHERE msg_id = $1`, c.id); n != 1 {
			t.Errorf("%s: the refused message's text is not kept (%d rows)", c.name, n)
		}
	}
	if _, ok := e.row(t, "5713"); ok {
		t.Error("the ADFT's first flight was written although the message was refused")
	}
	wantTrail(t, e.trail(t, dnld), "REFUSED 2 - - - - 2026-03-01 over the codec's limits")
	if v := e.flightVersion(t, "5712"); v != versions["5712"] {
		t.Errorf("5712 is version %d, want %d: refused messages changed it", v, versions["5712"])
	}
	if doc := e.projected(t, "5712"); doc != docs["5712"] {
		t.Errorf("projection of 5712 changed: %s", doc)
	}
	wantState(t, e.get(t, after), queue.Succeeded, "")
	if v := e.flightVersion(t, "5711"); v != versions["5711"]+1 {
		t.Errorf("5711 is version %d, want %d: only the small remark after the refusals", v, versions["5711"]+1)
	}
	if doc := e.projected(t, "5711"); strings.Contains(doc, remark) || !strings.Contains(doc, "small") {
		t.Errorf("projection of 5711 %q: want the small remark, not the refused one", doc)
	}
}
