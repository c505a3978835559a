// Command msgx-dispatcher delivers the outbox to Kafka and the upstream requests to COUTMSGS;
// with the subcommand "version-floor" it records, after a restore of PostgreSQL, what Kafka
// already holds (R-RESTORE-1) and exits.
package main

import (
	"context"
	"errors"
	"os"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/notify"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/requests"
)

func main() {
	if code, exit := command.Args(os.Args[1:], os.Stdout, os.Stderr); exit {
		os.Exit(code)
	}
	if len(os.Args) > 1 {
		os.Exit(subcommand(os.Args[1], os.Args[2:]))
	}
	os.Exit(service.Main(leader.Dispatcher, run))
}

func run(ctx context.Context, b *service.Base) error {
	cfg := b.Config
	// Settings New checks itself, refused here before any wait: no broker would ever cure them
	// (R-START-2).
	switch {
	case len(cfg.Kafka.Brokers) == 0:
		return errors.New("no Kafka brokers: set " + config.EnvName("kafka.brokers"))
	case cfg.Kafka.TransactionalID == "":
		return errors.New("no Kafka transactional id: set " + config.EnvName("kafka.transactional-id") + " or leave it unset")
	}
	// The brokers are contacted in the background of a running service, never before it
	// (R-START-1): while they do not answer the dispatcher stays up and not ready ("kafka"), and
	// joins the election only once an idempotent probe producer was obtained (R-OUTBOX-6). The
	// transactional producers are made per term, under the role's lock (delivery.Fencer).
	sec, err := kafka.NewSecurity(cfg.Kafka)
	if err != nil {
		return err
	}
	if sec.Plaintext() {
		b.Logger.Warn("kafka: connecting without TLS: records, and any credential, cross the network in the clear; set "+
			config.EnvName("kafka.tls")+"=true outside a development machine", "brokers", cfg.Kafka.Brokers)
	} else {
		b.Logger.Info("kafka: secured connection", "security", sec.String(), "brokers", cfg.Kafka.Brokers)
	}
	gate := newBrokerGate(func() (*kafka.Producer, error) {
		return kafka.New(cfg.Kafka.Brokers, "msgx-dispatcher-"+cfg.Instance, cfg.Kafka.TransactionalID, cfg.Kafka.MaxMessageBytes, sec)
	}, kafka.Refused, cfg.Pipeline.Retry(), b.Clock, b.Logger, b.Registry)
	var built atomic.Bool
	// Once the producer is built the check asks whether any broker answers: a partition without
	// a leader is delivery's to wait out while the others go on, and never makes the dispatcher
	// unready; a cluster no broker of which answers does (docs/dispatcher.md, "Start-up and
	// readiness").
	b.Admin.AddCheck(outage.Kafka, func(ctx context.Context) error {
		if !built.Load() {
			return gate.Check(ctx)
		}
		return kafka.Answers(ctx, cfg.Kafka.Brokers, "msgx-dispatcher-"+cfg.Instance, sec)
	})
	// The shared MySQL is only written by the requests lane; the pool connects lazily, so an
	// unreachable MySQL delays the requests and nothing else.
	out, err := aodb.Open(cfg.MySQL.DSN, cfg.Inbox.Timeout)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	lane := requests.New(requests.FromConfig(cfg), out, b.Clock, b.Logger, b.Registry)
	listener := notify.New(cfg.PG.DSN, b.Logger, outbox.Channel)
	elector := b.Elector()
	return b.Run(ctx, listener.Run, func(ctx context.Context) error {
		producer, err := gate.Wait(ctx)
		if err != nil {
			return err
		}
		built.Store(true)
		defer func() {
			if err := producer.Close(cfg.ShutdownTimeout / 2); err != nil {
				b.Logger.Warn("kafka producer close", "err", err)
			}
		}()
		d := delivery.New(delivery.FromConfig(cfg,
			delivery.Lane{Target: outbox.TargetMsg, Mode: delivery.Ordered, Limit: cfg.Dispatcher.Batch,
				Sink: kafka.Target{Producer: producer, Topic: cfg.Kafka.TopicMsg}},
			delivery.Lane{Target: outbox.TargetSchd, Mode: delivery.Latest, Limit: cfg.Schd.FlushLimit, Period: cfg.Schd.FlushPeriod,
				Sink: kafka.Target{Producer: producer, Topic: cfg.Kafka.TopicSchd, NullTombstones: true}},
		), b.Clock, b.Logger, b.Telemetry, b.Registry)
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error {
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error { return d.Run(gctx, s, listener.C()) })
			g.Go(func() error { return lane.Run(gctx, s) })
			return g.Wait()
		})
	})
}
