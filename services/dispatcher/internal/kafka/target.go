package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
)

// Target delivers the events of one outbox target to one topic: key = FLID (so the partition
// follows the FLID, the order boundary of R-OUTBOX-2), value = the event payload, headers by the
// record contract (pkg/kafkarecord), which the floor and the chaos harness read back.
type Target struct {
	Producer *Producer
	Topic    string
	// NullTombstones sends a TOMBSTONE event as a null value (KAFKA:schd, R-OUTBOX-4), which
	// a compacted topic reads as "remove this FLID".
	NullTombstones bool
}

// Deliver implements delivery.Sink.
func (t Target) Deliver(ctx context.Context, out []delivery.Outgoing) []error {
	records := make([]Record, len(out))
	for i, o := range out {
		e := o.Event
		headers := kafkarecord.Headers(e.ID, e.Type, e.Version, o.Trace.Parent, o.Trace.State)
		value := e.Payload
		if t.NullTombstones && e.Type == outbox.TypeTombstone {
			value = nil
		}
		records[i] = Record{Topic: t.Topic, Key: e.PartitionKey, Value: value, Headers: headers}
	}
	errs := t.Producer.Publish(ctx, records)
	for i, err := range errs {
		if err != nil {
			errs[i] = verdict(err)
		}
	}
	return errs
}

// verdict turns a record's error into the delivery verdict: first the producer's own outcomes,
// then the broker's answer by the table (Classify; docs/dispatcher.md, "Broker errors").
func verdict(err error) error {
	switch {
	case errors.Is(err, ErrAborted) || errors.Is(err, ErrNotFenced):
		return fmt.Errorf("%w: %w", delivery.ErrNotAttempted, err)
	case errors.Is(err, ErrCommit):
		return delivery.LaneFailure("commit", err)
	case errors.Is(err, ErrRecordTooLarge):
		return delivery.Refusal(err)
	case errors.Is(err, ErrShared):
		// Its batch's refusal, not provably its own: charged (R-OUTBOX-5).
		return err
	}
	switch Classify(err) {
	case VerdictRefused:
		return delivery.Refusal(err)
	case VerdictOutage, VerdictConfig:
		// The partition, its broker or the coordinator cannot take the record now, or the
		// brokers refuse this client: nothing about the event ("An outage is not an attempt",
		// docs/architecture.md).
		return fmt.Errorf("%w: %w", delivery.ErrUnavailable, err)
	case VerdictLane:
		return delivery.LaneFailure("transaction", err)
	}
	return err
}

// Fence implements delivery.Fencer: a new transactional producer for the topic, which fences
// the previous holder's uncommitted records at the broker.
func (t Target) Fence(ctx context.Context) error { return t.Producer.Fence(ctx, t.Topic) }

// Fenced implements delivery.Fencer.
func (t Target) Fenced() bool { return t.Producer.Fenced(t.Topic) }

// Release implements delivery.Fencer.
func (t Target) Release() { t.Producer.Release(t.Topic) }
