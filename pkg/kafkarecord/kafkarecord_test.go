package kafkarecord_test

import (
	"errors"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
)

// header has the shape of a Kafka client's header type (franz-go's kgo.RecordHeader).
type header struct {
	Key   string
	Value []byte
}

func TestParse(t *testing.T) {
	id := header{kafkarecord.HeaderEventID, []byte("42")}
	version := header{kafkarecord.HeaderStateVersion, []byte("7")}
	for _, tc := range []struct {
		name    string
		headers []header
		want    kafkarecord.Meta
		foreign bool
	}{
		{"foreign: no headers", nil, kafkarecord.Meta{}, true},
		{"foreign: other headers only", []header{{"content-type", []byte("json")}}, kafkarecord.Meta{}, true},
		{"missing version", []header{id}, kafkarecord.Meta{}, true},
		{"missing event id", []header{version}, kafkarecord.Meta{}, true},
		{"invalid version", []header{id, {kafkarecord.HeaderStateVersion, []byte("seven")}}, kafkarecord.Meta{}, true},
		{"invalid event id", []header{{kafkarecord.HeaderEventID, []byte("")}, version}, kafkarecord.Meta{}, true},
		{"ok", []header{id, {kafkarecord.HeaderEventType, []byte("UPDATE")}, version}, kafkarecord.Meta{EventID: 42, Version: 7}, false},
		{"ok: any order, trace headers ignored", []header{{kafkarecord.HeaderTraceParent, []byte("00-x")}, version, id}, kafkarecord.Meta{EventID: 42, Version: 7}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := kafkarecord.Parse(tc.headers)
			if errors.Is(err, kafkarecord.ErrForeign) != tc.foreign || (err != nil && !tc.foreign) {
				t.Fatalf("error %v, foreign %v wanted", err, tc.foreign)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestHeadersParseBack: what the dispatcher writes, the readers read back.
func TestHeadersParseBack(t *testing.T) {
	hs := kafkarecord.Headers(42, "UPDATE", 7, "00-trace", "")
	var kv []header
	for _, h := range hs {
		kv = append(kv, header{h[0], []byte(h[1])})
	}
	if len(kv) != 4 || kv[3].Key != kafkarecord.HeaderTraceParent {
		t.Fatalf("headers %q: want id, type, version and traceparent only", hs)
	}
	if m, err := kafkarecord.Parse(kv); err != nil || m != (kafkarecord.Meta{EventID: 42, Version: 7}) {
		t.Errorf("parse back: %+v, %v", m, err)
	}
}
