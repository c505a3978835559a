// Command msgx-pump processes the enqueued inbox messages one at a time in msg_id order.
package main

import (
	"context"
	"os"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/notify"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
)

func main() { os.Exit(service.Main(leader.Pump, run)) }

func run(ctx context.Context, b *service.Base) error {
	cfg := b.Config
	in, err := b.Inbox()
	if err != nil {
		return err
	}
	rdb, err := b.Redis()
	if err != nil {
		return err
	}
	proj := projection.New(rdb, cfg.RedisPrefix, cfg.RedisTimeout)

	p := pump.New(pump.Config{
		PollInterval: cfg.Pipeline.PollInterval,
		HeadAgeAlert: cfg.Pipeline.HeadAgeAlert,
		Retry:        cfg.Pipeline.Retry(),
		Codec: sis.Options{MaxBytes: cfg.CodecMaxBytes, MaxDepth: cfg.CodecMaxDepth, MaxText: cfg.CodecMaxText,
			Zone: cfg.AirportZone},
		IdentityDayBounded: cfg.IdentityIncludeDayBoundary,
	}, pump.NewReadAhead(in, b.Logger), proj, processor.Route(flight.DayRule{Zone: cfg.AirportZone, Cutover: cfg.OperationDayCutover},
		processor.WithMetrics(b.Registry), processor.WithLogger(b.Logger), processor.WithBatchSize(cfg.Schd.BatchSize),
		processor.WithRequests(cfg.Requests.Timeout)),
		b.Clock, b.Logger, b.Telemetry, b.Registry)
	listener := notify.New(cfg.PGDSN, b.Logger, queue.Channel)
	elector := b.Elector()
	backlog := func(ctx context.Context) error { return p.RunBacklog(ctx, b.Pool) }
	return b.Run(ctx, listener.Run, backlog, func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error { return p.Run(ctx, s, listener.C()) })
	})
}
