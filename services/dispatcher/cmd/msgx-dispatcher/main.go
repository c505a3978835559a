// Command msgx-dispatcher delivers the outbox to Kafka and the upstream requests to COUTMSGS;
// with the subcommand "version-floor" it records, after a restore of PostgreSQL, what Kafka
// already holds (R-RESTORE-1) and exits.
package main

import (
	"context"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/notify"
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
	// Start-up fails here when the brokers cannot serve an idempotent producer: no fallback.
	// The transactional producers are made per term, under the role's lock (delivery.Fencer).
	producer, err := kafka.New(cfg.Kafka.Brokers, "msgx-dispatcher-"+cfg.Instance, cfg.Kafka.TransactionalID, cfg.Kafka.MaxMessageBytes)
	if err != nil {
		return err
	}
	defer func() {
		if err := producer.Close(cfg.ShutdownTimeout / 2); err != nil {
			b.Logger.Warn("kafka producer close", "err", err)
		}
	}()
	d := delivery.New(delivery.Config{
		PollInterval: cfg.Pipeline.PollInterval,
		Gather:       cfg.Dispatcher.Gather,
		Retry:        cfg.Pipeline.Retry(),
		SendTimeout:  cfg.Kafka.SendTimeout,
		Lanes: []delivery.Lane{
			{Target: outbox.TargetMsg, Mode: delivery.Ordered, Limit: cfg.Dispatcher.Batch,
				Sink: kafka.Target{Producer: producer, Topic: cfg.Kafka.TopicMsg}},
			{Target: outbox.TargetSchd, Mode: delivery.Latest, Limit: cfg.Schd.FlushLimit, Period: cfg.Schd.FlushPeriod,
				Sink: kafka.Target{Producer: producer, Topic: cfg.Kafka.TopicSchd, NullTombstones: true}},
		},
	}, b.Clock, b.Logger, b.Telemetry, b.Registry)
	// The shared MySQL is only written by the requests lane; the pool connects lazily, so an
	// unreachable MySQL delays the requests and nothing else.
	out, err := aodb.Open(cfg.MySQL.DSN, cfg.Inbox.Timeout)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	lane := requests.New(requests.Config{
		Period:  cfg.Pipeline.PollInterval,
		Timeout: cfg.Req.Timeout,
		Shadow:  cfg.Shadow,
		Retry:   cfg.Pipeline.Retry(),
	}, out, b.Clock, b.Logger, b.Registry)
	listener := notify.New(cfg.PG.DSN, b.Logger, outbox.Channel)
	elector := b.Elector()
	return b.Run(ctx, listener.Run, func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error {
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error { return d.Run(gctx, s, listener.C()) })
			g.Go(func() error { return lane.Run(gctx, s) })
			return g.Wait()
		})
	})
}
