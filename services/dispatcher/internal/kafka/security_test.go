package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
)

// Every secured mode of docs/dispatcher.md ("Secured connections") against the real broker,
// each on the listener configured for it: the idempotent probe producer is obtained (New), a
// transaction commits, a read_committed reader of the same security reads it back, and the
// readiness probe answers. Every refusal that waiting cannot cure is a start-up refusal
// (kafka.Refused) naming the settings, never an outage.
func TestSecuredConnections(t *testing.T) {
	t.Parallel()
	b := kafkatest.OwnSecured(t, nil)
	sasl := func(mechanism string) func(k *config.Kafka) {
		return func(k *config.Kafka) {
			k.SASL = config.KafkaSASL{Mechanism: mechanism, Username: b.User, Password: b.Password}
		}
	}
	works := []struct {
		name string
		addr string
		k    config.Kafka
	}{
		{"TLS", b.TLS.Addr(), tlsK(b.CA, nil)},
		{"TLS, server name given", b.TLS.Addr(), tlsK(b.CA, func(k *config.Kafka) { k.TLS.ServerName = b.ServerName })},
		{"mutual TLS", b.MTLS.Addr(), tlsK(b.CA, func(k *config.Kafka) { k.TLS.Cert, k.TLS.Key = b.ClientCert, b.ClientKey })},
		{"SASL/PLAIN over TLS", b.SASL.Addr(), tlsK(b.CA, sasl("PLAIN"))},
		{"SASL/SCRAM-SHA-256 over TLS", b.SASL.Addr(), tlsK(b.CA, sasl("SCRAM-SHA-256"))},
		{"SASL/SCRAM-SHA-512 over TLS", b.SASL.Addr(), tlsK(b.CA, sasl("SCRAM-SHA-512"))},
	}
	topic := b.Topic(t, "msgx.secured", 1, nil)
	for i, m := range works {
		t.Run(m.name, func(t *testing.T) {
			sec, err := kafka.NewSecurity(m.k)
			if err != nil {
				t.Fatal(err)
			}
			if sec.Plaintext() {
				t.Fatal("a TLS mode reads as plaintext")
			}
			if s := sec.String(); strings.Contains(s, b.Password) {
				t.Errorf("Security.String() shows the password: %q", s)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := kafka.Answers(ctx, []string{m.addr}, "test", sec); err != nil {
				t.Fatalf("readiness probe: %v", err)
			}
			p, err := kafka.New([]string{m.addr}, "test", kafkatest.Name("msgx-secured"), m.k.MaxMessageBytes, sec)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { _ = p.Close(30 * time.Second) })
			fence(t, p, topic)
			value := m.name
			if errs := publish(t, p, time.Minute, kafka.Record{Topic: topic, Key: "k", Value: []byte(value)}); errs[0] != nil {
				t.Fatalf("publish: %v", errs[0])
			}
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(m.addr), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted())}, sec.KgoOpts()...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var got []string
			for len(got) <= i && ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			if len(got) <= i || got[i] != value {
				t.Errorf("read back %q, want %q at offset %d", got, value, i)
			}
		})
	}

	// What waiting cannot cure is refused at start-up, naming the settings to look at.
	refusals := []struct {
		name    string
		addr    string
		k       config.Kafka
		setting string
	}{
		{"a CA that did not sign the broker's certificate", b.TLS.Addr(), tlsK(b.OtherCA, nil), "MSGX_KAFKA_TLS_CA"},
		{"a server name the certificate lacks", b.TLS.Addr(), tlsK(b.CA, func(k *config.Kafka) { k.TLS.ServerName = "other.test" }), "MSGX_KAFKA_TLS_SERVER_NAME"},
		{"no client certificate where one is required", b.MTLS.Addr(), tlsK(b.CA, nil), "MSGX_KAFKA_TLS_CERT"},
		{"a wrong SCRAM password", b.SASL.Addr(), tlsK(b.CA, func(k *config.Kafka) {
			k.SASL = config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: b.User, Password: "wrong-" + b.Password}
		}), "MSGX_KAFKA_SASL_PASSWORD"},
		{"a wrong PLAIN password", b.SASL.Addr(), tlsK(b.CA, func(k *config.Kafka) {
			k.SASL = config.KafkaSASL{Mechanism: "PLAIN", Username: b.User, Password: "wrong-" + b.Password}
		}), "MSGX_KAFKA_SASL_PASSWORD"},
	}
	for _, r := range refusals {
		t.Run("refused: "+r.name, func(t *testing.T) {
			sec, err := kafka.NewSecurity(r.k)
			if err != nil {
				t.Fatal(err)
			}
			_, err = kafka.New([]string{r.addr}, "test", kafkatest.Name("msgx-refused"), r.k.MaxMessageBytes, sec)
			if err == nil {
				t.Fatal("New succeeded")
			}
			if !kafka.Refused(err) {
				t.Errorf("Refused(%v) = false: it would be waited out as an outage", err)
			}
			if !strings.Contains(err.Error(), r.setting) {
				t.Errorf("the error does not name %s: %v", r.setting, err)
			}
			if strings.Contains(err.Error(), b.Password) {
				t.Errorf("the error shows the password: %v", err)
			}
			t.Logf("refused: %v", err)
		})
	}

	// An unreachable broker is an outage, whatever the security: not refused. So is a listener
	// that closes the connection without a word, as a plaintext listener does to a TLS client
	// (and a TLS listener to a plaintext one): nothing tells it from a broker going down, which
	// is why the dispatcher warns at start-up when it connects without TLS.
	t.Run("unreachable is an outage", func(t *testing.T) {
		sec, err := kafka.NewSecurity(tlsK(b.CA, nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, addr := range []string{"127.0.0.1:1", b.Addr()} {
			_, err = kafka.New([]string{addr}, "test", kafkatest.Name("msgx-down"), config.Default().Kafka.MaxMessageBytes, sec)
			if err == nil || kafka.Refused(err) {
				t.Errorf("New over TLS to %s = %v; want an error that is not a refusal", addr, err)
			}
		}
	})
}

// tlsK is the default Kafka settings with TLS on, verifying against the CA file ca.
func tlsK(ca string, set func(k *config.Kafka)) config.Kafka {
	k := config.Default().Kafka
	k.TLS.Enabled, k.TLS.CA = true, ca
	if set != nil {
		set(&k)
	}
	return k
}

// NewSecurity's errors name the setting whose file is wrong.
func TestNewSecurityNamesTheSetting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		set  func(k *config.Kafka)
		want string
	}{
		{func(k *config.Kafka) { k.TLS.CA = dir + "/missing.pem" }, "MSGX_KAFKA_TLS_CA"},
		{func(k *config.Kafka) { k.TLS.CA = "/dev/null" }, "MSGX_KAFKA_TLS_CA"},
		{func(k *config.Kafka) { k.TLS.Cert, k.TLS.Key = dir+"/c.pem", dir+"/k.pem" }, "MSGX_KAFKA_TLS_CERT"},
	} {
		k := config.Default().Kafka
		k.TLS.Enabled = true
		c.set(&k)
		if _, err := kafka.NewSecurity(k); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewSecurity = %v, want an error naming %s", err, c.want)
		}
	}
}
