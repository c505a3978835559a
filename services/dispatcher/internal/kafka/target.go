package kafka

import (
	"context"
	"strconv"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
)

// Header keys every record carries.
const (
	HeaderEventID      = "msgx-event-id"
	HeaderEventType    = "msgx-event-type"
	HeaderStateVersion = "msgx-state-version"
)

// Target delivers the events of one outbox target to one topic: key = FLID (so the partition
// follows the FLID, the order boundary of seed 003 §8.1), value = the event payload.
type Target struct {
	Producer *Producer
	Topic    string
	// NullTombstones sends a TOMBSTONE event as a null value (KAFKA:schd, seed 003 §8.2), which
	// a compacted topic reads as "remove this FLID".
	NullTombstones bool
}

// Deliver implements delivery.Sink.
func (t Target) Deliver(ctx context.Context, out []delivery.Outgoing) []error {
	records := make([]Record, len(out))
	for i, o := range out {
		e := o.Event
		headers := [][2]string{
			{HeaderEventID, strconv.FormatInt(e.ID, 10)},
			{HeaderEventType, e.Type},
			{HeaderStateVersion, strconv.FormatInt(e.Version, 10)},
		}
		if o.Trace.Parent != "" {
			headers = append(headers, [2]string{"traceparent", o.Trace.Parent})
		}
		if o.Trace.State != "" {
			headers = append(headers, [2]string{"tracestate", o.Trace.State})
		}
		value := e.Payload
		if t.NullTombstones && e.Type == outbox.TypeTombstone {
			value = nil
		}
		records[i] = Record{Topic: t.Topic, Key: e.PartitionKey, Value: value, Headers: headers}
	}
	return t.Producer.Publish(ctx, records)
}

// Drain implements delivery.Drainer.
func (t Target) Drain(ctx context.Context) error { return t.Producer.Drain(ctx) }
