package floor_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/services/dispatcher/internal/floor"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

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
	s, err := floor.Read(context.Background(), c.Addrs, nil, topicMsg, topicSchd, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if s.Floors["A"] != 2 || s.Floors["B"] != 2 || len(s.Floors) != 2 {
		t.Errorf("floors %v, want A 2, B 2 (the aborted v9 and C never delivered)", s.Floors)
	}
	if s.MaxID != 8 || len(s.Msg) != 4 || s.Msg[8].FLID != "B" || s.Msg[8].Version != 2 || s.Schd["A"] != 2 || s.Records != 6 {
		t.Errorf("read %+v, want 6 records, 4 msg events up to id 8, schd A at 2", s)
	}

	produce(t, c, true, &kgo.Record{Topic: topicMsg, Key: []byte("D"), Value: []byte("{}")})
	if _, err := floor.Read(context.Background(), c.Addrs, nil, topicMsg, topicSchd, time.Minute); !errors.Is(err, floor.ErrForeign) {
		t.Errorf("a record without the dispatcher's headers: %v, want ErrForeign", err)
	}
}

// An empty cluster has nothing published: no floor, no wait.
func TestReadOfEmptyTopics(t *testing.T) {
	t.Parallel()
	c, topicMsg, topicSchd := topics(t)
	s, err := floor.Read(context.Background(), c.Addrs, nil, topicMsg, topicSchd, time.Minute)
	if err != nil || len(s.Floors) != 0 || s.Records != 0 {
		t.Errorf("read %+v, %v; want nothing", s, err)
	}
}
