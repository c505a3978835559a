package kafka_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
)

const topic = "msgx.flight.msg"

func cluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

// TestStartupFailsWithoutIdempotence: there is no fallback to a non-idempotent producer. A
// broker that does not offer InitProducerID (older than 0.11) or refuses it (no
// IdempotentWrite permission) makes New fail.
func TestStartupFailsWithoutIdempotence(t *testing.T) {
	t.Parallel()
	t.Run("InitProducerID not offered", func(t *testing.T) {
		t.Parallel()
		v := kversion.V2_8_0()
		v.SetMaxKeyVersion(int16(kmsg.InitProducerID), -1)
		_, addr := cluster(t, kfake.MaxVersions(v))
		if p, err := kafka.New([]string{addr}, "test"); err == nil {
			_ = p.Close()
			t.Fatal("producer started against a broker without InitProducerID")
		}
	})
	t.Run("InitProducerID refused", func(t *testing.T) {
		t.Parallel()
		c, addr := cluster(t)
		c.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			resp := req.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			resp.ProducerID, resp.ProducerEpoch = -1, -1
			return resp, nil, true
		})
		if p, err := kafka.New([]string{addr}, "test"); err == nil {
			_ = p.Close()
			t.Fatal("producer started although the broker refused InitProducerID")
		}
	})
	t.Run("idempotence available", func(t *testing.T) {
		t.Parallel()
		_, addr := cluster(t)
		p, err := kafka.New([]string{addr}, "test")
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Close()
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
		c := kafka.Config("test")
		breakIt(c)
		if p, err := kafka.NewWithConfig([]string{"127.0.0.1:1"}, c); err == nil {
			_ = p.Close()
			t.Errorf("%s: accepted", name)
		}
	}
	c := kafka.Config("test")
	if !c.Producer.Idempotent || c.Producer.RequiredAcks != sarama.WaitForAll || c.Net.MaxOpenRequests != 1 ||
		c.Producer.Retry.Max < 1 || !c.Version.IsAtLeast(sarama.V2_8_0_0) {
		t.Fatalf("Config breaks the contract: %+v", c.Producer)
	}
}

// TestPublishBoundedAndGated: a send the broker does not answer ends at the caller's deadline
// (ErrNoAnswer); while that record is still with sarama, the next call admits nothing
// (ErrBusy), so it cannot overtake it. Once the broker answers, Drain returns and sends go on;
// the record given up on lands once, before the later ones.
func TestPublishBoundedAndGated(t *testing.T) {
	t.Parallel()
	c, addr := cluster(t)
	p, err := kafka.New([]string{addr}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	release := make(chan struct{})
	held := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() {
			close(held)
			c.SleepControl(func() { <-release })
		})
		return nil, nil, false
	})
	rec := func(i int) kafka.Record {
		return kafka.Record{Topic: topic, Key: "F1", Value: []byte(strconv.Itoa(i))}
	}
	publish := func(d time.Duration, rs ...kafka.Record) []error {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		return p.Publish(ctx, rs)
	}
	if errs := publish(time.Second, rec(1)); !errors.Is(errs[0], kafka.ErrNoAnswer) {
		t.Fatalf("held send: %v, want ErrNoAnswer", errs[0])
	}
	<-held
	if errs := publish(500*time.Millisecond, rec(2)); !errors.Is(errs[0], kafka.ErrBusy) {
		t.Fatalf("send behind an unanswered record: %v, want ErrBusy", errs[0])
	}
	close(release)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if errs := publish(time.Minute, rec(2), rec(3)); errs[0] != nil || errs[1] != nil {
		t.Fatalf("send after the drain: %v", errs)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 3 || got[0] != "1" || got[1] != "2" || got[2] != "3" {
		t.Fatalf("topic holds %q, want 1, 2, 3", got)
	}
}
