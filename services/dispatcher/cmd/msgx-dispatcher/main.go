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
	producer, err := kafka.New(cfg.KafkaBrokers, "msgx-dispatcher-"+cfg.Instance)
	if err != nil {
		return err
	}
	defer producer.Close()
	d := delivery.New(delivery.Config{
		Pipeline:  cfg.Pipeline,
		Schd:      cfg.Schd,
		TopicMsg:  cfg.TopicMsg,
		TopicSchd: cfg.TopicSchd,
	}, producer, b.Clock, b.Logger, b.Telemetry, b.Registry)
	listener := notify.New(cfg.PGDSN, b.Logger, outbox.Channel)
	elector := b.Elector()
	return b.Run(ctx, listener.Run, func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error { return d.Run(ctx, s, listener.C()) })
	})
}
