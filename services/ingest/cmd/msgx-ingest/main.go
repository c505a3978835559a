// Command msgx-ingest discovers new rows in the shared inbox and enqueues them in ID order.
package main

import (
	"context"
	"os"

	"github.com/msgexchange/msgexchange/pkg/inbox"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/services/ingest/internal/discovery"
)

func main() { os.Exit(service.Main("ingest", run)) }

func run(ctx context.Context, b *service.Base) error {
	in, err := inbox.Open(b.Config.MySQLDSN, b.Config.InboxTimeout)
	if err != nil {
		return err
	}
	defer in.Close()
	b.Admin.AddCheck("inbox", in.Ping)
	p := b.Config.Pipeline
	poller := discovery.New(discovery.Config{
		PollInterval:   p.PollInterval,
		ClaimBatch:     p.ClaimBatch,
		MaxCommitDelay: p.MaxCommitDelay,
	}, in, b.Clock, b.Logger, b.Telemetry, b.Registry)
	elector := b.Elector()
	return b.Run(ctx, func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error { return poller.Run(ctx, s) })
	})
}
