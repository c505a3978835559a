package floor_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/floor"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// collect is a MsgSink that copies each batch into into (nil: expects none) and fails the test
// on a batch larger than batch.
func collect(t *testing.T, into map[int64]outbox.Published, batch int) floor.MsgSink {
	return func(_ context.Context, b map[int64]outbox.Published) error {
		if into == nil || len(b) > batch {
			t.Errorf("a batch of %d KAFKA:msg records (bound %d)", len(b), batch)
			return nil
		}
		maps.Copy(into, b)
		return nil
	}
}

// topics creates the test's own msg and schd topics of two partitions on the shared broker.
func topics(t *testing.T) (c *kafkatest.Cluster, msg, schd string) {
	t.Helper()
	c = kafkatest.Shared(t)
	return c, c.Topic(t, "msgx.flight.msg", 2, nil), c.Topic(t, "msgx.flight.schd", 2, map[string]string{"cleanup.policy": "compact"})
}

func record(topic, flid string, id, version int64) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(flid), Value: []byte("{}"), Headers: []kgo.RecordHeader{
		{Key: "msgx-event-id", Value: []byte(strconv.FormatInt(id, 10))},
		{Key: "msgx-state-version", Value: []byte(strconv.FormatInt(version, 10))},
	}}
}

// produce writes recs in one transaction, committed or aborted, with a transactional id of its
// own.
func produce(t *testing.T, c *kafkatest.Cluster, commit bool, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.TransactionalID(kafkatest.Name("floor-test")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := t.Context()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
	// EndTxn returns once the coordinator decided; the markers reach the partitions after it,
	// and only then does the last stable offset, where Read stops, pass the transaction. Wait
	// for it, as a restore drill's operator waits for the dispatcher to be stopped.
	topics := map[string]bool{}
	for _, r := range recs {
		topics[r.Topic] = true
	}
	for topic := range topics {
		testwait.ForState(t, time.Minute, "the transaction's markers on "+topic, func() (bool, string) {
			end, err := c.Admin().ListEndOffsets(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			stable, err := c.Admin().ListCommittedOffsets(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			settled := true
			end.Each(func(o kadm.ListedOffset) {
				if s, ok := stable.Lookup(o.Topic, o.Partition); !ok || s.Offset != o.Offset {
					settled = false
				}
			})
			return settled, "last stable offsets behind the ends"
		})
	}
}

// Read takes what a read_committed consumer sees, to each partition's end: the committed
// records raise the floors, an aborted transaction (never delivered) counts for nothing, and a
// partition that ends in a transaction marker is read to its end (R-RESTORE-1).
func TestReadTakesWhatConsumersReceived(t *testing.T) {
	t.Parallel()
	c, topicMsg, topicSchd := topics(t)
	produce(t, c, true, record(topicMsg, "A", 1, 1), record(topicMsg, "A", 2, 2), record(topicMsg, "B", 3, 1),
		record(topicSchd, "A", 4, 2), record(topicSchd, "B", 5, 1))
	produce(t, c, false, record(topicMsg, "A", 6, 9), record(topicSchd, "C", 7, 4))
	produce(t, c, true, record(topicMsg, "B", 8, 2))
	msg := map[int64]outbox.Published{}
	s, err := floor.Read(context.Background(), c.Addrs, nil, topicMsg, topicSchd, time.Minute, 0, collect(t, msg, floor.DefaultBatch))
	if err != nil {
		t.Fatal(err)
	}
	if s.Floors["A"] != 2 || s.Floors["B"] != 2 || len(s.Floors) != 2 {
		t.Errorf("floors %v, want A 2, B 2 (the aborted v9 and C never delivered)", s.Floors)
	}
	if s.MaxID != 8 || s.Msg != 4 || len(msg) != 4 || msg[8].FLID != "B" || msg[8].Version != 2 || s.Schd["A"] != 2 || s.Records != 6 {
		t.Errorf("read %+v and msg %v, want 6 records, 4 msg events up to id 8, schd A at 2", s, msg)
	}

	produce(t, c, true, &kgo.Record{Topic: topicMsg, Key: []byte("D"), Value: []byte("{}")})
	if _, err := floor.Read(context.Background(), c.Addrs, nil, topicMsg, topicSchd, time.Minute, 0, collect(t, msg, floor.DefaultBatch)); !errors.Is(err, floor.ErrForeign) {
		t.Errorf("a record without the dispatcher's headers: %v, want ErrForeign", err)
	}
}

// An empty cluster has nothing published: no floor, no wait.
func TestReadOfEmptyTopics(t *testing.T) {
	t.Parallel()
	c, topicMsg, topicSchd := topics(t)
	s, err := floor.Read(context.Background(), c.Addrs, nil, topicMsg, topicSchd, time.Minute, 0, collect(t, nil, 0))
	if err != nil || len(s.Floors) != 0 || s.Records != 0 {
		t.Errorf("read %+v, %v; want nothing", s, err)
	}
}

// version-floor in batches (issue #57 finding 5): Read hands the KAFKA:msg records over a
// batch at a time, never more, each batch marks its events SENT in a transaction of its own,
// and Apply's statements take a batch of FLIDs at a time; the result is the one of a single
// batch. Measured: the records held at once never exceed the batch.
func TestVersionFloorInBatches(t *testing.T) {
	t.Parallel()
	c, topicMsg, topicSchd := topics(t)
	pg := pgtest.New(t)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// The restored outbox: 7 unsent KAFKA:msg events of F0..F6 at v1, which Kafka already
	// holds, and one (F7) it does not; schd rows of F0..F6 at v1, which the topic holds at v3.
	var events []outbox.NewEvent
	for i := range 8 {
		flid := "F" + strconv.Itoa(i)
		events = append(events,
			outbox.NewEvent{Target: outbox.TargetMsg, PartitionKey: flid, Type: outbox.TypeUpsert, Version: 1, Payload: []byte("{}"), MsgID: int64(i + 1)},
			outbox.NewEvent{Target: outbox.TargetSchd, PartitionKey: flid, Type: outbox.TypeUpsert, Version: 1, Payload: []byte("{}"), MsgID: int64(i + 1)})
		pg.Exec(t, `INSERT INTO flight_schd (flid, state_version, created_at, updated_at) VALUES ($1, 1, $2, $2)`, flid, now)
	}
	if err := outbox.Add(ctx, pg.Pool, events, now); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	rows, err := pg.Pool.Query(ctx, `SELECT partition_key, event_id FROM msg_event WHERE target = 'KAFKA:msg'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var flid string
		var id int64
		if err := rows.Scan(&flid, &id); err != nil {
			t.Fatal(err)
		}
		ids[flid] = id
	}
	rows.Close()
	var recs []*kgo.Record
	for i := range 7 {
		flid := "F" + strconv.Itoa(i)
		recs = append(recs, record(topicMsg, flid, ids[flid], 1), record(topicSchd, flid, 1000+int64(i), 3))
	}
	produce(t, c, true, recs...)

	const batch = 2
	var (
		a       floor.Applied
		largest int
		batches int
	)
	sink := floor.CatchUpMsg(pg.Pool, now, &a)
	s, err := floor.Read(ctx, c.Addrs, nil, topicMsg, topicSchd, time.Minute, batch, func(ctx context.Context, b map[int64]outbox.Published) error {
		batches++
		largest = max(largest, len(b))
		return sink(ctx, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("version floor: %d records read, %d KAFKA:msg in %d batches, at most %d held at once (batch %d)", s.Records, s.Msg, batches, largest, batch)
	if s.Msg != 7 || largest > batch || batches < 4 || a.Msg != 7 {
		t.Errorf("read %d msg records in %d batches of at most %d, %d marked SENT; want 7, at least 4 batches of at most %d, 7",
			s.Msg, batches, largest, a.Msg, batch)
	}
	applied, err := floor.Apply(ctx, pg.Pool, s, batch, now)
	if err != nil {
		t.Fatal(err)
	}
	if applied.Floors != 7 || applied.Flights != 7 || applied.Schd != 7 || applied.Sequence != 1007 {
		t.Errorf("applied %+v, want 7 floors, 7 flights raised, 7 schd rows SENT, next event ID 1007", applied)
	}
	var unsent []string
	if err := pg.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(target || ' ' || partition_key ORDER BY target), '{}')
		FROM msg_event WHERE state <> 'SENT'`).Scan(&unsent); err != nil {
		t.Fatal(err)
	}
	if len(unsent) != 2 || unsent[0] != "KAFKA:msg F7" || unsent[1] != "KAFKA:schd F7" {
		t.Errorf("unsent %v, want only F7's two events (Kafka never had them)", unsent)
	}
	if at, err := flightstore.FloorRecordedAt(ctx, pg.Pool); err != nil || at == nil || !at.Equal(now) {
		t.Errorf("floor recorded at %v (%v), want %v", at, err, now)
	}
	// Run again: nothing left to change.
	var again floor.Applied
	if _, err := floor.Read(ctx, c.Addrs, nil, topicMsg, topicSchd, time.Minute, batch, floor.CatchUpMsg(pg.Pool, now, &again)); err != nil || again.Msg != 0 {
		t.Errorf("second run: %d msg events marked SENT (%v), want 0", again.Msg, err)
	}
}
