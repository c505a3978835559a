package kafka_test

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
)

// Refused tells the refusals that stop the dispatcher from the outages it waits out
// (R-START-1): a broker that answers and refuses the producer contract, or a configuration
// sarama refuses, against everything that only says the brokers do not answer (yet).
func TestRefused(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"IdempotentWrite refused", fmt.Errorf("kafka idempotent producer: %w", sarama.ErrClusterAuthorizationFailed), true},
		{"no InitProducerID", fmt.Errorf("kafka idempotent producer: %w", sarama.ErrUnsupportedVersion), true},
		{"SASL refused", sarama.ErrSASLAuthenticationFailed, true},
		{"configuration", sarama.ConfigurationError("Net.SASL.User must not be empty when SASL is enabled"), true},
		{"no broker answers", fmt.Errorf("kafka idempotent producer: %w: %w", sarama.ErrOutOfBrokers, refused), false},
		{"connection refused", refused, false},
		{"coordinator starting", sarama.ErrConsumerCoordinatorNotAvailable, false},
		{"coordinator loading", sarama.ErrOffsetsLoadInProgress, false},
		{"timeout", context.DeadlineExceeded, false},
	} {
		if got := kafka.Refused(c.err); got != c.want {
			t.Errorf("%s: Refused(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	// What New really returns when nothing listens is an outage.
	p, err := kafka.New([]string{"127.0.0.1:1"}, "test", config.Default().Kafka.TransactionalID, config.Default().Kafka.MaxMessageBytes, kafka.Security{})
	if err == nil {
		_ = p.Close(time.Second)
		t.Fatal("New succeeded with no broker listening")
	}
	if kafka.Refused(err) {
		t.Errorf("no broker listening is a refusal: %v", err)
	}
}

// Answers fails, within its context, when no broker of the list answers.
func TestAnswersWithoutBroker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := kafka.Answers(ctx, []string{"127.0.0.1:1", "127.0.0.1:2"}, "test", kafka.Security{})
	if err == nil {
		t.Fatal("Answers = nil with no broker listening")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Answers took %s, past its context", d)
	}
	if err := kafka.Answers(ctx, nil, "test", kafka.Security{}); err == nil {
		t.Error("Answers with no brokers = nil")
	}
}
