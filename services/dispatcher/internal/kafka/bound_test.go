package kafka_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
)

// TestBatchBoundCoversTheRecordSent: the bound the pump checks a flight's document against
// before committing it (kafkarecord.BatchBound, issue #57) is never below the size the
// dispatcher measures for the record it sends, whatever the event ID, version, trace and
// sizes; so a state the pump accepts is never refused here. It stays within a few hundred
// bytes of it, so the pump refuses nothing that is far from the limit.
func TestBatchBoundCoversTheRecordSent(t *testing.T) {
	r := rand.New(rand.NewPCG(57, 3))
	for range 2000 {
		key := strings.Repeat("7", 1+r.IntN(40))
		value := make([]byte, r.IntN(1<<20))
		typ := []string{"UPSERT", "TOMBSTONE"}[r.IntN(2)]
		state := ""
		if r.IntN(2) == 0 {
			state = strings.Repeat("k=v,", r.IntN(64))
		}
		parent := ""
		if r.IntN(4) > 0 {
			parent = "00-" + strings.Repeat("a", 32) + "-" + strings.Repeat("b", 16) + "-01"
		}
		rec := kafka.Record{Topic: "t", Key: key, Value: value,
			Headers: kafkarecord.Headers(r.Int64(), typ, r.Int64(), parent, state)}
		sent, bound := kafka.BatchBytes(rec), kafkarecord.BatchBound(key, len(value), typ, state)
		if bound < sent {
			t.Fatalf("bound %d below the %d the dispatcher measures (key %d, value %d, %s, state %q)", bound, sent, len(key), len(value), typ, state)
		}
		if bound-sent > 300 {
			t.Fatalf("bound %d is %d over the %d the dispatcher measures", bound, bound-sent, sent)
		}
	}
}
