package kafka_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
)

// TestRecordsMatchTheEventContract: events of every type and shape the pump writes
// (contracttest.Samples: flight.Events and flight.Document), sent by the Kafka sink the lanes
// use (Target, a null value for a KAFKA:schd tombstone) to topics configured as in production
// (KAFKA:schd compacted), and read back with read_committed, are records the published event
// contract describes: key, headers (with and without a trace) and value (docs/dispatcher.md,
// "Event contract").
func TestRecordsMatchTheEventContract(t *testing.T) {
	c := kafkatest.Shared(t)
	topics := map[string]string{
		outbox.TargetMsg:  c.Topic(t, "msgx.flight.msg", 1, nil),
		outbox.TargetSchd: c.Topic(t, "msgx.flight.schd", 1, map[string]string{"cleanup.policy": "compact"}),
	}
	p, err := kafka.New(c.Addrs, "test", kafkatest.Name("msgx-dispatcher"), 1048588, kafka.Security{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(30 * time.Second) })
	targets := map[string]kafka.Target{
		outbox.TargetMsg:  {Producer: p, Topic: topics[outbox.TargetMsg]},
		outbox.TargetSchd: {Producer: p, Topic: topics[outbox.TargetSchd], NullTombstones: true},
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, tg := range targets {
		if err := tg.Fence(ctx); err != nil {
			t.Fatal(err)
		}
	}
	samples := contracttest.Samples("F", time.Now())
	for i, e := range samples {
		o := delivery.Outgoing{Event: outbox.Event{ID: int64(i + 1), Target: e.Target, PartitionKey: e.FLID, Type: e.Type,
			Version: e.Version, Payload: e.Payload}}
		if i%2 == 1 {
			o.Trace = telemetry.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "msgx=1"}
		}
		// One event per call, as the lanes send a FLID's events: each after the previous one's
		// transaction committed.
		if errs := targets[e.Target].Deliver(ctx, []delivery.Outgoing{o}); errs[0] != nil {
			t.Fatalf("event %d (%s %s): %v", o.Event.ID, e.Target, e.Type, errs[0])
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.ConsumeTopics(slices.Collect(maps.Values(topics))...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kinds := map[string]int{}
	for read := 0; read < len(samples) && ctx.Err() == nil; {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			read++
			target := outbox.TargetSchd
			if r.Topic == topics[outbox.TargetMsg] {
				target = outbox.TargetMsg
			}
			if err := contracttest.CheckRecord(target, r); err != nil {
				t.Errorf("%v\nvalue %s", err, r.Value)
			}
			for _, h := range r.Headers {
				if h.Key == "msgx-event-type" {
					kinds[target+" "+string(h.Value)]++
				}
			}
		})
	}
	want := map[string]int{}
	for _, e := range samples {
		want[e.Target+" "+e.Type]++
	}
	if !maps.Equal(kinds, want) || len(want) != 4 {
		t.Errorf("read back %v, sent %v: want every event type of both topics", kinds, want)
	}
}
