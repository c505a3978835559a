package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startBroker runs run() in-process on a free loopback port and returns the announced address.
// The broker stops at the end of the test, and the test fails if run() does not return cleanly.
func startBroker(t *testing.T, extraArgs ...string) string {
	t.Helper()
	addr, stop := runBroker(t, extraArgs...)
	t.Cleanup(stop)
	return addr
}

// runBroker is startBroker with the stop in the caller's hands: stop cancels run() and fails
// the test if it does not return cleanly; calling it again does nothing.
func runBroker(t *testing.T, extraArgs ...string) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	args := append([]string{"-addr", "127.0.0.1:0", "-log-level", "none"}, extraArgs...)
	go func() {
		err := run(ctx, args, pw, io.Discard)
		_ = pw.CloseWithError(io.EOF)
		done <- err
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run returned %v after cancel", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("run did not return within 10s of cancel")
			}
		})
	}

	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the ready line: %v (run: %v)", err, drain(done))
	}
	// Keep draining stdout so a later write by run can never block on the pipe.
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "msgx-devkafka listening on ")
	if !ok {
		t.Fatalf("ready line = %q, want %q", line, "msgx-devkafka listening on <addr>")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatalf("announced address %q: %v", addr, err)
	}
	return addr, stop
}

func drain(done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		return nil
	}
}

func TestProduceConsumeOverTCP(t *testing.T) {
	addr := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// kgo's producer is idempotent with acks=all by default: the same contract as the dispatcher's.
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	// The seeded topics exist with the requested partition count before anything produces.
	meta := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"msgx.flight.msg", "msgx.flight.schd"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		meta.Topics = append(meta.Topics, rt)
	}
	meta.AllowAutoTopicCreation = false
	resp, err := meta.RequestWith(ctx, producer)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if len(resp.Brokers) != 1 || net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port))) != addr {
		t.Fatalf("brokers = %+v, want exactly one advertised as %s", resp.Brokers, addr)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 || len(rt.Partitions) != 3 {
			t.Fatalf("topic %s: error code %d, %d partitions; want seeded with 3", *rt.Topic, rt.ErrorCode, len(rt.Partitions))
		}
	}

	rec := &kgo.Record{Topic: "msgx.flight.msg", Key: []byte("FLID-42"), Value: []byte("hello")}
	if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	got := consumeOne(ctx, t, addr, "msgx.flight.msg")
	if string(got.Key) != "FLID-42" || string(got.Value) != "hello" {
		t.Fatalf("consumed key %q value %q, want FLID-42 / hello", got.Key, got.Value)
	}
	if got.ProducerID < 0 {
		t.Fatalf("record batch has producer id %d: the idempotent producer got no id", got.ProducerID)
	}
}

// TestDataDirKeepsRecordsAcrossRestart: with -data-dir a stopped broker comes back on the same
// address with its records, so a harness can stop and restart it under running producers and
// consumers without losing what was committed; without it the records are gone.
func TestDataDirKeepsRecordsAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	addr, stop := runBroker(t, "-data-dir", dir)
	t.Cleanup(stop)
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: "msgx.flight.msg", Key: []byte("FLID-9"), Value: []byte("kept")}
	err = producer.ProduceSync(ctx, rec).FirstErr()
	producer.Close()
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	stop()

	// The same address and directory: the record is still there.
	addr2 := startBroker(t, "-addr", addr, "-data-dir", dir)
	if addr2 != addr {
		t.Fatalf("restarted on %s, want %s", addr2, addr)
	}
	if got := consumeOne(ctx, t, addr, "msgx.flight.msg"); string(got.Key) != "FLID-9" || string(got.Value) != "kept" {
		t.Fatalf("after the restart consumed key %q value %q, want FLID-9 / kept", got.Key, got.Value)
	}

	// Without a directory a broker starts empty: the check above is the directory's doing.
	bare := startBroker(t)
	offsets := endOffsets(ctx, t, bare, "msgx.flight.msg")
	for p, o := range offsets {
		if o != 0 {
			t.Fatalf("a broker without -data-dir has %d records in partition %d", o, p)
		}
	}
}

// endOffsets lists the end offset of every partition of topic.
func endOffsets(ctx context.Context, t *testing.T, addr, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < 3; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	out := map[int32]int64{}
	for _, t2 := range resp.Topics {
		for _, p := range t2.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("list offsets %s/%d: error code %d", topic, p.Partition, p.ErrorCode)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// TestSaramaIdempotentProducer proves the broker serves the dispatcher's producer contract
// (R-OUTBOX-6): sarama's idempotent producer must obtain a producer id
// (InitProducerID) and write with acks=all and one request in flight.
func TestSaramaIdempotentProducer(t *testing.T) {
	addr := startBroker(t, "-topics", "msgx.flight.schd")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 5
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	producer, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama idempotent producer: %v", err)
	}
	defer producer.Close()

	msg := &sarama.ProducerMessage{Topic: "msgx.flight.schd", Key: sarama.StringEncoder("FLID-7"), Value: sarama.StringEncoder("schd")}
	if _, _, err := producer.SendMessage(msg); err != nil {
		t.Fatalf("send: %v", err)
	}

	got := consumeOne(ctx, t, addr, "msgx.flight.schd")
	if string(got.Key) != "FLID-7" || string(got.Value) != "schd" {
		t.Fatalf("consumed key %q value %q, want FLID-7 / schd", got.Key, got.Value)
	}
	if got.ProducerID < 0 {
		t.Fatalf("sarama wrote a non-idempotent batch (producer id %d)", got.ProducerID)
	}
}

// consumeOne reads the first record of topic from the start, over a fresh connection.
func consumeOne(ctx context.Context, t *testing.T, addr, topic string) *kgo.Record {
	t.Helper()
	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record on %s before the deadline", topic)
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		if recs := fetches.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.addr != "127.0.0.1:9092" || o.partitions != 3 || strings.Join(o.topics, ",") != "msgx.flight.msg,msgx.flight.schd" {
		t.Fatalf("defaults = %+v", o)
	}
	bad := map[string][]string{
		"wildcard host":  {"-addr", "0.0.0.0:9092"},
		"empty host":     {"-addr", ":9092"},
		"ipv6 wildcard":  {"-addr", "[::]:9092"},
		"no port":        {"-addr", "127.0.0.1"},
		"bad port":       {"-addr", "127.0.0.1:99999"},
		"zero parts":     {"-partitions", "0"},
		"bad topic":      {"-topics", "ok,not ok"},
		"bad log level":  {"-log-level", "loud"},
		"stray argument": {"extra"},
	}
	for name, args := range bad {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%s: %q accepted", name, args)
		}
	}
}

func TestPortInUseIsAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = run(context.Background(), []string{"-addr", ln.Addr().String()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("run on a taken port = %v, want a listen error", err)
	}
}
