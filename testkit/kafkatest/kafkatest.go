// Package kafkatest gives tests a real Apache Kafka: the local broker that tools/deps/up starts
// (Shared), on which each test creates topics of its own, and brokers of a test's own (Own),
// separate processes of the pinned release that a test kills with SIGKILL and restarts.
//
// A test only counts what it owns: its topics carry its process's and its own number in their
// names, its transactional ids and groups are its own, and a fault (a kill, a stop) only ever
// reaches a broker of its own, never the shared one the other packages use at the same time.
package kafkatest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnvBrokers names the shared local broker's address (default DefaultBrokers).
const EnvBrokers = "MSGX_TEST_KAFKA_BROKERS"

// DefaultBrokers is where tools/deps/up starts the shared broker.
const DefaultBrokers = "127.0.0.1:9092"

// EnvHome names the folder of the pinned release, whose libs/ holds its jars (the Makefile sets
// it; default: .cache/kafka/current at the workspace's root, where tools/deps/up puts them).
const EnvHome = "MSGX_TEST_KAFKA_HOME"

// setupTimeout bounds reaching a broker and creating or deleting a test's topics.
const setupTimeout = time.Minute

// Cluster is a Kafka cluster a test publishes to: its bootstrap addresses and an admin client.
type Cluster struct {
	Addrs  []string
	client *kgo.Client
	admin  *kadm.Client
}

var (
	sharedOnce sync.Once
	shared     *Cluster
	sharedErr  error
	stamp      = time.Now().Unix()
	seq        atomic.Int64
)

// Shared returns the local broker (EnvBrokers), and fails the test naming the command that starts
// it when it does not answer. The client is the process's, closed when the process ends.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	setting := cmp.Or(os.Getenv(EnvBrokers), DefaultBrokers)
	sharedOnce.Do(func() {
		addrs := strings.Split(setting, ",")
		for i := range addrs {
			addrs[i] = strings.TrimSpace(addrs[i])
		}
		shared, sharedErr = connect(addrs)
		if sharedErr == nil {
			fmt.Fprintf(os.Stderr, "kafkatest: shared broker %s: %s\n", strings.Join(addrs, ","), shared.describe())
		}
	})
	if sharedErr != nil {
		t.Fatalf("kafkatest: no Kafka broker answers at %s (%v); make deps (tools/deps/up) starts one, or set %s",
			setting, sharedErr, EnvBrokers)
	}
	return shared
}

// Main wraps a test package's testing.M (func TestMain(m *testing.M)): its Run runs the tests
// and then closes the shared broker's client, which otherwise lives until the process exits,
// so that a check for leaked goroutines after the tests (leaktest.VerifyTestMain) finds none
// of the kit's.
func Main(m interface{ Run() int }) interface{ Run() int } { return mainRun{m} }

type mainRun struct{ m interface{ Run() int } }

func (r mainRun) Run() int {
	code := r.m.Run()
	if shared != nil {
		shared.admin.Close()
	}
	return code
}

// connect opens an admin client on addrs and waits until the cluster answers a metadata request.
func connect(addrs []string) (*Cluster, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	c := &Cluster{Addrs: addrs, client: cl, admin: kadm.NewClient(cl)}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for {
		_, err := c.admin.BrokerMetadata(ctx)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			cl.Close()
			return nil, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// describe is the cluster's finalized metadata.version (the feature level that names the
// release, 4.3-IV0 for Kafka 4.3) and its brokers, for the test log.
func (c *Cluster) describe() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var parts []string
	if r, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, c.client); err == nil {
		for _, f := range r.FinalizedFeatures {
			if f.Name == "metadata.version" {
				parts = append(parts, fmt.Sprintf("metadata.version level %d", f.MaxVersionLevel))
			}
		}
	}
	if m, err := c.admin.BrokerMetadata(ctx); err == nil {
		parts = append(parts, fmt.Sprintf("%d broker(s), controller %d", len(m.Brokers), m.Controller))
	}
	if v := Version(); v != "" {
		parts = append(parts, "pinned release "+v)
	}
	return strings.Join(parts, ", ")
}

// Admin is the cluster's admin client, for a test that inspects or changes topics itself.
func (c *Cluster) Admin() *kadm.Client { return c.admin }

// Name returns a name of the test's own for a topic, a transactional id or a group: base, then
// the process start, the process id and a number, so that concurrent test processes on the
// shared broker never meet.
func Name(base string) string {
	return fmt.Sprintf("%s.%d.%d.%d", base, stamp, os.Getpid(), seq.Add(1))
}

// Topic creates a topic of the test's own, named Name(base), with partitions partitions and the
// given topic configs (nil for the broker's defaults), waits until every partition has a
// leader, and deletes it when the test ends. It returns the name.
func (c *Cluster) Topic(t testing.TB, base string, partitions int32, configs map[string]string) string {
	t.Helper()
	name := Name(base)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := CreateTopic(ctx, c.admin, name, partitions, configs); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := DeleteTopic(ctx, c.admin, name); err != nil {
			t.Errorf("kafkatest: %v", err)
		}
	})
	return name
}

// CreateTopic creates the topic with partitions partitions and the given topic configs (nil for
// the broker's defaults), and waits until every partition has a leader the brokers agree on:
// the first produce to a topic just created can otherwise meet UNKNOWN_TOPIC_OR_PARTITION. For
// whoever creates topics on a broker: a test, a test recreating a topic it deleted, make demo.
func CreateTopic(ctx context.Context, admin *kadm.Client, name string, partitions int32, configs map[string]string) error {
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := admin.CreateTopic(ctx, partitions, -1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	for {
		m, err := admin.Metadata(ctx, name)
		if err == nil && led(m.Topics[name], partitions) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s has no leader for every partition: %w", name, cmp.Or(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// led reports whether each of the topic's partitions partitions has a leader.
func led(td kadm.TopicDetail, partitions int32) bool {
	if td.Err != nil || int32(len(td.Partitions)) != partitions {
		return false
	}
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// DeleteTopic deletes the topic and waits until the brokers no longer know it: they delete in
// the background, and until they are done the name is taken (a create meets
// TOPIC_ALREADY_EXISTS). A topic already gone is no error.
func DeleteTopic(ctx context.Context, admin *kadm.Client, name string) error {
	resp, err := admin.DeleteTopic(ctx, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	for {
		m, err := admin.Metadata(ctx, name)
		if err == nil && errors.Is(m.Topics[name].Err, kerr.UnknownTopicOrPartition) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s still known after its deletion: %w", name, cmp.Or(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Home is the pinned release's folder (EnvHome, else .cache/kafka/current at the root of the
// workspace this test runs in), or "" when neither exists.
func Home() string {
	if h := os.Getenv(EnvHome); h != "" {
		return h
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			h := filepath.Join(dir, ".cache", "kafka", "current")
			if _, err := os.Stat(h); err == nil {
				return h
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Version is the pinned release's version (the name of Home's folder), or "".
func Version() string {
	h := Home()
	if h == "" {
		return ""
	}
	if r, err := filepath.EvalSymlinks(h); err == nil {
		h = r
	}
	return filepath.Base(h)
}
