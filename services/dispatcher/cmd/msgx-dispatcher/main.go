// Command msgx-dispatcher delivers the outbox to Kafka.
package main

import (
	"context"
	"os"

	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/notify"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
)

func main() { os.Exit(service.Main("dispatcher", run)) }

func run(ctx context.Context, b *service.Base) error {
	cfg := b.Config
	// Start-up fails here when the brokers cannot serve an idempotent producer: no fallback.
	// The transactional producers are made per term, under the role's lock (delivery.Fencer).
	producer, err := kafka.New(cfg.KafkaBrokers, "msgx-dispatcher-"+cfg.Instance, cfg.KafkaTransactionalID, cfg.KafkaMaxMessageBytes)
	if err != nil {
		return err
	}
	defer func() {
		if err := producer.Close(cfg.ShutdownTimeout / 2); err != nil {
			b.Logger.Warn("kafka producer close", "err", err)
		}
	}()
	d := delivery.New(delivery.Config{
		Pipeline:    cfg.Pipeline,
		SendTimeout: cfg.KafkaSendTimeout,
		Lanes: []delivery.Lane{
			{Target: outbox.TargetMsg, Mode: delivery.Ordered, Limit: cfg.DispatcherBatch,
				Sink: kafka.Target{Producer: producer, Topic: cfg.TopicMsg}},
			{Target: outbox.TargetSchd, Mode: delivery.Latest, Limit: cfg.Schd.FlushLimit, Period: cfg.Schd.FlushPeriod,
				Sink: kafka.Target{Producer: producer, Topic: cfg.TopicSchd, NullTombstones: true}},
		},
	}, b.Clock, b.Logger, b.Telemetry, b.Registry)
	listener := notify.New(cfg.PGDSN, b.Logger, outbox.Channel)
	elector := b.Elector()
	return b.Run(ctx, listener.Run, func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error { return d.Run(ctx, s, listener.C()) })
	})
}
