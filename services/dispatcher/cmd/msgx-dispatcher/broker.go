package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/pkg/retry"
	"github.com/msgexchange/msgexchange/pkg/service"
)

// brokerGate holds the dispatcher back until the brokers serve its producer (R-START-1). A
// broker that does not answer at start-up is an outage, not a reason to exit: exiting made a
// supervisor restart the process in a loop for as long as Kafka was down (docs/chaos.md). The
// gate keeps the process up and not ready, retries with the outage policy's backoff
// (pipeline.backoff, capped by pipeline.backoff-cap), logs the outage once when it begins and
// once when it ends, and hands over what connect built as soon as it succeeds. Only a refusal
// retrying cannot cure (refused) stops the service (R-START-2).
type brokerGate[T any] struct {
	connect func() (T, error)
	refused func(error) bool
	retry   retry.Policy
	policy  *outage.Policy
	// waiting is why the dispatcher is not ready yet, nil once connect succeeded.
	waiting atomic.Pointer[string]

	// Set by Probe, read by Wait: both run on Wait's goroutine.
	got  T
	last error
}

func newBrokerGate[T any](connect func() (T, error), refused func(error) bool, rp retry.Policy, clk clock.Clock,
	logger *slog.Logger, reg prometheus.Registerer) *brokerGate[T] {
	g := &brokerGate[T]{connect: connect, refused: refused, retry: rp}
	g.policy = outage.NewPolicy(outage.Config{
		Gauge:        "msgx_dispatcher_startup_blocked_seconds",
		Help:         "How long the dispatcher has been waiting at start-up for the Kafka brokers to serve its producer, before it joins the election (0 when not waiting).",
		Dependencies: []string{outage.Kafka},
		Blocked:      "kafka brokers do not answer: the dispatcher stays up, not ready, and waits for them before joining the election",
		Resumed:      "kafka brokers answer again: the dispatcher builds its producer and joins the election",
		Logger:       logger,
		Now:          clk.Now,
	}, reg)
	why := "the brokers have not been asked yet"
	g.waiting.Store(&why)
	return g
}

// Check is the gate's readiness check: it fails, with a reason that stays the same for the
// whole outage (the admin endpoint logs each change of it), until the producer is built.
func (g *brokerGate[T]) Check(context.Context) error {
	if why := g.waiting.Load(); why != nil {
		return errors.New(*why)
	}
	return nil
}

// Wait returns what connect built once it succeeds; the refusal when the brokers answered and
// refused (the caller stops the service, naming it); or ctx's error when ctx ends first.
func (g *brokerGate[T]) Wait(ctx context.Context) (T, error) {
	var zero T
	if err := g.Probe(ctx, outage.Kafka); err == nil {
		g.waiting.Store(nil)
		return g.got, nil
	}
	for {
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		if g.refused(g.last) {
			return zero, fmt.Errorf("%w: the kafka brokers refused the dispatcher's producer (check MSGX_KAFKA_BROKERS and the brokers' configuration; retrying cannot help): %w", service.ErrSettingsRefused, g.last)
		}
		if g.policy.Current() == nil {
			g.policy.Block(ctx, g, outage.Kafka, 0, g.last.Error())
		}
		if !clock.Sleep(ctx, g.retry.After(g.policy.Current().Probes+1)) {
			return zero, ctx.Err()
		}
		if g.policy.Resume(ctx, g) {
			return g.got, nil
		}
	}
}

// Probe implements outage.Loop: one try of connect, bounded by ctx. connect takes no context;
// when ctx ends first its result is left to the garbage collector, which is safe for the
// producer: New closes its probe before it returns and holds no connection.
func (g *brokerGate[T]) Probe(ctx context.Context, _ string) error {
	type made struct {
		v   T
		err error
	}
	ch := make(chan made, 1)
	go func() {
		v, err := g.connect()
		ch <- made{v, err}
	}()
	select {
	case m := <-ch:
		g.got, g.last = m.v, m.err
	case <-ctx.Done():
		g.last = ctx.Err()
	}
	return g.last
}

// Report implements outage.Loop: the outage is the readiness check's reason while it lasts.
// The reason names when it began and not the last error, so that it changes once per outage.
func (g *brokerGate[T]) Report(_ context.Context, st *outage.State) error {
	if st == nil {
		g.waiting.Store(nil)
		return nil
	}
	why := fmt.Sprintf("the brokers have not answered since %s", st.Since.UTC().Format(time.RFC3339))
	g.waiting.Store(&why)
	return nil
}
