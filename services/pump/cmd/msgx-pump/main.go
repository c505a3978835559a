// Command msgx-pump processes the enqueued inbox messages one at a time in msg_id order.
package main

import (
	"context"
	"os"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
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
	proj := projection.New(rdb, cfg.Redis.Prefix, cfg.Redis.Timeout)
	details := flightstore.NewDetailCache(0)

	p := pump.New(pump.Config{
		PollInterval: cfg.Pipeline.PollInterval,
		HeadAgeAlert: cfg.Pipeline.HeadAgeAlert,
		Retry:        cfg.Pipeline.Retry(),
		Codec: sis.Options{MaxBytes: cfg.Codec.MaxBytes, MaxDepth: cfg.Codec.MaxDepth, MaxText: cfg.Codec.MaxText,
			Zone: cfg.Airport.Zone},
		IdentityDayBounded: cfg.Identity.IncludeDayBoundary,
	}, pump.NewReadAhead(in, b.Logger), proj, processor.Route(flight.DayRule{Zone: cfg.Airport.Zone, Cutover: cfg.Airport.OperationDayCutover},
		processor.WithMetrics(b.Registry), processor.WithLogger(b.Logger), processor.WithBatchSize(cfg.Schd.BatchSize),
		processor.WithRequests(cfg.Req.Timeout), processor.WithDetailCache(details), processor.WithMaxMessageBytes(cfg.Kafka.MaxMessageBytes)),
		b.Clock, b.Logger, b.Telemetry, b.Registry)
	listener := notify.New(cfg.PG.DSN, b.Logger, queue.Channel)
	elector := b.Elector()
	backlog := func(ctx context.Context) error { return p.RunBacklog(ctx, b.Pool) }
	return b.Run(ctx, listener.Run, backlog, func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error {
			// What the last term kept may name row versions this term cannot check (D-18).
			details.Reset()
			return p.Run(ctx, s, listener.C())
		})
	})
}
