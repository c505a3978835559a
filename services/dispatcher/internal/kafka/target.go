package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"

	"github.com/msgexchange/msgexchange/pkg/outage"
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
// follows the FLID, the order boundary of R-OUTBOX-2), value = the event payload.
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
	errs := t.Producer.Publish(ctx, records)
	for i, err := range errs {
		switch {
		case errors.Is(err, ErrAborted) || errors.Is(err, ErrNotFenced):
			errs[i] = fmt.Errorf("%w: %w", delivery.ErrNotAttempted, err)
		case errors.Is(err, ErrCommit):
			errs[i] = delivery.LaneFailure("commit", err)
		case errors.Is(err, ErrRecordTooLarge):
			errs[i] = delivery.Refusal(err)
		case unavailable(err):
			// The partition's leader is away or does not answer: an outage of the broker, which
			// says nothing about the event (docs/architecture.md).
			errs[i] = fmt.Errorf("%w: %w", delivery.ErrUnavailable, err)
		}
	}
	return errs
}

// Broker answers that mean "no leader can take this now", not "this record is wrong". A topic
// the brokers do not know (UNKNOWN_TOPIC_OR_PARTITION: deleted under traffic, or not created
// yet) is one of them: the record is fine and goes out once the topic exists.
var unavailableErrors = []error{
	sarama.ErrNotLeaderForPartition, sarama.ErrLeaderNotAvailable, sarama.ErrRequestTimedOut, sarama.ErrUnknownTopicOrPartition,
	sarama.ErrNotEnoughReplicas, sarama.ErrNotEnoughReplicasAfterAppend, sarama.ErrBrokerNotAvailable,
	sarama.ErrReplicaNotAvailable, sarama.ErrNetworkException, sarama.ErrKafkaStorageError,
	sarama.ErrOutOfBrokers, sarama.ErrNotController, sarama.ErrFencedLeaderEpoch, sarama.ErrUnknownLeaderEpoch,
	sarama.ErrOffsetNotAvailable,
}

// unavailable reports a record that failed because its partition could not be reached: no
// answer within the deadline, a leader that moved or is missing, too few replicas in sync, or
// a connection that failed.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNoAnswer) {
		return true
	}
	for _, e := range unavailableErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	v, ok := outage.Transport(err)
	return ok && v == outage.Down
}

// Fence implements delivery.Fencer: a new transactional producer for the topic, which fences
// the previous holder's uncommitted records at the broker.
func (t Target) Fence(ctx context.Context) error { return t.Producer.Fence(ctx, t.Topic) }

// Fenced implements delivery.Fencer.
func (t Target) Fenced() bool { return t.Producer.Fenced(t.Topic) }

// Release implements delivery.Fencer.
func (t Target) Release() { t.Producer.Release(t.Topic) }
