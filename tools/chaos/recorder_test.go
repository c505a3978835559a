package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

	rec, err := startRecorder(addr, topicMsg, topicSchd)
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
