// Package floor is the version floor after a restore (R-RESTORE-1): it reads back from Kafka
// what the outbox already published, in a timeline a restored PostgreSQL no longer has, and
// writes it into PostgreSQL before any service starts, so that versions resume above the
// highest one consumers hold and nothing already delivered is sent again below it.
//
// Kafka is read because a restore of PostgreSQL cannot rewind it: the topics are what
// consumers received. Both topics are read to their last stable offset with read_committed,
// as a consumer reads them: an aborted record was never delivered, so it neither raises a
// floor nor counts as published.
package floor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outbox"
)

// Seen is what the topics hold, per FLID: it grows with the flights the topics name, not with
// the records they keep. The KAFKA:msg records themselves go to Read's MsgSink a batch at a
// time.
type Seen struct {
	// Floors is, per FLID, the highest STATE_VERSION on either topic.
	Floors map[string]int64
	// Schd is the highest version per FLID on KAFKA:schd.
	Schd map[string]int64
	// MaxID is the largest event ID on either topic; Records counts the data records read, Msg
	// those of KAFKA:msg.
	MaxID        int64
	Records, Msg int
}

// DefaultBatch is how many KAFKA:msg records Read holds before it hands them to its MsgSink,
// and how many FLIDs one statement of Apply writes, when the caller gives no batch: a batch of
// records is a few hundred kilobytes, one statement of it well under a second.
const DefaultBatch = 5000

// A MsgSink takes a batch of the KAFKA:msg records read (by event ID, at most the batch of
// Read); an error stops the read.
type MsgSink func(ctx context.Context, batch map[int64]outbox.Published) error

// ErrForeign: a record without the dispatcher's headers, which the floor cannot judge; the
// record contract's own error, so that the command can tell it apart.
var ErrForeign = kafkarecord.ErrForeign

// Read reads both topics from their start to the last stable offset each partition had when
// the read began. conn are the client's connection options: the dispatcher's security
// (kafka.Security.KgoOpts). The KAFKA:msg records go to sink, at most batch at a time (0: DefaultBatch),
// so what Read holds does not grow with the topic's retention (issue #57 finding 5).
func Read(ctx context.Context, brokers []string, conn []kgo.Opt, topicMsg, topicSchd string, timeout time.Duration, batch int, sink MsgSink) (Seen, error) {
	if batch <= 0 {
		batch = DefaultBatch
	}
	s := Seen{Floors: map[string]int64{}, Schd: map[string]int64{}}
	msg := make(map[int64]outbox.Published, batch)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ends, err := lastStable(ctx, brokers, conn, topicMsg, topicSchd)
	if err != nil {
		return s, err
	}
	start := map[string]map[int32]kgo.Offset{}
	left := 0
	for t, ps := range ends {
		for p, end := range ps {
			if end > 0 {
				if start[t] == nil {
					start[t] = map[int32]kgo.Offset{}
				}
				start[t][p] = kgo.NewOffset().AtStart()
				left++
			}
		}
	}
	if left == 0 {
		return s, nil
	}
	flush := func() error {
		if len(msg) == 0 {
			return nil
		}
		if err := sink(ctx, msg); err != nil {
			return fmt.Errorf("after %d records: %w", s.Records, err)
		}
		clear(msg)
		return nil
	}
	// Control records are kept so that a partition whose last batch is a transaction marker
	// is seen to reach its end.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(start),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}, conn...)...)
	if err != nil {
		return s, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	next := map[string]map[int32]int64{}
	for left > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return s, fmt.Errorf("read the topics to their end (%d partitions left): %w", left, ctx.Err())
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err) })
		if ferr != nil {
			return s, ferr
		}
		var rerr error
		fetches.EachRecord(func(r *kgo.Record) {
			if next[r.Topic] == nil {
				next[r.Topic] = map[int32]int64{}
			}
			end := ends[r.Topic][r.Partition]
			before := next[r.Topic][r.Partition]
			next[r.Topic][r.Partition] = max(before, r.Offset+1)
			if before < end && r.Offset+1 >= end {
				left--
			}
			if r.Attrs.IsControl() || r.Offset >= end {
				return
			}
			if rerr != nil {
				return
			}
			if rerr = s.add(r, topicMsg, msg); rerr == nil && len(msg) >= batch {
				rerr = flush()
			}
		})
		if rerr != nil {
			return s, rerr
		}
	}
	return s, flush()
}

// add takes one record into s, and a KAFKA:msg record into msg.
func (s *Seen) add(r *kgo.Record, topicMsg string, msg map[int64]outbox.Published) error {
	m, err := kafkarecord.Parse(r.Headers)
	if err != nil {
		return fmt.Errorf("%s/%d offset %d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	id, version := m.EventID, m.Version
	s.Records++
	flid := string(r.Key)
	s.Floors[flid] = max(s.Floors[flid], version)
	s.MaxID = max(s.MaxID, id)
	if r.Topic == topicMsg {
		msg[id] = outbox.Published{FLID: flid, Version: version}
		s.Msg++
	} else {
		s.Schd[flid] = max(s.Schd[flid], version)
	}
	return nil
}

// lastStable asks the brokers for every partition's last stable offset (read_committed).
func lastStable(ctx context.Context, brokers []string, conn []kgo.Opt, topics ...string) (map[string]map[int32]int64, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, conn...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	meta := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		meta.Topics = append(meta.Topics, mt)
	}
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("topic metadata: %w", err)
	}
	for _, mt := range mresp.Topics {
		if err := kerrOf(mt.ErrorCode); err != nil {
			return nil, fmt.Errorf("topic %s: %w", *mt.Topic, err)
		}
	}
	resp, err := kafkarecord.ListOffsetsRequest(mresp.Topics, kafkarecord.ReadCommitted).RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("last stable offsets: %w", err)
	}
	out := map[string]map[int32]int64{}
	for _, t := range resp.Topics {
		out[t.Topic] = map[int32]int64{}
		for _, p := range t.Partitions {
			if err := kerrOf(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("last stable offset of %s/%d: %w", t.Topic, p.Partition, err)
			}
			out[t.Topic][p.Partition] = p.Offset
		}
	}
	return out, nil
}

func kerrOf(code int16) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("kafka error code %d", code)
}

// Applied is what CatchUpMsg and Apply changed.
type Applied struct {
	flightstore.Raised
	outbox.Caught
}

// CatchUpMsg returns the MsgSink that marks the unsent KAFKA:msg events of each batch SENT
// (outbox.CatchUpMsg), one short transaction per batch under the pipeline lock, and counts them
// into a.Msg. Each batch stands on its own and a second run finds them SENT, so a run that
// stops half way is completed by running it again.
func CatchUpMsg(pool *pgxpool.Pool, now time.Time, a *Applied) MsgSink {
	return func(ctx context.Context, batch map[int64]outbox.Published) error {
		n, err := db.WithTxV(ctx, pool, func(tx pgx.Tx) (int64, error) {
			if err := leader.LockPipelineTx(ctx, tx); err != nil {
				return 0, err
			}
			return outbox.CatchUpMsg(ctx, tx, batch, now)
		})
		a.Msg += n
		return err
	}
}

// Apply writes the rest of what the topics hold into PostgreSQL in one transaction under the
// pipeline lock (R-TX-5: it writes flight_schd, as the pump does): the floors and the raised
// flights, the KAFKA:schd rows already published marked SENT, and the event sequence past the
// largest published ID. Its statements take at most batch FLIDs each (0: DefaultBatch); it
// stays one transaction so that FloorRecordedAt, which control's resume after a restore
// trusts (R-RESTORE-3), never names a floor only partly recorded. It is idempotent: a second
// run finds nothing below its floor.
func Apply(ctx context.Context, pool *pgxpool.Pool, s Seen, batch int, now time.Time) (Applied, error) {
	if batch <= 0 {
		batch = DefaultBatch
	}
	return db.WithTxV(ctx, pool, func(tx pgx.Tx) (Applied, error) {
		var a Applied
		if err := leader.LockPipelineTx(ctx, tx); err != nil {
			return a, err
		}
		var err error
		if a.Raised, err = flightstore.RaiseVersions(ctx, tx, s.Floors, batch, now); err != nil {
			return a, err
		}
		if a.Schd, err = outbox.CatchUpSchd(ctx, tx, s.Schd, batch, now); err != nil {
			return a, err
		}
		if a.Sequence, err = outbox.MoveSequencePast(ctx, tx, s.MaxID); err != nil {
			return a, err
		}
		return a, nil
	})
}
