// Package kafkarecord is the record contract of the outbox topics (KAFKA:msg, KAFKA:schd):
// what the dispatcher writes into every record and what the readers of those topics — the
// version floor after a restore and the chaos harness's consumer — read back from it. It lives
// in pkg, not in the dispatcher, because the chaos harness (module tools) cannot import a
// service's internal package, and a contract with one writer and two readers belongs to none.
//
// A record's key is the event's partition key, the FLID: the partition follows the FLID, the
// order boundary of R-OUTBOX-2. Its headers are below; docs/dispatcher.md describes them.
package kafkarecord

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The header keys. Event ID and state version are what consumers deduplicate and order by, so
// every record carries them; the trace headers only when the event was sent under a trace.
const (
	HeaderEventID      = "msgx-event-id"
	HeaderEventType    = "msgx-event-type"
	HeaderStateVersion = "msgx-state-version"
	// The W3C trace context of the dispatcher.send span (pkg/telemetry reads the same names).
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// Headers returns the headers of one event's record, in the order the dispatcher writes them;
// an empty traceParent or traceState leaves its header out.
func Headers(eventID int64, eventType string, version int64, traceParent, traceState string) [][2]string {
	h := [][2]string{
		{HeaderEventID, strconv.FormatInt(eventID, 10)},
		{HeaderEventType, eventType},
		{HeaderStateVersion, strconv.FormatInt(version, 10)},
	}
	if traceParent != "" {
		h = append(h, [2]string{HeaderTraceParent, traceParent})
	}
	if traceState != "" {
		h = append(h, [2]string{HeaderTraceState, traceState})
	}
	return h
}

// ErrForeign: a record without the dispatcher's event ID and state version, or with ones that
// are not numbers. Nothing but the dispatcher writes the outbox topics, so such a record was
// written by something else and its readers cannot judge it.
var ErrForeign = errors.New("a record without msgx-event-id and msgx-state-version")

// Meta is what a record's headers say about its event.
type Meta struct {
	EventID int64
	Version int64
}

// header is any Kafka client's header type of this shape (franz-go's kgo.RecordHeader is
// one): a constraint rather than a type keeps the clients' dependencies out of pkg.
type header interface {
	~struct {
		Key   string
		Value []byte
	}
}

// Parse reads the event ID and state version back from a record's headers; an error wraps
// ErrForeign.
func Parse[H header](headers []H) (Meta, error) {
	var m Meta
	var hasID, hasVersion bool
	for _, h := range headers {
		kv := struct {
			Key   string
			Value []byte
		}(h)
		var err error
		switch kv.Key {
		case HeaderEventID:
			m.EventID, err = strconv.ParseInt(string(kv.Value), 10, 64)
			hasID = true
		case HeaderStateVersion:
			m.Version, err = strconv.ParseInt(string(kv.Value), 10, 64)
			hasVersion = true
		}
		if err != nil {
			return Meta{}, fmt.Errorf("%w: %s %q", ErrForeign, kv.Key, kv.Value)
		}
	}
	if !hasID || !hasVersion {
		return Meta{}, ErrForeign
	}
	return m, nil
}

// traceParentLen is the length of a W3C traceparent header value (version 00: 2+1+32+1+16+1+2).
const traceParentLen = 55

// Bound of what a one-record batch adds to the record's key, value and headers, as a broker
// counts it against message.max.bytes: the 12-byte log overhead and the 49-byte v2 batch header
// (Kafka's LOG_OVERHEAD and RECORD_BATCH_OVERHEAD), then the record's attributes byte and its six
// varints (length, timestamp delta, offset delta, key length, value length, header count),
// and two varints per header, each counted at its largest.
const (
	batchOverhead  = 12 + 49
	recordOverhead = 1 + 6*binary.MaxVarintLen64
	headerOverhead = 2 * binary.MaxVarintLen64
)

// BatchBound bounds from above the size of the record batch that carries one event alone, as
// the broker counts it against message.max.bytes (kafka.max-message-bytes): the key, a value of
// valueLen bytes and the headers Headers writes for an event of eventType, with any event ID
// and state version, a traceparent and traceState. The pump checks a state's document with it
// before the state is committed (issue #57), while the dispatcher, which measures the record it
// sends, refuses what does not fit; the bound is never below the dispatcher's figure, so a state
// the pump accepts is one the dispatcher sends.
func BatchBound(key string, valueLen int, eventType, traceState string) int {
	n := batchOverhead + recordOverhead + len(key) + valueLen
	for _, h := range Headers(math.MaxInt64, eventType, math.MaxInt64, strings.Repeat("0", traceParentLen), traceState) {
		n += headerOverhead + len(h[0]) + len(h[1])
	}
	return n
}
