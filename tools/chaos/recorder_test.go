package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// TestDiagnoseNamesAHangingTransaction: a transaction left open holds read_committed
// consumers at its first record; diagnose must say so, and say nothing once it is over.
func TestDiagnoseNamesAHangingTransaction(t *testing.T) {
	c := kafkatest.Shared(t)
	topicMsg, topicSchd := c.Topic(t, "msgx.flight.msg", 1, nil), c.Topic(t, "msgx.flight.schd", 1, nil)
	addr := c.Addrs[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	rec, err := startRecorder([]string{addr}, topicMsg, topicSchd)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(kafkatest.Name("diagnose-test")), kgo.DefaultProduceTopic(topicMsg))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	send := func(id string) {
		t.Helper()
		r := &kgo.Record{Key: []byte("F1"), Value: []byte("x"), Headers: []kgo.RecordHeader{{Key: "msgx-event-id", Value: []byte(id)}}}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	send("1")
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the recorder to read 1 record(s)", func() bool { return rec.count() >= 1 })
	if d := rec.diagnose(ctx); len(d) != 0 {
		t.Fatalf("a consumer that read everything: %q", d)
	}

	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	send("2")
	d := rec.diagnose(ctx)
	if len(d) != 1 || !strings.Contains(d[0], topicMsg+"/0") || !strings.Contains(d[0], "open transaction") {
		t.Fatalf("an open transaction: %q", d)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the recorder to read 2 record(s)", func() bool { return rec.count() >= 2 })
	if d := rec.diagnose(ctx); len(d) != 0 {
		t.Fatalf("after the commit: %q", d)
	}
}

// TestRecorderChecksTheContract: the recorder checks every record it reads against the event
// contract, and counts what breaks it (a foreign record too) without losing the record.
func TestRecorderChecksTheContract(t *testing.T) {
	r := &recorder{msg: map[string][]received{}, schd: map[string][]received{}, seen: map[int64]int{},
		next: map[string]map[int32]int64{}, fetchErr: map[string]map[int32]error{}, topicMsg: "m", topicSchd: "s"}
	var recs []*kgo.Record
	for i, e := range contracttest.Samples("F", time.Now()) {
		topic := "s"
		if e.Target == outbox.TargetMsg {
			topic = "m"
		}
		rec := &kgo.Record{Topic: topic, Key: []byte(e.FLID), Value: e.Payload, Offset: int64(i)}
		for _, h := range kafkarecord.Headers(int64(i+1), e.Type, e.Version, "", "") {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		recs = append(recs, rec)
	}
	good := len(recs)
	spoiled := *recs[0]
	spoiled.Value = []byte(`{"FLID":"F1"}`)
	recs = append(recs, &spoiled, &kgo.Record{Topic: "m", Key: []byte("F1"), Value: []byte("x")})
	r.add(kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "m", Partitions: []kgo.FetchPartition{{Records: recs}}}}}})
	n, first := r.contractBreaks()
	if n != 2 || len(first) != 2 || !strings.Contains(first[0], "breaks the event contract") {
		t.Errorf("%d records broke the contract (%q), want 2 of %d", n, first, len(recs))
	}
	if r.records != good+2 || r.foreign != 1 {
		t.Errorf("read %d records, %d foreign: want %d and 1", r.records, r.foreign, good+2)
	}
}
