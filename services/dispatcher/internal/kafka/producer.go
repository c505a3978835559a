// Package kafka publishes outbox records with sarama under the producer contract of seed 004
// §3.3 (DECISIONS 10): acks=all, idempotence on, one request in flight per connection, and no
// fallback to a non-idempotent producer.
//
// sarama v1.61.1 is pinned because it carries both fixes of its retry-reordering bugs (issues
// #2619 and #2860): the per-partition muter of PR #3422 (async_producer.go partitionMuter) and
// PR #3644, which keeps a partition muted while a batch failed on a broken connection is retried
// (brokerProducer.handleError calls retryBatch with alreadyMuted).
package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// ErrNoAnswer is the outcome of a record the broker did not acknowledge or refuse within the
// caller's deadline. The record may still be written later (sarama keeps retrying it), so the
// caller must treat it as failed and send it again: at least once.
var ErrNoAnswer = errors.New("kafka: no answer before the send deadline")

// ErrBusy is the outcome of records that were not handed to sarama because records of an
// earlier call were still unanswered when the caller's deadline passed.
var ErrBusy = errors.New("kafka: earlier records still unanswered; not sent")

// Record is one message for the broker. A nil Value is a null value (a tombstone).
type Record struct {
	Topic   string
	Key     string
	Value   []byte
	Headers [][2]string
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
	// Every broker call is bounded, so sarama resolves every record in bounded time even when
	// the broker is gone; the dispatcher's send deadline bounds its own wait on top.
	c.Net.DialTimeout = 5 * time.Second
	c.Net.ReadTimeout = 15 * time.Second
	c.Net.WriteTimeout = 15 * time.Second
	c.Metadata.Retry.Max = 3
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	c.Metadata.Timeout = 15 * time.Second
	return c
}

// Producer is an idempotent producer with per-record outcomes and bounded waits.
//
// It admits records of a new Publish only once every record of earlier calls has its answer
// from sarama. A record given up on by an earlier call (ErrNoAnswer) may still be retried by
// sarama; if the next call could overtake it, a FLID's newer event could land before a late
// copy of an older one. With the gate, late copies can only duplicate, never reorder.
type Producer struct {
	ap sarama.AsyncProducer

	mu         sync.Mutex
	unanswered int
	idle       chan struct{} // closed while unanswered == 0
	collectors sync.WaitGroup
}

type ticket struct{ done chan error }

// New connects to the brokers. It fails when they do not support idempotent production:
// sarama obtains the producer id (InitProducerID) here, and there is no fallback.
func New(brokers []string, clientID string) (*Producer, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka: no brokers configured (MSGX_KAFKA_BROKERS)")
	}
	return NewWithConfig(brokers, Config(clientID))
}

// NewWithConfig is New with a given sarama configuration; it refuses one that breaks the
// producer contract.
func NewWithConfig(brokers []string, cfg *sarama.Config) (*Producer, error) {
	if err := checkContract(cfg); err != nil {
		return nil, err
	}
	ap, err := sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka idempotent producer on %v: %w", brokers, err)
	}
	p := &Producer{ap: ap, idle: make(chan struct{})}
	close(p.idle)
	p.collectors.Add(2)
	go func() {
		defer p.collectors.Done()
		for m := range ap.Successes() {
			p.answer(m, nil)
		}
	}()
	go func() {
		defer p.collectors.Done()
		for e := range ap.Errors() {
			p.answer(e.Msg, e.Err)
		}
	}()
	return p, nil
}

func checkContract(c *sarama.Config) error {
	switch {
	case !c.Producer.Idempotent:
		return errors.New("kafka: the producer must be idempotent")
	case c.Producer.RequiredAcks != sarama.WaitForAll:
		return errors.New("kafka: the producer must wait for all in-sync replicas")
	case c.Net.MaxOpenRequests != 1:
		return errors.New("kafka: the producer must keep one request in flight per connection")
	case c.Producer.Retry.Max < 1:
		return errors.New("kafka: the producer must retry at least once")
	case !c.Version.IsAtLeast(sarama.V2_8_0_0):
		return fmt.Errorf("kafka: protocol version %s is below 2.8", c.Version)
	case !c.Producer.Return.Successes || !c.Producer.Return.Errors:
		return errors.New("kafka: the producer must return successes and errors")
	}
	return nil
}

func (p *Producer) answer(m *sarama.ProducerMessage, err error) {
	t := m.Metadata.(*ticket)
	t.done <- err // buffered: never blocks, even when the caller has given up
	p.mu.Lock()
	p.unanswered--
	if p.unanswered == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
}

func (p *Producer) idleC() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle
}

// Publish sends the records and returns one error per record: nil = acknowledged by all
// in-sync replicas; ErrNoAnswer or ErrBusy when ctx ended first. Records of one call may go to
// any partition in any order relative to each other: the caller puts at most one record per
// ordering key in a call.
func (p *Producer) Publish(ctx context.Context, records []Record) []error {
	errs := make([]error, len(records))
	if len(records) == 0 {
		return errs
	}
	select {
	case <-p.idleC():
	case <-ctx.Done():
		for i := range errs {
			errs[i] = fmt.Errorf("%w: %w", ErrBusy, context.Cause(ctx))
		}
		return errs
	}
	tickets := make([]*ticket, 0, len(records))
enqueue:
	for i, r := range records {
		t := &ticket{done: make(chan error, 1)}
		m := &sarama.ProducerMessage{Topic: r.Topic, Key: sarama.StringEncoder(r.Key), Metadata: t}
		if r.Value != nil {
			m.Value = sarama.ByteEncoder(r.Value)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
		}
		p.mu.Lock()
		if p.unanswered == 0 {
			p.idle = make(chan struct{})
		}
		p.unanswered++
		p.mu.Unlock()
		select {
		case p.ap.Input() <- m:
			tickets = append(tickets, t)
		case <-ctx.Done():
			p.mu.Lock()
			p.unanswered--
			if p.unanswered == 0 {
				close(p.idle)
			}
			p.mu.Unlock()
			for j := i; j < len(records); j++ {
				errs[j] = fmt.Errorf("%w: %w", ErrBusy, context.Cause(ctx))
			}
			break enqueue
		}
	}
	for i, t := range tickets {
		select {
		case err := <-t.done:
			errs[i] = err
		case <-ctx.Done():
			errs[i] = fmt.Errorf("%w: %w", ErrNoAnswer, context.Cause(ctx))
		}
	}
	return errs
}

// Drain waits until every record handed to sarama has its answer, or ctx ends. The dispatcher
// calls it before giving up its term, so that records it gave up on cannot land after the next
// holder's.
func (p *Producer) Drain(ctx context.Context) error {
	select {
	case <-p.idleC():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kafka: records still unanswered: %w", context.Cause(ctx))
	}
}

// Close flushes and closes the producer; sarama answers every record still in flight first.
func (p *Producer) Close() error {
	err := p.ap.Close()
	p.collectors.Wait()
	return err
}
