package kafkatest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// produceOne writes one record to topic on c and reads it back, the way a test uses a broker.
func produceOne(t *testing.T, c *kafkatest.Cluster, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollRecords(ctx, 1)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if fs.NumRecords() != 1 {
		t.Fatalf("read %d records back, want 1", fs.NumRecords())
	}
}

func TestSharedTopicsAreTheTestsOwn(t *testing.T) {
	c := kafkatest.Shared(t)
	a, b := c.Topic(t, "kit", 2, nil), c.Topic(t, "kit", 2, nil)
	if a == b {
		t.Fatalf("two topics of one test share the name %s", a)
	}
	produceOne(t, c, a)
}

// A broker of the test's own survives kill -9 with its records, at the same address.
func TestOwnBrokerKilledAndRestarted(t *testing.T) {
	s := kafkatest.Own(t, nil)
	topic := s.Topic(t, "kit", 1, nil)
	produceOne(t, s.Cluster, topic)
	s.Kill()
	s.Start()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	offs, err := s.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup(topic, 0); o.Offset != 1 {
		t.Fatalf("after the kill the topic ends at %d, want 1 (%v)", o.Offset, o.Err)
	}
}

// Three nodes replicate: a topic at replication factor 3 keeps taking acks=all records with its
// leader killed, and the killed node comes back.
func TestOwnClusterLosesALeader(t *testing.T) {
	t.Parallel()
	n := kafkatest.OwnCluster(t, 3, nil)
	topic := n.Topic(t, "msgx.cluster", 1, nil)
	produceOne(t, n.Cluster, topic)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	td, err := n.Admin().ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := td[topic].Partitions[0].Leader
	if len(td[topic].Partitions[0].Replicas) != 3 {
		t.Fatalf("replicas %v, want 3", td[topic].Partitions[0].Replicas)
	}
	n.Node(leader).Kill()
	produceOne(t, n.Cluster, topic)
	n.Node(leader).Start()
}

// With a controller of its own, three brokers keep their metadata quorum with two of them
// killed: the survivor leads the partition and refuses acks=all records with NOT_ENOUGH_REPLICAS
// (min.insync.replicas 2), and once the two are back the records go through again.
func TestOwnClusterWithControllerLosesTwoBrokers(t *testing.T) {
	t.Parallel()
	n := kafkatest.OwnClusterWith(t, kafkatest.ClusterOptions{Brokers: 3, Controller: true})
	if n.Controller == nil || len(n.Servers) != 3 {
		t.Fatalf("controller %v, %d brokers: want a controller and 3 brokers", n.Controller, len(n.Servers))
	}
	topic := n.Topic(t, "msgx.cluster", 1, nil)
	produceOne(t, n.Cluster, topic)
	survivor := n.Servers[2]
	n.Servers[0].Kill()
	n.Servers[1].Kill()
	testwait.ForState(t, time.Minute, "the survivor leading the partition alone", func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		td, err := n.Admin().ListTopics(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		p := td[topic].Partitions[0]
		return p.Leader == survivor.ID() && len(p.ISR) == 1, fmt.Sprintf("leader %d, in sync %v", p.Leader, p.ISR)
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(survivor.Addr()), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("produce with one of three in sync: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	n.Servers[0].Start()
	n.Servers[1].Start()
	produceOne(t, n.Cluster, topic)
}
