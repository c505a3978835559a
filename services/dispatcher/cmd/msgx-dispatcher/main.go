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
	// One producer serves every term of this process, so a record it still retries from an
	// earlier term stays ahead of the later records of its partition.
	producer, err := kafka.New(cfg.KafkaBrokers, "msgx-dispatcher-"+cfg.Instance)
	if err != nil {
		return err
	}
	defer producer.Close()
	d := delivery.New(delivery.Config{
		Pipeline:    cfg.Pipeline,
		SendTimeout: cfg.KafkaSendTimeout,
		// Half the shutdown budget at most, so a stop still ends within it.
		DrainTimeout: min(cfg.KafkaSendTimeout, cfg.ShutdownTimeout/2),
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
