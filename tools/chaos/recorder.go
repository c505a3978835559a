package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
)

// received is one record as the consumer saw it.
type received struct {
	eventID   int64
	version   int64
	tombstone bool
	// partition and offset place the record on its topic (a cluster run's elections, cluster.go).
	partition int32
	offset    int64
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
	// foreign counts records that do not carry the record contract's headers
	// (pkg/kafkarecord): nothing but the dispatcher writes these topics, so any is a finding.
	foreign int
	// broken counts records that break the event contract (testkit/contracttest: the schemas of
	// the key, headers and value); brokenFirst keeps the first maxBroken of the violations.
	broken      int
	brokenFirst []string
	// next is the offset after the last record read, per topic and partition; fetchErr the
	// last fetch error. Both explain a consumer that stopped receiving (diagnose).
	next     map[string]map[int32]int64
	fetchErr map[string]map[int32]error

	topicMsg, topicSchd string
	cancel              context.CancelFunc
	done                chan struct{}
	cl                  *kgo.Client
}

func startRecorder(brokers []string, topicMsg, topicSchd string) (*recorder, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topicMsg, topicSchd),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{msg: map[string][]received{}, schd: map[string][]received{}, seen: map[int64]int{},
		next: map[string]map[int32]int64{}, fetchErr: map[string]map[int32]error{},
		topicMsg: topicMsg, topicSchd: topicSchd, cancel: cancel, done: make(chan struct{}), cl: cl}
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
	fetches.EachError(func(topic string, p int32, err error) {
		if r.fetchErr[topic] == nil {
			r.fetchErr[topic] = map[int32]error{}
		}
		r.fetchErr[topic][p] = err
	})
	fetches.EachRecord(func(rec *kgo.Record) {
		if r.next[rec.Topic] == nil {
			r.next[rec.Topic] = map[int32]int64{}
		}
		r.next[rec.Topic][rec.Partition] = max(r.next[rec.Topic][rec.Partition], rec.Offset+1)
		r.records++
		target := outbox.TargetSchd
		if rec.Topic == r.topicMsg {
			target = outbox.TargetMsg
		}
		if err := contracttest.CheckRecord(target, rec); err != nil {
			if r.broken++; r.broken <= maxBroken {
				r.brokenFirst = append(r.brokenFirst, err.Error())
			}
		}
		m, err := kafkarecord.Parse(rec.Headers)
		if err != nil {
			r.foreign++
			return
		}
		got := received{eventID: m.EventID, version: m.Version, tombstone: rec.Value == nil, partition: rec.Partition, offset: rec.Offset}
		r.seen[got.eventID]++
		key := string(rec.Key)
		if rec.Topic == r.topicMsg {
			r.msg[key] = append(r.msg[key], got)
		} else {
			r.schd[key] = append(r.schd[key], got)
		}
	})
}

// maxBroken is how many contract violations the report quotes: the first few say what is
// wrong, the count how often.
const maxBroken = 5

// contractBreaks returns how many records broke the event contract, and the first violations.
func (r *recorder) contractBreaks() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.broken, slices.Clone(r.brokenFirst)
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

// diagnose compares, per partition, where the consumer is with the broker's last stable
// offset and high watermark, and returns a line for each partition that does not add up: a
// consumer behind the last stable offset, or a last stable offset behind the high watermark
// (an open transaction holds every read_committed consumer there).
func (r *recorder) diagnose(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	meta := kmsg.NewPtrMetadataRequest()
	for _, t := range []string{r.topicMsg, r.topicSchd} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		meta.Topics = append(meta.Topics, mt)
	}
	mresp, err := meta.RequestWith(ctx, r.cl)
	if err != nil {
		return []string{"broker metadata: " + err.Error()}
	}
	// offsets asks for the end of every partition, at the last stable offset (read_committed)
	// or at the high watermark.
	offsets := func(isolation int8) (map[string]map[int32]int64, error) {
		resp, err := kafkarecord.ListOffsetsRequest(mresp.Topics, isolation).RequestWith(ctx, r.cl)
		if err != nil {
			return nil, err
		}
		out := map[string]map[int32]int64{}
		for _, t := range resp.Topics {
			out[t.Topic] = map[int32]int64{}
			for _, p := range t.Partitions {
				out[t.Topic][p.Partition] = p.Offset
			}
		}
		return out, nil
	}
	lso, err := offsets(kafkarecord.ReadCommitted)
	if err != nil {
		return []string{"last stable offsets: " + err.Error()}
	}
	hwm, err := offsets(kafkarecord.ReadUncommitted)
	if err != nil {
		return []string{"high watermarks: " + err.Error()}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, t := range slices.Sorted(maps.Keys(lso)) {
		for _, p := range slices.Sorted(maps.Keys(lso[t])) {
			at, stable, high := r.next[t][p], lso[t][p], hwm[t][p]
			var notes []string
			if stable < high {
				notes = append(notes, fmt.Sprintf("last stable offset %d behind the high watermark %d: an open transaction holds read_committed consumers", stable, high))
			}
			// Control records (transaction markers) take offsets too, so a consumer that read
			// everything can sit a marker or two below the last stable offset.
			if at+2 < stable {
				notes = append(notes, fmt.Sprintf("the consumer is at %d, the last stable offset %d", at, stable))
			}
			if len(notes) == 0 {
				continue
			}
			line := fmt.Sprintf("%s/%d: %s", t, p, strings.Join(notes, "; "))
			if err := r.fetchErr[t][p]; err != nil {
				line += "; last fetch error: " + err.Error()
			}
			out = append(out, line)
		}
	}
	return out
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
