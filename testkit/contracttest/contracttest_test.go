package contracttest_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/kafkarecord/contract"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
)

var now = time.Date(2026, 11, 30, 0, 59, 0, 123456789, time.UTC)

func current(t *testing.T) *contracttest.Contract {
	t.Helper()
	c, err := contracttest.Current()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// record is one sample event as the dispatcher writes it (internal/kafka.Target): key FLID,
// the headers of pkg/kafkarecord, the payload, a null value for a KAFKA:schd tombstone.
type record struct {
	target  string
	key     []byte
	headers []kgo.RecordHeader
	value   []byte
}

func records(events []flight.Event, traceParent string) []record {
	var out []record
	for i, e := range events {
		r := record{target: e.Target, key: []byte(e.FLID), value: e.Payload}
		for _, h := range kafkarecord.Headers(int64(100+i), e.Type, e.Version, traceParent, "") {
			r.headers = append(r.headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		out = append(out, r)
	}
	return out
}

// TestSamplesOfEveryEventTypeValidate: every type and shape of event the production code
// builds validates against the contract, with and without a trace.
func TestSamplesOfEveryEventTypeValidate(t *testing.T) {
	c := current(t)
	kinds := map[string]bool{}
	for _, parent := range []string{"", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"} {
		for _, r := range records(contracttest.Samples("F", now), parent) {
			if err := c.Check(r.target, r.key, r.headers, r.value); err != nil {
				t.Errorf("%s\nvalue %s", err, r.value)
			}
			kinds[r.target+" "+string(r.headers[1].Value)] = true
		}
	}
	want := []string{"KAFKA:msg TOMBSTONE", "KAFKA:msg UPSERT", "KAFKA:schd TOMBSTONE", "KAFKA:schd UPSERT"}
	if got := slices.Sorted(maps.Keys(kinds)); !slices.Equal(got, want) {
		t.Errorf("the samples cover %q, want %q", got, want)
	}
}

// TestCheckRefusesWhatBreaksTheContract: each way a record can break the contract is found,
// and named.
func TestCheckRefusesWhatBreaksTheContract(t *testing.T) {
	c := current(t)
	samples := records(contracttest.Samples("F", now), "")
	find := func(target, typ string) record {
		for _, r := range samples {
			if r.target == target && string(r.headers[1].Value) == typ {
				r.headers = slices.Clone(r.headers)
				return r
			}
		}
		t.Fatalf("no sample %s %s", target, typ)
		return record{}
	}
	edit := func(r record, f func(map[string]any)) record {
		var v map[string]any
		if err := json.Unmarshal(r.value, &v); err != nil {
			t.Fatal(err)
		}
		f(v)
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		r.value = b
		return r
	}
	msg, note, doc, tomb := find(outbox.TargetMsg, outbox.TypeUpsert), find(outbox.TargetMsg, outbox.TypeTombstone),
		find(outbox.TargetSchd, outbox.TypeUpsert), find(outbox.TargetSchd, outbox.TypeTombstone)
	withHeader := func(r record, key, value string) record {
		for i, h := range r.headers {
			if h.Key == key {
				r.headers[i].Value = []byte(value)
				return r
			}
		}
		r.headers = append(r.headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
		return r
	}
	for _, tc := range []struct {
		name string
		r    record
		want string
	}{
		{"key is not the FLID", func() record { r := msg; r.key = []byte("other"); return r }(), "is not the value's FLID"},
		{"empty key", func() record { r := tomb; r.key = nil; return r }(), "key:"},
		{"no event id", record{msg.target, msg.key, msg.headers[1:], msg.value}, "msgx-event-id"},
		{"event id not a number", withHeader(msg, kafkarecord.HeaderEventID, "x1"), "msgx-event-id"},
		{"unknown event type", withHeader(doc, kafkarecord.HeaderEventType, "DELETE"), "msgx-event-type"},
		{"version header is not the value's", withHeader(doc, kafkarecord.HeaderStateVersion, "99"), "is not the value's STATE_VERSION"},
		{"undeclared header", withHeader(msg, "msgx-new", "1"), "header msgx-new is not declared"},
		{"malformed traceparent", withHeader(msg, kafkarecord.HeaderTraceParent, "00-x"), "traceparent"},
		{"msg value null", func() record { r := msg; r.value = nil; return r }(), "null value"},
		{"msg value not JSON", func() record { r := msg; r.value = []byte("{"); return r }(), "not JSON"},
		{"msg missing STYP", edit(msg, func(v map[string]any) { delete(v, "STYP") }), "STYP"},
		{"msg upsert without CHANGED", edit(msg, func(v map[string]any) { delete(v, "CHANGED") }), "CHANGED"},
		{"msg tombstone with CHANGED", edit(note, func(v map[string]any) { v["CHANGED"] = []string{"STATE"} }), "value:"},
		{"msg tombstone of an active flight", edit(note, func(v map[string]any) { v["STATE"] = flight.Active }), "TOMBSTONE with STATE ACTIVE"},
		{"msg version a string", edit(msg, func(v map[string]any) { v["STATE_VERSION"] = "1" }), "STATE_VERSION"},
		{"msg time not RFC 3339", edit(msg, func(v map[string]any) { v["UPDATED_AT"] = "30NOV260900" }), "UPDATED_AT"},
		{"msg undeclared field", edit(msg, func(v map[string]any) { v["REASON"] = "x" }), "field REASON is not declared"},
		{"schd tombstone with a value", func() record { r := tomb; r.value = doc.value; return r }(), "only it, is a null value"},
		{"schd upsert with a null value", func() record { r := doc; r.value = nil; return r }(), "only it, is a null value"},
		{"schd JSON null", func() record { r := tomb; r.value = []byte("null"); return r }(), "JSON null"},
		{"schd document of a deleted flight", edit(doc, func(v map[string]any) { v["STATE"] = flight.Deleted }), "STATE"},
		{"schd scalar not a string", edit(doc, func(v map[string]any) { v["FLNO"] = 101 }), "FLNO"},
		{"schd empty scalar", edit(doc, func(v map[string]any) { v["FLNO"] = "" }), "FLNO"},
		{"schd collection item not of strings", edit(doc, func(v map[string]any) { v["GTDT"] = []any{map[string]any{"GATE": 1}} }), "GTDT"},
		{"schd undeclared tag", edit(doc, func(v map[string]any) { v["ZZZZ"] = "x" }), "tag ZZZZ is not declared"},
		{"schd tag not a tag name", edit(doc, func(v map[string]any) { v["flno"] = "x" }), "flno"},
		{"schd operation day not a date", edit(doc, func(v map[string]any) { v["OPERATION_DAY"] = "30NOV26" }), "OPERATION_DAY"},
		{"unknown target", func() record { r := msg; r.target = "COUTMSGS"; return r }(), "unknown target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Check(tc.r.target, tc.r.key, tc.r.headers, tc.r.value)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestDocumentSchemaNamesEveryTag: the flight document's schema declares exactly what
// flight.Document can write: the state fields, every scalar, every collection with its
// sequence attribute and fields, and MAFL. A tag added to the state without the contract
// fails here (and every consumer test that meets it).
func TestDocumentSchemaNamesEveryTag(t *testing.T) {
	c := current(t)
	props := c.Raw[contract.FlightDocument].(map[string]any)["properties"].(map[string]any)
	want := slices.Concat([]string{"FLID", "STATE", "STATE_VERSION", "UPDATED_AT", "OPERATION_DAY", "MAFL"}, flight.Scalars, flight.CollectionTags)
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(props)); !slices.Equal(got, want) {
		t.Errorf("%s declares %q,\nthe state publishes %q", contract.FlightDocument, got, want)
	}
	for _, tag := range flight.CollectionTags {
		coll, _ := flight.CollectionOf(tag)
		fields := slices.Clone(coll.Fields)
		if coll.Seq != "" {
			fields = append(fields, coll.Seq)
		}
		slices.Sort(fields)
		item, _ := props[tag].(map[string]any)["items"].(map[string]any)
		itemProps, _ := item["properties"].(map[string]any)
		if got := slices.Sorted(maps.Keys(itemProps)); !slices.Equal(got, fields) {
			t.Errorf("%s items declare %q, the state keeps %q", tag, got, fields)
		}
	}
}

// TestContractCompatibility: the contract accepts everything the previous release's contract
// accepted, and changes nothing a consumer relies on, unless its major version says so. The
// previous release's schema files are in testdata/previous; when a release bumps the major,
// its files become the new testdata/previous.
func TestContractCompatibility(t *testing.T) {
	cur := current(t)
	prev, err := contracttest.Load(os.DirFS("testdata/previous"))
	if err != nil {
		t.Fatal(err)
	}
	curMajor, err := contracttest.Major(cur.Version)
	if err != nil {
		t.Fatal(err)
	}
	prevMajor, err := contracttest.Major(prev.Version)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case curMajor < prevMajor:
		t.Fatalf("contract %s is older than the previous release's %s", cur.Version, prev.Version)
	case curMajor == prevMajor:
		if br := contracttest.Breaking(prev, cur); len(br) > 0 {
			t.Errorf("contract %s breaks the previous release's %s without a new major version (asyncapi.yaml info.version):\n%s",
				cur.Version, prev.Version, strings.Join(br, "\n"))
		}
	default:
		t.Logf("contract %s is a new major version over %s: breaking changes declared", cur.Version, prev.Version)
		return
	}
	// What the previous release's contract accepted, this one accepts: the samples of every
	// event type and the records of the edge cases kept in testdata/accepted.
	all := records(contracttest.Samples("F", now), "")
	files, err := filepath.Glob("testdata/accepted/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata/accepted: %v, %d files", err, len(files))
	}
	for _, f := range files {
		all = append(all, accepted(t, f))
	}
	for _, r := range all {
		if err := prev.Accepts(r.target, r.key, r.headers, r.value); err != nil {
			t.Errorf("the previous contract refuses %s %s: %v", r.target, r.key, err)
			continue
		}
		if err := cur.Accepts(r.target, r.key, r.headers, r.value); err != nil {
			t.Errorf("accepted by the previous contract, refused now: %v", err)
		}
	}
}

// accepted reads a record of testdata/accepted: its value as JSON, null for a null value.
func accepted(t *testing.T, file string) record {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Target  string            `json:"target"`
		Key     string            `json:"key"`
		Headers map[string]string `json:"headers"`
		Value   json.RawMessage   `json:"value"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	r := record{target: f.Target, key: []byte(f.Key)}
	if string(f.Value) != "null" {
		r.value = f.Value
	}
	for _, k := range slices.Sorted(maps.Keys(f.Headers)) {
		r.headers = append(r.headers, kgo.RecordHeader{Key: k, Value: []byte(f.Headers[k])})
	}
	return r
}

// TestBreakingChangesAreFound: the compatibility check finds each kind of breaking change, and
// lets through what consumers of the previous version read alike.
func TestBreakingChangesAreFound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  string
		edit  func(schema map[string]any)
		found bool
	}{
		{"a required field removed", contract.MsgEvent, func(s map[string]any) {
			s["required"] = slices.DeleteFunc(slices.Clone(s["required"].([]any)), func(v any) bool { return v == "STYP" })
		}, true},
		{"a field made required", contract.MsgEvent, func(s map[string]any) { s["required"] = append(slices.Clone(s["required"].([]any)), "VIA") }, true},
		{"a field removed", contract.FlightDocument, func(s map[string]any) { delete(prop(s, ""), "GTDT") }, true},
		{"a type changed", contract.MsgEvent, func(s map[string]any) { prop(s, "MSG_ID")["type"] = "string" }, true},
		{"a type widened", contract.MsgEvent, func(s map[string]any) { prop(s, "MSG_ID")["type"] = []any{"integer", "string"} }, true},
		{"an event type added", contract.Headers, func(s map[string]any) {
			prop(s, "msgx-event-type")["enum"] = []any{"UPSERT", "TOMBSTONE", "DELETE"}
		}, true},
		{"a format changed", contract.FlightDocument, func(s map[string]any) { prop(s, "OPERATION_DAY")["format"] = "date-time" }, true},
		{"a bound added", contract.Key, func(s map[string]any) { s["maxLength"] = json.Number("32") }, true},
		{"closed to new fields", contract.MsgEvent, func(s map[string]any) { s["additionalProperties"] = false }, true},
		{"an optional field added", contract.MsgEvent, func(s map[string]any) { prop(s, "")["REASON"] = map[string]any{"type": "string"} }, false},
		{"a tag added", contract.FlightDocument, func(s map[string]any) { prop(s, "")["NEWT"] = map[string]any{"$ref": "#/$defs/scalar"} }, false},
		{"a description changed", contract.MsgEvent, func(s map[string]any) { prop(s, "FLID")["description"] = "the flight" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := current(t)
			cur := &contracttest.Contract{Version: prev.Version, Raw: maps.Clone(prev.Raw), Channels: prev.Channels}
			cur.Raw[tc.file] = clone(t, prev.Raw[tc.file])
			tc.edit(cur.Raw[tc.file].(map[string]any))
			br := contracttest.Breaking(prev, cur)
			if (len(br) > 0) != tc.found {
				t.Errorf("found %q, want a breaking change: %v", br, tc.found)
			}
		})
	}
}

// TestBreakingChannelChangesAreFound: a topic removed, renamed, its cleanup policy or a message
// of it changed breaks its consumers; a topic added does not.
func TestBreakingChannelChangesAreFound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(map[string]contracttest.Channel)
		found bool
	}{
		{"a topic removed", func(chs map[string]contracttest.Channel) { delete(chs, "flightSchd") }, true},
		{"a topic renamed", func(chs map[string]contracttest.Channel) {
			ch := chs["flightMsg"]
			ch.Address = "msgx.flight.events"
			chs["flightMsg"] = ch
		}, true},
		{"compaction dropped", func(chs map[string]contracttest.Channel) {
			ch := chs["flightSchd"]
			ch.CleanupPolicy = []string{"delete"}
			chs["flightSchd"] = ch
		}, true},
		{"a message removed", func(chs map[string]contracttest.Channel) {
			ch := chs["flightSchd"]
			ch.Messages = slices.DeleteFunc(slices.Clone(ch.Messages), func(m string) bool { return m == "flightTombstone" })
			chs["flightSchd"] = ch
		}, true},
		{"a topic added", func(chs map[string]contracttest.Channel) {
			chs["flightAudit"] = contracttest.Channel{Address: "msgx.flight.audit", CleanupPolicy: []string{"delete"}}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := current(t)
			if len(prev.Channels) != 2 {
				t.Fatalf("channels %v, want flightMsg and flightSchd", prev.Channels)
			}
			cur := &contracttest.Contract{Version: prev.Version, Raw: prev.Raw, Channels: maps.Clone(prev.Channels)}
			tc.edit(cur.Channels)
			if br := contracttest.Breaking(prev, cur); (len(br) > 0) != tc.found {
				t.Errorf("found %q, want a breaking change: %v", br, tc.found)
			}
		})
	}
}

// prop is the properties of a schema ("") or the property name of them.
func prop(s map[string]any, name string) map[string]any {
	props := s["properties"].(map[string]any)
	if name == "" {
		return props
	}
	return props[name].(map[string]any)
}

// clone deep-copies a decoded schema, keeping its numbers json.Number as the loader does.
func clone(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
