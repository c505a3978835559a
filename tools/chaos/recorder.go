package chaos

import (
	"context"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The topics of the stack (the services' defaults).
const (
	topicMsg  = "msgx.flight.msg"
	topicSchd = "msgx.flight.schd"
)

// received is one record as the consumer saw it.
type received struct {
	eventID   int64
	version   int64
	tombstone bool
}

// recorder consumes both topics from the start, as a downstream consumer would
// (read_committed: the dispatcher sends in transactions, and aborted ones — duplicates, a
// fenced holder's records — are invisible only then), and keeps every record per FLID in
// arrival order, duplicates included.
type recorder struct {
	mu      sync.Mutex
	msg     map[string][]received // KAFKA:msg per FLID
	schd    map[string][]received // KAFKA:schd per FLID
	seen    map[int64]int         // event id → records received
	records int
	// foreign counts records without a msgx-event-id header: nothing but the dispatcher
	// writes these topics, so any is a finding.
	foreign int

	cancel context.CancelFunc
	done   chan struct{}
	cl     *kgo.Client
}

func startRecorder(broker string) (*recorder, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topicMsg, topicSchd),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{msg: map[string][]received{}, schd: map[string][]received{}, seen: map[int64]int{},
		cancel: cancel, done: make(chan struct{}), cl: cl}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			// Fetch errors while the broker is down are the client's to retry; the checks
			// judge what arrived, not how.
			r.add(cl.PollFetches(ctx))
		}
	}()
	return r, nil
}

func (r *recorder) add(fetches kgo.Fetches) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fetches.EachRecord(func(rec *kgo.Record) {
		var got received
		var hasID bool
		for _, h := range rec.Headers {
			switch h.Key {
			case "msgx-event-id":
				got.eventID, _ = strconv.ParseInt(string(h.Value), 10, 64)
				hasID = true
			case "msgx-state-version":
				got.version, _ = strconv.ParseInt(string(h.Value), 10, 64)
			}
		}
		r.records++
		if !hasID {
			r.foreign++
			return
		}
		got.tombstone = rec.Value == nil
		r.seen[got.eventID]++
		key := string(rec.Key)
		if rec.Topic == topicMsg {
			r.msg[key] = append(r.msg[key], got)
		} else {
			r.schd[key] = append(r.schd[key], got)
		}
	})
}

// missing returns the ids among ids that were never received.
func (r *recorder) missing(ids []int64) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, id := range ids {
		if r.seen[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// snapshot copies what was received so far.
func (r *recorder) snapshot() (msg, schd map[string][]received, records, foreign int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg, schd = make(map[string][]received, len(r.msg)), make(map[string][]received, len(r.schd))
	for k, v := range r.msg {
		msg[k] = append([]received(nil), v...)
	}
	for k, v := range r.schd {
		schd[k] = append([]received(nil), v...)
	}
	return msg, schd, r.records, r.foreign
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.records
}

func (r *recorder) close() {
	r.cancel()
	<-r.done
	r.cl.Close()
}
