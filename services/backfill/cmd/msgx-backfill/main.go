// Command msgx-backfill writes the processed markers back to the shared inbox.
package main

import (
	"context"
	"os"

	"github.com/msgexchange/msgexchange/pkg/inbox"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/services/backfill/internal/marker"
)

func main() { os.Exit(service.Main("backfill", run)) }

func run(ctx context.Context, b *service.Base) error {
	cfg := b.Config
	in, err := inbox.Open(cfg.MySQLDSN, cfg.InboxTimeout)
	if err != nil {
		return err
	}
	defer in.Close()
	b.Admin.AddCheck("inbox", in.Ping)
	p := cfg.Pipeline
	sweeper := marker.New(marker.Config{
		Period:     p.BackfillPeriod,
		Batch:      p.BackfillBatch,
		Backoff:    p.BackfillBackoff,
		BackoffCap: p.BackfillBackoffCap,
		Overdue:    p.OverdueBackfill,
		Status:     cfg.MarkerStatus,
		Shadow:     cfg.Shadow,
	}, in, b.Clock, b.Logger, b.Telemetry, b.Registry)
	elector := b.Elector()
	return b.Run(ctx, func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error { return sweeper.Run(ctx, s) })
	})
}
