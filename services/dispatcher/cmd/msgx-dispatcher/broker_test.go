package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/retry"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

func newTestGate(connect func() (int, error)) (*brokerGate[int], *testlog.Buffer) {
	var logs testlog.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	g := newBrokerGate(connect, kafka.Refused, retry.Policy{Backoff: []time.Duration{time.Millisecond, 2 * time.Millisecond}},
		clock.Real{}, logger, prometheus.NewRegistry())
	return g, &logs
}

// Brokers that do not answer at start-up keep the dispatcher waiting, not ready, with one ERROR
// when the outage begins and one INFO when it ends however many tries it took (R-START-1).
func TestGateWaitsOutAnOutage(t *testing.T) {
	down := errors.Join(sarama.ErrOutOfBrokers, errors.New("dial tcp 127.0.0.1:9092: connect: connection refused"))
	var tries int
	var notReady []error
	var g *brokerGate[int]
	g, logs := newTestGate(func() (int, error) {
		tries++
		notReady = append(notReady, g.Check(context.Background()))
		if tries < 6 {
			return 0, down
		}
		return 42, nil
	})
	if err := g.Check(context.Background()); err == nil {
		t.Fatal("ready before the brokers were asked")
	}
	got, err := g.Wait(t.Context())
	if err != nil || got != 42 {
		t.Fatalf("Wait = %d, %v; want 42, nil", got, err)
	}
	if tries != 6 {
		t.Errorf("%d tries, want 6", tries)
	}
	for i, err := range notReady {
		if err == nil {
			t.Errorf("ready during try %d, before the producer was built", i+1)
		}
	}
	if err := g.Check(context.Background()); err != nil {
		t.Errorf("not ready once the producer was built: %v", err)
	}
	out := logs.String()
	if n := strings.Count(out, "level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines for one outage, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "kafka brokers answer again"); n != 1 {
		t.Errorf("%d lines for the end of the outage, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "probes=4") {
		t.Errorf("the end of the outage does not count its failed probes (4):\n%s", out)
	}
}

// Brokers that answer and refuse the producer contract stop the service at once: waiting would
// hide the refusal behind an outage.
func TestGateStopsOnARefusal(t *testing.T) {
	var tries int
	g, _ := newTestGate(func() (int, error) {
		tries++
		if tries == 1 {
			return 0, sarama.ErrOutOfBrokers
		}
		return 0, sarama.ErrClusterAuthorizationFailed
	})
	_, err := g.Wait(t.Context())
	if !errors.Is(err, sarama.ErrClusterAuthorizationFailed) || !strings.Contains(err.Error(), "retrying cannot help") {
		t.Fatalf("Wait = %v, want the refusal", err)
	}
	if tries != 2 {
		t.Errorf("%d tries, want 2 (stop at the refusal)", tries)
	}
}

// A shutdown while waiting ends the wait with the context's error, and the gate stays not ready.
func TestGateStopsWithItsContext(t *testing.T) {
	g, _ := newTestGate(func() (int, error) { return 0, sarama.ErrOutOfBrokers })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want the context's deadline", err)
	}
	if err := g.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "not answered since") {
		t.Errorf("Check = %v, want the outage", err)
	}
}
