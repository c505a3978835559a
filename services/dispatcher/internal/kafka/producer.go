// Package kafka publishes outbox records with sarama under the producer contract
// (R-OUTBOX-6): acks=all, idempotence on, one request in flight per connection, and no
// fallback to a non-idempotent producer. On top of the contract every send is one Kafka
// transaction of a transactional id shared by all dispatcher instances, so that each term
// fences the previous holder's records at the broker (docs/dispatcher.md).
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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// ErrNoAnswer is the outcome of a record the broker did not acknowledge or refuse within the
// caller's deadline. Its transaction is abandoned and aborted by the next fence, so it never
// becomes visible to read_committed consumers; the caller sends it again (at least once).
var ErrNoAnswer = errors.New("kafka: no answer before the send deadline")

// ErrAborted is the outcome of a record whose transaction was aborted for a reason that is not
// the record's own: another record of the transaction failed or got no answer, the producer was
// fenced, or the caller's context ended before the record was handed over. The record is not
// visible to read_committed consumers and was not attempted on its own account.
var ErrAborted = errors.New("kafka: transaction aborted; record not attempted on its own account")

// ErrCommit is the outcome of every record of a transaction whose records were all acknowledged
// but whose commit failed or got no answer within commitTimeout. It is the transaction's failure,
// not any record's; the records may have been committed after all (the caller sends them again:
// at least once).
var ErrCommit = errors.New("kafka: commit failed after every record was acknowledged")

// ErrFenceBusy is returned by Fence while an earlier fence of the topic in this process is still
// running inside sarama: a new one would race it, and whichever finished last would fence the
// other's producer.
var ErrFenceBusy = errors.New("kafka: an earlier fence of the topic is still running")

// commitTimeout bounds a commit once every record was acknowledged: it only sends EndTxn, and it
// runs on its own bound rather than on what is left of the send deadline.
const commitTimeout = 5 * time.Second

// ErrRecordTooLarge is the outcome of a record that does not fit in a record batch of the
// brokers' message.max.bytes: the broker would refuse it every time, so it is never handed to
// sarama (where its refusal would also fail the transaction of every record sent with it).
var ErrRecordTooLarge = errors.New("kafka: record larger than the brokers accept")

// Kafka counts a record batch's size with the 12-byte log overhead (offset and length) in front
// of the 49 bytes of the v2 batch header that sarama counts (Kafka's LOG_OVERHEAD and
// RECORD_BATCH_OVERHEAD).
const (
	logOverhead         = 12
	recordBatchOverhead = logOverhead + 49
)

// ErrShared marks a record the broker refused for its size (MESSAGE_TOO_LARGE) while other
// records of its transaction went to the same partition: the broker measures the batch, so the
// refusal may be their sum's. It is the record's own failure (charged), not a refusal.
var ErrShared = errors.New("kafka: refused along with the records of its batch")

// ErrNotFenced is returned for every record of a Publish that found no producer of this term
// for the topic: Fence must run first.
var ErrNotFenced = errors.New("kafka: no fenced producer for the topic in this term")

// Record is one message for the broker. A nil Value is a null value (a tombstone).
type Record struct {
	Topic   string
	Key     string
	Value   []byte
	Headers [][2]string
}

// protocolVersion is the Kafka protocol version the dispatcher's clients speak: the producer and
// the readiness probe (Answers). sarama speaks the request versions of its configured Version
// without negotiating them, so it is the oldest release the dispatcher supports, 3.9
// (docs/dispatcher.md, "Kafka versions"): every newer broker serves what 3.9 does, while Kafka 4
// refuses the versions below 2.1 (KIP-896). make test runs the contract tests against both
// ends of the range.
var protocolVersion = sarama.V3_9_0_0

// Config returns the sarama configuration of the producer contract. The network bounds are
// short so that a fence, which runs while the role's lock connection waits, ends well inside
// the lock connection's idle timeout. maxMessageBytes is the brokers' message.max.bytes
// (kafka.max-message-bytes, at least config.MinKafkaMaxMessageBytes): sarama's own batch bound is set from it, so that
// no batch it builds of records that fit one by one is larger than the broker accepts.
func Config(clientID string, maxMessageBytes int) *sarama.Config {
	c := sarama.NewConfig()
	// sarama counts a batch without the log overhead.
	c.Producer.MaxMessageBytes = maxMessageBytes - logOverhead
	c.ClientID = clientID
	c.Version = protocolVersion
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Retry.Max = 3
	c.Producer.Retry.Backoff = 250 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Timeout = 10 * time.Second
	// A transaction left open by a crashed holder holds back read_committed consumers until the
	// next holder's fence aborts it, or this timeout.
	c.Producer.Transaction.Timeout = time.Minute
	// sarama's InitProducerID (a fence) takes no context: its retries are kept few so that an
	// abandoned fence ends soon after the caller's fence timeout; Fence refuses to start another
	// for the topic until it has (ErrFenceBusy).
	c.Producer.Transaction.Retry.Max = 5
	c.Producer.Transaction.Retry.Backoff = 200 * time.Millisecond
	c.Net.DialTimeout = 2 * time.Second
	c.Net.ReadTimeout = 15 * time.Second
	c.Net.WriteTimeout = 15 * time.Second
	c.Metadata.Retry.Max = 3
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	c.Metadata.Timeout = 15 * time.Second
	return c
}

// Producer publishes each call as one Kafka transaction. It keeps one transactional sarama
// producer per topic, created by Fence (InitProducerID with the shared transactional id, which
// bumps the epoch: every record of an earlier producer of that id that was not committed by
// then is aborted or refused by the broker). A failed transaction is not aborted in place: the
// producer is dropped and the next Fence aborts it at the coordinator, which also covers
// records sarama may still be retrying.
type Producer struct {
	brokers []string
	cfg     *sarama.Config
	txnID   string
	// maxBatch is the brokers' message.max.bytes, from cfg.Producer.MaxMessageBytes.
	maxBatch int

	mu        sync.Mutex
	sessions  map[string]*session
	fencing   map[string]chan struct{} // per topic: closed when its latest fence left sarama
	abandoned sync.WaitGroup
}

// session is one transactional sarama producer, for one topic and one term.
type session struct {
	ap         sarama.AsyncProducer
	collectors sync.WaitGroup
	mu         sync.Mutex    // one transaction at a time
	answers    atomic.Uint64 // numbers the answers in the order they arrive
}

// ticket is one record's answer: its error, its partition and when it arrived. partition is
// set by the partitioner as soon as sarama picked it (+1; 0 = not yet), so a record without an
// answer still names its partition.
type ticket struct {
	done      chan answer
	partition atomic.Int32
}

// partitioner is sarama's default hash partitioner (the FLID picks the partition) that also
// notes the choice on the record's ticket.
type partitioner struct{ sarama.Partitioner }

func (p partitioner) Partition(m *sarama.ProducerMessage, n int32) (int32, error) {
	part, err := p.Partitioner.Partition(m, n)
	if t, ok := m.Metadata.(*ticket); ok && err == nil {
		t.partition.Store(part + 1)
	}
	return part, err
}

type answer struct {
	err       error
	partition int32
	seq       uint64
}

// New checks that the brokers serve an idempotent producer (sarama obtains a producer id, without
// a transactional id, and the probe is closed again): start-up fails without it, there is no
// fallback. The transactional producers are made per term by Fence, never here, so a standby
// starting up does not fence the active instance. txnID is the transactional id prefix, the same
// for every instance (kafka.transactional-id): the topic is appended, so each lane (one topic
// each) has its own id and its own single transaction at a time; maxMessageBytes is the brokers'
// message.max.bytes (Config); sec secures every connection.
func New(brokers []string, clientID, txnID string, maxMessageBytes int, sec Security) (*Producer, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka: no brokers configured (MSGX_KAFKA_BROKERS)")
	}
	cfg := Config(clientID, maxMessageBytes)
	sec.apply(cfg)
	return NewWithConfig(brokers, cfg, txnID)
}

// NewWithConfig is New with a given sarama configuration; it refuses one that breaks the
// producer contract.
func NewWithConfig(brokers []string, cfg *sarama.Config, txnID string) (*Producer, error) {
	if err := checkContract(cfg); err != nil {
		return nil, err
	}
	if txnID == "" {
		return nil, errors.New("kafka: the transactional id must not be empty")
	}
	probe, err := newAsyncProducer(brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka idempotent producer on %v: %w", brokers, withSetting(err))
	}
	_ = probe.Close()
	return &Producer{brokers: brokers, cfg: cfg, txnID: txnID, maxBatch: cfg.Producer.MaxMessageBytes + logOverhead,
		sessions: map[string]*session{}, fencing: map[string]chan struct{}{}}, nil
}

// newAsyncProducer is sarama.NewAsyncProducer without its leak: when the producer cannot be
// made (InitProducerID refused, a broker without transactions), sarama.NewAsyncProducer leaves
// the client it opened running, with its connections and metadata updater, and a fence retried
// through a Kafka outage would pile them up. Here the client is ours, closed on failure and with
// the producer.
func newAsyncProducer(brokers []string, cfg *sarama.Config) (sarama.AsyncProducer, error) {
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, err
	}
	ap, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return ownedProducer{AsyncProducer: ap, client: client}, nil
}

// ownedProducer closes its client after the producer: NewAsyncProducerFromClient leaves the
// client to its caller.
type ownedProducer struct {
	sarama.AsyncProducer
	client sarama.Client
}

func (o ownedProducer) Close() error {
	err := o.AsyncProducer.Close()
	if cerr := o.client.Close(); cerr != nil && err == nil && !errors.Is(cerr, sarama.ErrClosedClient) {
		err = cerr
	}
	return err
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

// TransactionalID is the transactional id of topic's producer.
func (p *Producer) TransactionalID(topic string) string { return p.txnID + "." + topic }

// Fence makes a new transactional producer for topic (InitProducerID), replacing this process's
// previous one. From then on the broker refuses or aborts every uncommitted record of any earlier
// producer of the same transactional id, in any process. The caller must hold the role while it
// fences and check it still does afterwards (delivery does both on the lock connection): a
// fence after the next holder's would fence that holder. When ctx ends first, the producer
// being made is closed when it is ready and never used, and until sarama has returned it, every
// further Fence of the topic fails with ErrFenceBusy: this process's fences never overlap, so a
// late InitProducerID cannot bump the epoch over this process's own newer producer.
func (p *Producer) Fence(ctx context.Context, topic string) error {
	p.mu.Lock()
	if busy := p.fencing[topic]; busy != nil {
		select {
		case <-busy:
		default:
			p.mu.Unlock()
			return fmt.Errorf("kafka: fence %s: %w", p.TransactionalID(topic), ErrFenceBusy)
		}
	}
	running := make(chan struct{})
	p.fencing[topic] = running
	p.mu.Unlock()
	p.Release(topic)
	cfg := *p.cfg
	cfg.Producer.Transaction.ID = p.TransactionalID(topic)
	hash := cfg.Producer.Partitioner
	cfg.Producer.Partitioner = func(topic string) sarama.Partitioner { return partitioner{hash(topic)} }
	type made struct {
		ap  sarama.AsyncProducer
		err error
	}
	ch := make(chan made, 1)
	p.abandoned.Add(1)
	go func() {
		defer p.abandoned.Done()
		ap, err := newAsyncProducer(p.brokers, &cfg)
		ch <- made{ap, err}
		close(running)
	}()
	var m made
	select {
	case m = <-ch:
	case <-ctx.Done():
		p.abandoned.Add(1)
		go func() {
			defer p.abandoned.Done()
			if m := <-ch; m.err == nil {
				_ = m.ap.Close()
			}
		}()
		return fmt.Errorf("kafka: fence %s: %w", cfg.Producer.Transaction.ID, context.Cause(ctx))
	}
	if m.err != nil {
		return fmt.Errorf("kafka: fence %s: %w", cfg.Producer.Transaction.ID, m.err)
	}
	s := &session{ap: m.ap}
	s.collectors.Add(2)
	go func() {
		defer s.collectors.Done()
		for m := range s.ap.Successes() {
			m.Metadata.(*ticket).done <- answer{partition: m.Partition, seq: s.answers.Add(1)} // buffered: never blocks
		}
	}()
	go func() {
		defer s.collectors.Done()
		for e := range s.ap.Errors() {
			e.Msg.Metadata.(*ticket).done <- answer{err: e.Err, partition: e.Msg.Partition, seq: s.answers.Add(1)}
		}
	}()
	p.mu.Lock()
	p.sessions[topic] = s
	p.mu.Unlock()
	return nil
}

// Fenced reports whether topic has a producer of this term.
func (p *Producer) Fenced(topic string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessions[topic] != nil
}

// Release drops topic's producer (at the end of a term, or after a failed transaction). Its
// uncommitted records are aborted by the next fence; sarama's own close runs in the background
// until it has resolved what it still holds, and Close waits for it.
func (p *Producer) Release(topic string) {
	p.mu.Lock()
	s := p.sessions[topic]
	delete(p.sessions, topic)
	p.mu.Unlock()
	if s == nil {
		return
	}
	p.abandoned.Add(1)
	go func() {
		defer p.abandoned.Done()
		_ = s.ap.Close()
		s.collectors.Wait()
	}()
}

// Publish sends the records, all of one topic, in one transaction and returns one error per
// record: nil = committed (acknowledged by all in-sync replicas, visible to read_committed
// consumers). Otherwise nothing of the call is visible, and each record's error says why: its
// own broker error, ErrNoAnswer, ErrAborted (not its fault), ErrNotFenced, or ErrRecordTooLarge
// for a record refused before sending (the others of the call are sent without it). After a
// failure the topic's producer is released; the caller fences again before the next call. The
// caller puts at most one record per ordering key in a call.
func (p *Producer) Publish(ctx context.Context, records []Record) []error {
	errs := make([]error, len(records))
	var fit []Record
	var at []int
	for i, r := range records {
		if n := BatchBytes(r); n > p.maxBatch {
			errs[i] = fmt.Errorf("%w: a record batch of it alone is %d bytes (key %s, value %d bytes), over the %d of kafka.max-message-bytes",
				ErrRecordTooLarge, n, r.Key, len(r.Value), p.maxBatch)
			continue
		}
		fit = append(fit, r)
		at = append(at, i)
	}
	for j, err := range p.publish(ctx, fit) {
		errs[at[j]] = err
	}
	return errs
}

// BatchBytes is the size of a record batch holding only r, as the broker counts it against
// message.max.bytes; it may exceed the exact figure by a few dozen bytes (sarama's bound on the
// record's varints), never fall short of it.
func BatchBytes(r Record) int { return recordBatchOverhead + message(r, nil).ByteSize(2) }

func message(r Record, t *ticket) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: r.Topic, Key: sarama.StringEncoder(r.Key)}
	if t != nil {
		m.Metadata = t
	}
	if r.Value != nil {
		m.Value = sarama.ByteEncoder(r.Value)
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
	}
	return m
}

func (p *Producer) publish(ctx context.Context, records []Record) []error {
	errs := make([]error, len(records))
	if len(records) == 0 {
		return errs
	}
	topic := records[0].Topic
	p.mu.Lock()
	s := p.sessions[topic]
	p.mu.Unlock()
	if s == nil {
		return fill(errs, ErrNotFenced)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := p.transaction(ctx, s, records, errs); err != nil {
		p.mu.Lock()
		if p.sessions[topic] == s {
			p.mu.Unlock()
			p.Release(topic)
		} else {
			p.mu.Unlock()
		}
	}
	return errs
}

// transaction runs one transaction and fills errs; a non-nil result means it did not commit.
func (p *Producer) transaction(ctx context.Context, s *session, records []Record, errs []error) error {
	if ctx.Err() != nil {
		fill(errs, fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx)))
		return context.Cause(ctx)
	}
	for _, r := range records {
		if r.Topic != records[0].Topic {
			panic("kafka: one Publish call carries one topic")
		}
	}
	if err := s.ap.BeginTxn(); err != nil {
		fill(errs, fmt.Errorf("%w: begin: %w", ErrAborted, err))
		return err
	}
	tickets := make([]*ticket, len(records))
	handed := 0
	for i, r := range records {
		// Checked before each hand-over: select picks at random among ready cases, and nothing
		// may be handed to sarama once the caller gave up.
		if ctx.Err() != nil {
			break
		}
		t := &ticket{done: make(chan answer, 1)}
		m := message(r, t)
		select {
		case s.ap.Input() <- m:
			tickets[i] = t
			handed++
		case <-ctx.Done():
		}
		if tickets[i] == nil {
			break
		}
	}
	// Once one batch failed, sarama fails the rest of the transaction with the same error (or
	// "not ready"), so an error is the record's own only in the partition of the first error to
	// arrive; the others were aborted along with it. Without any error, a record still
	// unanswered at the deadline failed on its own when no record of its partition was
	// acknowledged (a partition whose broker does not answer); otherwise it was held up by
	// the failing transaction.
	answers := make([]*answer, len(tickets))
	var first *answer
	alive := map[int32]bool{}
	for i, t := range tickets {
		if t == nil {
			continue
		}
		a, ok := await(ctx, t)
		if !ok {
			continue
		}
		answers[i] = &a
		if a.err != nil && (first == nil || a.seq < first.seq) {
			first = &a
		}
		if a.err == nil {
			alive[a.partition] = true
		}
	}
	// The records of the call per partition, counted once every answer is in (a record is
	// partitioned only once sarama took it): one transaction at a time, so they are the
	// partition's only records in flight.
	batch := map[int32]int{}
	for i, t := range tickets {
		switch {
		case answers[i] != nil:
			batch[answers[i].partition]++
		case t != nil && t.partition.Load() > 0:
			batch[t.partition.Load()-1]++
		}
	}
	if first == nil && handed == len(records) && !slices.Contains(answers, nil) {
		// Every record is answered, so sarama's commit only sends EndTxn: it gets its own bound,
		// not what is left of ctx, and not cut short by a stop.
		return p.commit(ctx, s, errs)
	}
	for i, a := range answers {
		switch {
		case tickets[i] == nil:
			errs[i] = fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
		case a == nil && first == nil && !alive[tickets[i].partition.Load()-1]:
			errs[i] = fmt.Errorf("%w: %w", ErrNoAnswer, context.Cause(ctx))
		case a == nil && first == nil:
			errs[i] = fmt.Errorf("%w: no answer, though its partition answered others: %w", ErrAborted, context.Cause(ctx))
		case a == nil:
			errs[i] = fmt.Errorf("%w: no answer after partition %d failed: %w", ErrAborted, first.partition, first.err)
		case a.err != nil && a.partition == first.partition && Classify(a.err) == VerdictRefused && batch[a.partition] > 1:
			// The broker refused the batch for its size, not provably this record: several of
			// the call shared the partition. Charged, not DEAD (docs/dispatcher.md, "Broker
			// errors"); once it backs off it goes in a batch of its own.
			errs[i] = fmt.Errorf("%w: %d records of its transaction in partition %d: %w", ErrShared, batch[a.partition], a.partition, a.err)
		case a.err != nil && a.partition == first.partition:
			errs[i] = a.err
		case a.err != nil:
			errs[i] = fmt.Errorf("%w: %w", ErrAborted, a.err)
		case first != nil:
			errs[i] = fmt.Errorf("%w: partition %d of its transaction failed: %w", ErrAborted, first.partition, first.err)
		default:
			errs[i] = fmt.Errorf("%w: another record of its transaction got no answer", ErrAborted)
		}
	}
	return errors.New("kafka: transaction failed")
}

// await waits for t's answer until ctx ends; an answer already there wins over the deadline.
func await(ctx context.Context, t *ticket) (answer, bool) {
	select {
	case a := <-t.done:
		return a, true
	default:
	}
	select {
	case a := <-t.done:
		return a, true
	case <-ctx.Done():
		return answer{}, false
	}
}

// commit commits the transaction whose records were all acknowledged, bounded by commitTimeout.
// A commit result that is ready wins over the bound.
func (p *Producer) commit(ctx context.Context, s *session, errs []error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.ap.CommitTxn() }()
	var err error
	select {
	case err = <-done:
	case <-cctx.Done():
		select {
		case err = <-done:
		default:
			err = fmt.Errorf("no answer within %s: %w", commitTimeout, context.Cause(cctx))
		}
	}
	if err != nil {
		// Whatever the broker answered (the coordinator away, the producer fenced, the
		// transaction timed out), the commit is the transaction's, never a record's: a lane
		// failure (Target.Deliver), with the broker's error kept for the log.
		err = fmt.Errorf("%w: %w", ErrCommit, err)
		fill(errs, err)
		return err
	}
	return nil
}

func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// Close releases every producer and waits, up to wait, for sarama to close them.
func (p *Producer) Close(wait time.Duration) error {
	p.mu.Lock()
	var topics []string
	for t := range p.sessions {
		topics = append(topics, t)
	}
	p.mu.Unlock()
	for _, t := range topics {
		p.Release(t)
	}
	done := make(chan struct{})
	go func() {
		p.abandoned.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		return errors.New("kafka: producers still closing")
	}
}
