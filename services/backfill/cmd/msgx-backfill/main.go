// Command msgx-backfill writes the processed markers back to the shared inbox and runs the
// retention sweeps (proc_state, msg_event, schd_snap_log, req_track, flight history) and the
// Redis projection's consistency sentinel, with the rebuilds the control API requests, and the
// republish jobs that send the current flight states to KAFKA:schd again.
package main

import (
	"context"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/services/backfill/internal/maintenance"
	"github.com/msgexchange/msgexchange/services/backfill/internal/marker"
	"github.com/msgexchange/msgexchange/services/backfill/internal/republisher"
	"github.com/msgexchange/msgexchange/services/backfill/internal/sentinel"
)

func main() { os.Exit(service.Main(leader.Backfill, run)) }

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
	forget := maintenance.NewRedisForgetter(rdb, cfg.Redis.Prefix, cfg.Redis.Timeout)
	p := cfg.Pipeline
	sweeper := marker.New(marker.Config{
		Period:      p.BackfillPeriod,
		Batch:       p.BackfillBatch,
		Retry:       p.BackfillRetry(),
		Overdue:     p.OverdueBackfill,
		Status:      cfg.Backfill.MarkerStatus,
		Shadow:      cfg.Shadow,
		MaxAttempts: p.BackfillMaxAttempts,
	}, in, b.Clock, b.Logger, b.Telemetry, b.Registry)
	cleaner := maintenance.New(maintenance.Config{
		ProcRetention:    p.ProcRetention,
		EventRetention:   p.EventRetention,
		SnapLogRetention: cfg.Schd.SnapLogRetention,
		ReqRetention:     p.ReqRetention,
		JobRetention:     cfg.Retention.Jobs,
		Batch:            cfg.Retention.Batch,
		Pause:            retentionPause(cfg.Retention.Pause),
		History: flightstore.HistoryPolicy{
			Retention:   cfg.Flight.HistoryRetention,
			QuietPeriod: cfg.Flight.QuietPeriod,
			Zone:        cfg.Airport.Zone,
		},
	}, forget, b.Clock, b.Logger, b.Registry)
	sentry := sentinel.New(sentinel.Config{
		OnStartup:     cfg.Consistency.OnStartup,
		SampleRatio:   cfg.Consistency.SampleRatio,
		FullBelow:     cfg.Consistency.FullBelow,
		Period:        cfg.Consistency.Period,
		JobPoll:       p.PollInterval,
		RebuildOnLoss: cfg.Consistency.RebuildOnLoss,
	}, projection.New(rdb, cfg.Redis.Prefix, cfg.Redis.Timeout), b.Clock, b.Logger, b.Registry)
	republish := republisher.New(republisher.Config{Poll: p.PollInterval}, b.Clock, b.Logger, b.Registry)
	elector := b.Elector()
	return b.Run(ctx, func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error {
			// All share the lock connection, one short transaction at a time.
			g, ctx := errgroup.WithContext(ctx)
			g.Go(func() error { return sweeper.Run(ctx, s) })
			g.Go(func() error { return cleaner.Run(ctx, s) })
			g.Go(func() error { return sentry.Run(ctx, s) })
			g.Go(func() error { return republish.Run(ctx, s) })
			return g.Wait()
		})
	})
}

// retentionPause maps the setting's 0 ("no pause") to the cleaner's negative: its zero means
// the default.
func retentionPause(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
