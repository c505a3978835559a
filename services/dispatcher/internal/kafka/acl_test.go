package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
)

// dispatcherACLs are the ACLs docs/dispatcher.md ("Kafka prerequisites") lists for the
// dispatcher's principal, for the transactional id prefix txnID and the topics.
func dispatcherACLs(txnID string, topics ...string) map[string]*kadm.ACLBuilder {
	return map[string]*kadm.ACLBuilder{
		"Write on the transactional ids": kadm.NewACLs().TransactionalIDs(txnID).
			ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite),
		"Write on the topics": kadm.NewACLs().Topics(topics...).Operations(kadm.OpWrite),
	}
}

// With authorization on (StandardAuthorizer), the documented ACLs are all the producer needs: a
// probe producer, a fence and a committed transaction. Neither IdempotentWrite on the cluster
// nor Describe is needed: Write on a topic allows an idempotent producer since Kafka 3.0, and
// Write implies Describe (granting either alone was tried: the producer then works without it,
// which fails this test). Without any one of them the brokers refuse this client,
// which is VerdictConfig: a start-up refusal (Refused), and in delivery an outage of
// configuration, never the record's fault (docs/dispatcher.md, "Broker errors").
func TestDocumentedACLsAreEnough(t *testing.T) {
	t.Parallel()
	b := kafkatest.OwnSecured(t, kafkatest.Authorizer)
	topic := b.Topic(t, "msgx.acl", 1, nil)
	txnID := kafkatest.Name("msgx-dispatcher")
	k := tlsK(b.CA, func(k *config.Kafka) {
		k.SASL = config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: b.User, Password: b.Password}
	})
	sec, err := kafka.NewSecurity(k)
	if err != nil {
		t.Fatal(err)
	}
	acls := dispatcherACLs(txnID, topic)
	for _, a := range acls {
		b.Grant(t, a)
	}
	try := func() error {
		p, err := kafka.New([]string{b.SASL.Addr()}, "test", txnID, k.MaxMessageBytes, sec)
		if err != nil {
			return err
		}
		defer func() { _ = p.Close(10 * time.Second) }()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := p.Fence(ctx, topic); err != nil {
			return err
		}
		return p.Publish(ctx, []kafka.Record{{Topic: topic, Key: "k", Value: []byte("v")}})[0]
	}
	if err := try(); err != nil {
		t.Fatalf("with the documented ACLs: %v", err)
	}
	for name, a := range acls {
		t.Run("without "+name, func(t *testing.T) {
			b.Revoke(t, a)
			defer b.Grant(t, a)
			err := try()
			if err == nil {
				t.Fatal("the producer works without it: the ACL is not needed")
			}
			if kafka.Classify(err) != kafka.VerdictConfig || !kafka.Refused(err) {
				t.Errorf("%v: verdict %v, refused %v; want the configuration's", err, kafka.Classify(err), kafka.Refused(err))
			}
			t.Logf("without %s: %v", name, err)
		})
	}
}
