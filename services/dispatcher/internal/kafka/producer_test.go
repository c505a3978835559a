package kafka_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
)

// fakeTopic is the topic of the kfake clusters, each a test's own.
const fakeTopic = "msgx.flight.msg"

// cluster is a kfake broker, only for a fault the real broker cannot produce on demand (each
// use says which).
func cluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, fakeTopic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// shared is the shared real broker with a topic of the test's own (one partition, the given
// topic configs).
func shared(t *testing.T, configs map[string]string) (*kafkatest.Cluster, string) {
	t.Helper()
	c := kafkatest.Shared(t)
	return c, c.Topic(t, "msgx.flight.msg", 1, configs)
}

// TestStartupFailsWithoutIdempotence: there is no fallback to a non-idempotent producer. A
// broker that does not offer InitProducerID (older than 0.11) or refuses it (no
// IdempotentWrite permission) makes New fail.
func TestStartupFailsWithoutIdempotence(t *testing.T) {
	t.Parallel()
	t.Run("InitProducerID not offered", func(t *testing.T) {
		t.Parallel()
		// kfake: a real Kafka offers InitProducerID since 0.11, and 4.x serves nothing older;
		// only a fake broker can leave it out of its ApiVersions.
		v := kversion.V2_8_0()
		v.SetMaxKeyVersion(int16(kmsg.InitProducerID), -1)
		_, addrs := cluster(t, kfake.MaxVersions(v))
		if p, err := kafka.New(addrs, "test", config.Default().Kafka.TransactionalID, config.Default().Kafka.MaxMessageBytes, kafka.Security{}); err == nil {
			_ = p.Close(time.Second)
			t.Fatal("producer started against a broker without InitProducerID")
		}
	})
	t.Run("InitProducerID refused", func(t *testing.T) {
		t.Parallel()
		// kfake: a real broker refuses InitProducerID only to a principal without the
		// IdempotentWrite (or any Write) permission, which takes an authorizer and a principal
		// other than the controller's; over PLAINTEXT every connection is User:ANONYMOUS, the
		// controller's too.
		c, addrs := cluster(t)
		c.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			resp := req.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			resp.ProducerID, resp.ProducerEpoch = -1, -1
			return resp, nil, true
		})
		if p, err := kafka.New(addrs, "test", config.Default().Kafka.TransactionalID, config.Default().Kafka.MaxMessageBytes, kafka.Security{}); err == nil {
			_ = p.Close(time.Second)
			t.Fatal("producer started although the broker refused InitProducerID")
		}
	})
	t.Run("idempotence available", func(t *testing.T) {
		t.Parallel()
		p, err := kafka.New(kafkatest.Shared(t).Addrs, "test", config.Default().Kafka.TransactionalID, config.Default().Kafka.MaxMessageBytes, kafka.Security{})
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Close(time.Second)
	})
}

// TestContract: a configuration that breaks the producer contract is refused before any
// connection.
func TestContract(t *testing.T) {
	t.Parallel()
	breakers := map[string]func(c *sarama.Config){
		"not idempotent":     func(c *sarama.Config) { c.Producer.Idempotent = false },
		"acks=1":             func(c *sarama.Config) { c.Producer.RequiredAcks = sarama.WaitForLocal },
		"two in flight":      func(c *sarama.Config) { c.Net.MaxOpenRequests = 2 },
		"no retry":           func(c *sarama.Config) { c.Producer.Retry.Max = 0 },
		"protocol below 2.8": func(c *sarama.Config) { c.Version = sarama.V2_7_0_0 },
	}
	for name, breakIt := range breakers {
		c := kafka.Config("test", config.Default().Kafka.MaxMessageBytes)
		breakIt(c)
		if p, err := kafka.NewWithConfig([]string{"127.0.0.1:1"}, c, config.Default().Kafka.TransactionalID); err == nil {
			_ = p.Close(time.Second)
			t.Errorf("%s: accepted", name)
		}
	}
	c := kafka.Config("test", config.Default().Kafka.MaxMessageBytes)
	if !c.Producer.Idempotent || c.Producer.RequiredAcks != sarama.WaitForAll || c.Net.MaxOpenRequests != 1 ||
		c.Producer.Retry.Max < 1 || !c.Version.IsAtLeast(sarama.V2_8_0_0) {
		t.Fatalf("Config breaks the contract: %+v", c.Producer)
	}
}

// TestConfiguredVersionServesKafka4: Kafka 4 no longer serves the oldest protocol versions
// (KIP-896), and sarama speaks the versions of its configured Version without negotiating
// them. The producer, with the Version of Config, makes its producer id, fences, and commits a
// transaction of records with headers and a tombstone that a read_committed consumer reads
// back, on the real broker. The broker is shown to refuse a client whose Version is below
// KIP-896's cut, so the first part means something.
func TestConfiguredVersionServesKafka4(t *testing.T) {
	t.Parallel()
	t.Run("Config's version", func(t *testing.T) {
		t.Parallel()
		c, topic := shared(t, nil)
		p := fenced(t, c.Addrs, topic, kafkatest.Name("msgx-dispatcher"), "test")
		withHeaders := rec(topic, "F1", "v1")
		withHeaders.Headers = [][2]string{{kafkarecord.HeaderEventID, "1"}, {kafkarecord.HeaderStateVersion, "1"}}
		if errs := publish(t, p, time.Minute, withHeaders, rec(topic, "F2", "")); errs[0] != nil || errs[1] != nil {
			t.Fatalf("publish with %s: %v, %v", kafka.Config("test", config.Default().Kafka.MaxMessageBytes).Version, errs[0], errs[1])
		}
		if got := readCommitted(t, c.Addrs, topic, 2); len(got) != 2 || got[0] != "v1" || got[1] != "<null>" {
			t.Fatalf("topic holds %q, want v1 and the tombstone", got)
		}
	})
	t.Run("a version Kafka 4 no longer serves", func(t *testing.T) {
		t.Parallel()
		if v := kafkatest.Version(); strings.HasPrefix(v, "3.") {
			t.Skipf("the broker is Kafka %s, which still serves the old versions", v)
		}
		c, topic := shared(t, nil)
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V0_10_0_0 // Produce v2, removed by KIP-896
		cfg.Producer.Return.Successes = true
		cfg.Producer.Retry.Max = 0
		// Refused at the connection (the metadata) or at the produce: either way not served.
		sp, err := sarama.NewSyncProducer(c.Addrs, cfg)
		if err == nil {
			defer func() { _ = sp.Close() }()
			_, _, err = sp.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("old")})
		}
		if err == nil {
			t.Fatalf("the broker at %v took Produce v2: it is no Kafka 4, and the check above proves nothing", c.Addrs)
		}
	})
}

// hold makes the kfake broker hold the first Produce request until release is closed; held is
// closed when it arrived.
func hold(c *kfake.Cluster) (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		first := false
		once.Do(func() { first = true })
		if first {
			close(held)
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	return held, release
}

func rec(topic, key, value string) kafka.Record {
	r := kafka.Record{Topic: topic, Key: key}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// fenced is a producer of the transactional id prefix txnID, fenced for topic.
func fenced(t *testing.T, addrs []string, topic, txnID, clientID string) *kafka.Producer {
	t.Helper()
	p, err := kafka.New(addrs, clientID, txnID, config.Default().Kafka.MaxMessageBytes, kafka.Security{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(30 * time.Second) })
	fence(t, p, topic)
	return p
}

func fence(t *testing.T, p *kafka.Producer, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.Fence(ctx, topic); err != nil {
		t.Fatal(err)
	}
}

func publish(t *testing.T, p *kafka.Producer, d time.Duration, rs ...kafka.Record) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return p.Publish(ctx, rs)
}

// readCommitted reads the topic from the start as a consumer must (read_committed) until want
// records arrived, then a little longer so that a record beyond them shows up too, and returns
// the values ("<null>" for a tombstone).
func readCommitted(t *testing.T, addrs []string, topic string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var got []string
	value := func(r *kgo.Record) {
		v := string(r.Value)
		if r.Value == nil {
			v = "<null>"
		}
		got = append(got, v)
	}
	for len(got) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(value)
	}
	// Anything beyond want (a late record of the deposed holder) would arrive here.
	more, mcancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer mcancel()
	for more.Err() == nil {
		cl.PollFetches(more).EachRecord(value)
	}
	return got
}

// TestDeposedHolderIsFenced is the late-record case: the old holder's record is held by the
// broker while sarama waits for it; the old term ends (the lock is lost) and a new process
// fences and sends the FLID's next states; then the broker takes the old request. The old
// record must not become visible after the new ones: the new fence made the broker refuse it
// (or abort its transaction), so the old call fails and a read_committed consumer sees only the
// new holder's records.
// Guards R-INV-15.
//
// kfake: the broker must hold one chosen Produce request while it serves the next holder's
// fence and records on the same topic; a real broker paused or stopped (kafkatest.Own) would
// hold the next holder too.
func TestDeposedHolderIsFenced(t *testing.T) {
	t.Parallel()
	c, addrs := cluster(t)
	txnID := kafkatest.Name("msgx-dispatcher")
	old := fenced(t, addrs, fakeTopic, txnID, "old")
	held, release := hold(c)
	oldErrs := make(chan []error, 1)
	go func() { oldErrs <- publish(t, old, time.Minute, rec(fakeTopic, "F1", "v5-old")) }()
	<-held

	nw := fenced(t, addrs, fakeTopic, txnID, "new")
	for _, r := range []kafka.Record{rec(fakeTopic, "F1", "v5-new"), rec(fakeTopic, "F1", "")} {
		if errs := publish(t, nw, 30*time.Second, r); errs[0] != nil {
			t.Fatalf("new holder's send: %v", errs[0])
		}
	}
	close(release)
	if errs := <-oldErrs; errs[0] == nil {
		t.Fatal("the deposed holder's late record was committed")
	}
	if got := readCommitted(t, addrs, fakeTopic, 2); len(got) != 2 || got[0] != "v5-new" || got[1] != "<null>" {
		t.Fatalf("topic holds %q, want the new holder's v5-new then the tombstone only", got)
	}
}

// TestUnansweredRecordIsNeverCommitted: a record without an answer by the caller's deadline
// fails the call and its producer is dropped, so its transaction is never committed, not even
// when the broker takes the record once it answers again. The broker of the test's own is
// paused (SIGSTOP): it keeps the connection and answers nothing.
func TestUnansweredRecordIsNeverCommitted(t *testing.T) {
	t.Parallel()
	s := kafkatest.Own(t, nil)
	topic := s.Topic(t, "msgx.flight.msg", 1, nil)
	p := fenced(t, s.Addrs, topic, kafkatest.Name("msgx-dispatcher"), "test")
	s.Pause()
	errs := publish(t, p, 2*time.Second, rec(topic, "F1", "unanswered"))
	s.Resume()
	if !errors.Is(errs[0], kafka.ErrNoAnswer) {
		t.Fatalf("send to the paused broker: %v, want ErrNoAnswer", errs[0])
	}
	if p.Fenced(topic) {
		t.Fatal("the failed transaction's producer is still in use")
	}
	fence(t, p, topic)
	if errs := publish(t, p, time.Minute, rec(topic, "F1", "next")); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := readCommitted(t, s.Addrs, topic, 1); len(got) != 1 || got[0] != "next" {
		t.Fatalf("topic holds %q, want only the record sent after the fence", got)
	}
}

// TestFailedRecordAbortsItsCall: one record refused by the broker for what it is (larger than
// the topic's max.message.bytes, below the kafka.max-message-bytes the producer has) fails the
// transaction; the others of the call are ErrAborted or carry the same refusal (one batch),
// nothing of the call is visible, and the next call, after a fresh fence, goes through. The
// refused record shared its partition with another of the call, so the refusal may be their
// batch's: ErrShared, charged rather than DEAD (docs/dispatcher.md, "Broker errors").
func TestFailedRecordAbortsItsCall(t *testing.T) {
	t.Parallel()
	c, topic := shared(t, map[string]string{"max.message.bytes": "1024"})
	p := fenced(t, c.Addrs, topic, kafkatest.Name("msgx-dispatcher"), "test")
	bad := kafka.Record{Topic: topic, Key: "BAD", Value: []byte(strings.Repeat("b", 2048))}
	errs := publish(t, p, time.Minute, bad, rec(topic, "OK", "ok-1"))
	if !errors.Is(errs[0], sarama.ErrMessageSizeTooLarge) || errors.Is(errs[0], kafka.ErrAborted) || !errors.Is(errs[0], kafka.ErrShared) {
		t.Fatalf("refused record: %v, want the broker's MESSAGE_TOO_LARGE, shared with the other record's partition", errs[0])
	}
	if !errors.Is(errs[1], kafka.ErrAborted) && (!errors.Is(errs[1], sarama.ErrMessageSizeTooLarge) || !errors.Is(errs[1], kafka.ErrShared)) {
		t.Fatalf("the other record: %v, want ErrAborted or the same refusal", errs[1])
	}
	fence(t, p, topic)
	if errs := publish(t, p, time.Minute, rec(topic, "OK", "ok-2")); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := readCommitted(t, c.Addrs, topic, 1); len(got) != 1 || got[0] != "ok-2" {
		t.Fatalf("topic holds %q, want ok-2 only", got)
	}
}

// TestPublishAfterCancelSendsNothing: a caller that gave up hands nothing to sarama, and a
// producer that was not fenced in this term sends nothing.
func TestPublishAfterCancelSendsNothing(t *testing.T) {
	t.Parallel()
	c, topic := shared(t, nil)
	p := fenced(t, c.Addrs, topic, kafkatest.Name("msgx-dispatcher"), "test")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if errs := p.Publish(ctx, []kafka.Record{rec(topic, "F1", "cancelled")}); !errors.Is(errs[0], kafka.ErrAborted) {
		t.Fatalf("cancelled send: %v, want ErrAborted", errs[0])
	}
	p.Release(topic)
	if errs := publish(t, p, time.Minute, rec(topic, "F1", "unfenced")); !errors.Is(errs[0], kafka.ErrNotFenced) {
		t.Fatalf("unfenced send: %v, want ErrNotFenced", errs[0])
	}
	fence(t, p, topic)
	if errs := publish(t, p, time.Minute, rec(topic, "F1", "sent")); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := readCommitted(t, c.Addrs, topic, 1); len(got) != 1 || got[0] != "sent" {
		t.Fatalf("topic holds %q, want only the record sent while fenced", got)
	}
}

// TestRecordOverTheBrokerLimitIsRefusedBeforeSending: a record whose batch would exceed the
// topic's max.message.bytes is refused with ErrRecordTooLarge and never handed to sarama, so
// the other records of the call still commit; one whose batch is exactly the limit goes
// through (the broker counts it as BatchBytes does); and records that fit one by one are never
// batched into more than the broker takes.
func TestRecordOverTheBrokerLimitIsRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	const limit = 2048
	c, topic := shared(t, map[string]string{"max.message.bytes": strconv.Itoa(limit)})
	p, err := kafka.New(c.Addrs, "test", kafkatest.Name("msgx-dispatcher"), limit, kafka.Security{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(30 * time.Second) })
	fence(t, p, topic)
	sized := func(key string, batch int) kafka.Record {
		r := kafka.Record{Topic: topic, Key: key, Value: []byte{}}
		r.Value = []byte(strings.Repeat("x", batch-kafka.BatchBytes(r)))
		if got := kafka.BatchBytes(r); got != batch {
			t.Fatalf("BatchBytes = %d, want %d", got, batch)
		}
		return r
	}
	fits, over := sized("FIT", limit), sized("OVER", limit+1)
	errs := publish(t, p, time.Minute, over, fits, rec(topic, "OK", "ok"))
	if !errors.Is(errs[0], kafka.ErrRecordTooLarge) || !strings.Contains(errs[0].Error(), "2049 bytes") {
		t.Fatalf("record over the limit: %v, want ErrRecordTooLarge naming its size", errs[0])
	}
	if errs[1] != nil || errs[2] != nil {
		t.Fatalf("the records that fit: %v, %v; want both committed", errs[1], errs[2])
	}
	// Three records of 60% of the limit on the one partition: sarama must put each in its own
	// batch; with its default bound (1 MiB) it would send one batch the broker refuses.
	errs = publish(t, p, time.Minute, sized("A", limit*6/10), sized("B", limit*6/10), sized("C", limit*6/10))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("record %d of 60%%: %v", i, err)
		}
	}
	if got := readCommitted(t, c.Addrs, topic, 5); len(got) != 5 || got[0] != string(fits.Value) || got[1] != "ok" {
		t.Fatalf("topic holds %d records, want the one that fits exactly, ok and the three of 60%%", len(got))
	}
}
