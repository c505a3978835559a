// Package delivery drains the outbox (msg_event) to its targets: KAFKA:msg in event_id order
// per FLID, and KAFKA:schd as the latest state per FLID every flush period (seed 003 §8).
// Events are marked SENT only after the broker acknowledged them; delivery is at least once.
package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Record is one message for a broker. A nil Value is a tombstone.
type Record struct {
	Topic   string
	Key     string
	Value   []byte
	Headers [][2]string
}

// Publisher sends records and returns one error per record (nil = acknowledged). It must be
// safe to call again after a failure; ordering across calls is the caller's concern.
type Publisher interface {
	Publish(ctx context.Context, records []Record) []error
}

// Session gives exclusive use of the dispatcher role's lock connection (leader.Session), so a
// deposed dispatcher cannot mark events.
type Session interface {
	Do(ctx context.Context, fn func(conn *pgx.Conn) error) error
}

// Config is what delivery needs of the configuration.
type Config struct {
	Pipeline  config.Pipeline
	Schd      config.Schd
	TopicMsg  string
	TopicSchd string
	// BatchLimit bounds one KAFKA:msg round.
	BatchLimit int
}

// Dispatcher runs the delivery loops.
type Dispatcher struct {
	cfg       Config
	pub       Publisher
	clock     clock.Clock
	logger    *slog.Logger
	telemetry *telemetry.Telemetry
	metrics   *metrics
}

// New builds a dispatcher and registers its metrics.
func New(cfg Config, pub Publisher, clk clock.Clock, logger *slog.Logger, tel *telemetry.Telemetry, reg prometheus.Registerer) *Dispatcher {
	if cfg.BatchLimit == 0 {
		cfg.BatchLimit = 500
	}
	return &Dispatcher{cfg: cfg, pub: pub, clock: clk, logger: logger, telemetry: tel, metrics: newMetrics(reg)}
}

// Run delivers until ctx ends: KAFKA:msg on every wake-up or poll interval, KAFKA:schd every
// flush period.
func (d *Dispatcher) Run(ctx context.Context, s Session, wake <-chan struct{}) error {
	poll := time.NewTicker(max(d.cfg.Pipeline.PollInterval, 50*time.Millisecond))
	defer poll.Stop()
	flush := time.NewTicker(d.cfg.Schd.FlushPeriod)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-poll.C:
		case <-flush.C:
			if _, err := d.FlushSchd(ctx, s); err != nil && ctx.Err() == nil {
				d.logger.Error("schd flush failed", "err", err)
			}
			continue
		}
		for {
			n, err := d.SendMsg(ctx, s)
			if err != nil && ctx.Err() == nil {
				d.logger.Error("msg delivery round failed", "err", err)
			}
			if err != nil || n < d.cfg.BatchLimit {
				break
			}
		}
	}
}

// SendMsg runs one KAFKA:msg round and returns how many events it read. Per FLID, events go
// out in event_id order and each only after the previous one was acknowledged; a head that
// is backing off or fails holds back only its own FLID.
func (d *Dispatcher) SendMsg(ctx context.Context, s Session) (int, error) {
	var batch []outbox.Event
	if err := s.Do(ctx, func(conn *pgx.Conn) error {
		var err error
		batch, err = outbox.Pending(ctx, conn, outbox.TargetMsg, d.cfg.BatchLimit)
		return err
	}); err != nil {
		return 0, err
	}
	now := d.clock.Now()
	var order []string
	queues := map[string][]outbox.Event{}
	for _, e := range batch {
		if _, ok := queues[e.PartitionKey]; !ok {
			order = append(order, e.PartitionKey)
		}
		queues[e.PartitionKey] = append(queues[e.PartitionKey], e)
	}
	// Waves: the i-th wave carries the i-th due event of every FLID still going.
	for wave := 0; len(order) > 0; wave++ {
		var sendable []outbox.Event
		var still []string
		for _, flid := range order {
			q := queues[flid]
			if wave >= len(q) {
				continue
			}
			e := q[wave]
			if e.NextAttempt != nil && e.NextAttempt.After(now) {
				continue // backing off: this FLID waits, the others go on
			}
			sendable = append(sendable, e)
			still = append(still, flid)
		}
		if len(sendable) == 0 {
			break
		}
		failed, err := d.send(ctx, s, outbox.TargetMsg, d.cfg.TopicMsg, sendable)
		if err != nil {
			return len(batch), err
		}
		order = order[:0]
		for _, flid := range still {
			if !failed[flid] {
				order = append(order, flid)
			}
		}
	}
	return len(batch), nil
}

// FlushSchd sends the latest state of up to flush-limit FLIDs and returns how many it sent.
func (d *Dispatcher) FlushSchd(ctx context.Context, s Session) (int, error) {
	var batch []outbox.Event
	if err := s.Do(ctx, func(conn *pgx.Conn) error {
		var err error
		batch, err = outbox.Pending(ctx, conn, outbox.TargetSchd, d.cfg.Schd.FlushLimit)
		return err
	}); err != nil {
		return 0, err
	}
	now := d.clock.Now()
	due := batch[:0]
	for _, e := range batch {
		if e.NextAttempt == nil || !e.NextAttempt.After(now) {
			due = append(due, e)
		}
	}
	if len(due) == 0 {
		return 0, nil
	}
	_, err := d.send(ctx, s, outbox.TargetSchd, d.cfg.TopicSchd, due)
	return len(due), err
}

// send publishes events and records each outcome; it returns the FLIDs whose event failed.
func (d *Dispatcher) send(ctx context.Context, s Session, target, topic string, events []outbox.Event) (map[string]bool, error) {
	records := make([]Record, len(events))
	spans := make([]trace.Span, len(events))
	for i, e := range events {
		ectx := d.telemetry.Extract(ctx, telemetry.Carrier{Parent: e.Trace[0], State: e.Trace[1]})
		ectx, spans[i] = d.telemetry.Tracer.Start(ectx, "dispatcher.send", trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.Int64("event_id", e.ID), attribute.String("flid", e.PartitionKey),
				attribute.String("target", target), attribute.Int64("state_version", e.Version)))
		if e.MsgID != nil {
			spans[i].SetAttributes(attribute.Int64("msg_id", *e.MsgID))
		}
		c := d.telemetry.Inject(ectx)
		headers := [][2]string{
			{"msgx-event-id", strconv.FormatInt(e.ID, 10)},
			{"msgx-event-type", e.Type},
			{"msgx-state-version", strconv.FormatInt(e.Version, 10)},
		}
		if c.Parent != "" {
			headers = append(headers, [2]string{"traceparent", c.Parent})
		}
		if c.State != "" {
			headers = append(headers, [2]string{"tracestate", c.State})
		}
		value := e.Payload
		if target == outbox.TargetSchd && e.Type == "TOMBSTONE" {
			value = nil
		}
		records[i] = Record{Topic: topic, Key: e.PartitionKey, Value: value, Headers: headers}
	}
	start := d.clock.Now()
	errs := d.pub.Publish(ctx, records)
	d.metrics.latency.WithLabelValues(target).Observe(d.clock.Now().Sub(start).Seconds())
	now := d.clock.Now()
	failed := map[string]bool{}
	err := s.Do(ctx, func(conn *pgx.Conn) error {
		for i, e := range events {
			if errs[i] == nil {
				spans[i].End()
				if _, err := outbox.MarkSent(ctx, conn, e, now); err != nil {
					return err
				}
				d.metrics.sent.WithLabelValues(target).Inc()
				continue
			}
			spans[i].RecordError(errs[i])
			spans[i].End()
			failed[e.PartitionKey] = true
			next := now.Add(d.cfg.Pipeline.BackoffAfter(e.Attempts + 1))
			if e.Attempts+1 >= d.cfg.Pipeline.MaxAttempts {
				d.metrics.dead.WithLabelValues(target).Inc()
				d.logger.Error("event is DEAD after its last attempt; kept as the dead letter", "event_id", e.ID,
					"target", target, "flid", e.PartitionKey, "err", errs[i])
			} else {
				d.logger.Warn("send failed; will retry", "event_id", e.ID, "target", target, "flid", e.PartitionKey,
					"attempt", e.Attempts+1, "err", errs[i])
			}
			if err := outbox.Fail(ctx, conn, e, errs[i].Error(), next, d.cfg.Pipeline.MaxAttempts, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return failed, fmt.Errorf("record %s delivery: %w", target, err)
	}
	return failed, nil
}

type metrics struct {
	sent    *prometheus.CounterVec
	dead    *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_dispatcher_sent_total",
			Help: "Events acknowledged by the target and marked SENT."}, []string{"target"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_dispatcher_dead_total",
			Help: "Events that became DEAD after their last attempt."}, []string{"target"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "msgx_dispatcher_send_seconds",
			Help: "Duration of one publish call.", Buckets: prometheus.ExponentialBuckets(0.001, 3, 10)}, []string{"target"}),
	}
	reg.MustRegister(m.sent, m.dead, m.latency)
	return m
}
