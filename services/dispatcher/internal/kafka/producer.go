// Package kafka publishes outbox records with sarama under the producer contract of seed 004
// §3.3 (DECISIONS 10): acks=all, idempotence on, one request in flight per connection, and no
// fallback to a non-idempotent producer.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
)

// Producer is a synchronous idempotent producer.
type Producer struct {
	producer sarama.SyncProducer
}

// Config returns the sarama configuration of the producer contract.
func Config(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.V2_8_0_0
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Retry.Max = 3
	c.Producer.Retry.Backoff = 250 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Timeout = 10 * time.Second
	// Every broker call is bounded, so a send never blocks the dispatcher forever.
	c.Net.DialTimeout = 5 * time.Second
	c.Net.ReadTimeout = 15 * time.Second
	c.Net.WriteTimeout = 15 * time.Second
	c.Metadata.Retry.Max = 3
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	c.Metadata.Timeout = 15 * time.Second
	return c
}

// New connects to the brokers. It fails when they do not support idempotent production: the
// producer's InitProducerID happens here, and there is no fallback.
func New(brokers []string, clientID string) (*Producer, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka: no brokers configured (MSGX_KAFKA_BROKERS)")
	}
	p, err := sarama.NewSyncProducer(brokers, Config(clientID))
	if err != nil {
		return nil, fmt.Errorf("kafka idempotent producer on %v: %w", brokers, err)
	}
	return &Producer{producer: p}, nil
}

// Publish sends the records and returns one error per record (nil = acknowledged by all
// in-sync replicas).
func (p *Producer) Publish(_ context.Context, records []delivery.Record) []error {
	errs := make([]error, len(records))
	if len(records) == 0 {
		return errs
	}
	msgs := make([]*sarama.ProducerMessage, len(records))
	for i, r := range records {
		m := &sarama.ProducerMessage{Topic: r.Topic, Key: sarama.StringEncoder(r.Key), Metadata: i}
		if r.Value != nil {
			m.Value = sarama.ByteEncoder(r.Value)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
		}
		msgs[i] = m
	}
	err := p.producer.SendMessages(msgs)
	var perr sarama.ProducerErrors
	switch {
	case err == nil:
	case errors.As(err, &perr):
		for _, e := range perr {
			errs[e.Msg.Metadata.(int)] = e.Err
		}
	default:
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// Close flushes and closes the producer.
func (p *Producer) Close() error { return p.producer.Close() }
