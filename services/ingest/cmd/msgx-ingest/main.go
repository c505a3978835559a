// Command msgx-ingest discovers new rows in the shared inbox and enqueues them in ID order,
// and serves the compat HTTP entry that writes messages into that inbox.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/services/ingest/internal/compat"
	"github.com/msgexchange/msgexchange/services/ingest/internal/discovery"
)

func main() { os.Exit(service.Main(leader.Ingest, run)) }

func run(ctx context.Context, b *service.Base) error {
	in, err := b.Inbox()
	if err != nil {
		return err
	}
	p := b.Config.Pipeline
	var seed *cursor.Seed
	if p.CutoverWatermark != "" {
		s, err := cursor.ParseSeed(p.CutoverWatermark)
		if err != nil {
			return err
		}
		seed = &s
	}
	poller := discovery.New(discovery.Config{
		PollInterval:       p.PollInterval,
		BusyPollInterval:   p.BusyPollInterval,
		ClaimBatch:         p.ClaimBatch,
		MaxCommitDelay:     p.MaxCommitDelay,
		LateDetectPeriod:   p.LateDetectPeriod,
		LateWatchRetention: p.LateWatchRetention,
		Seed:               seed,
		Shadow:             b.Config.Shadow,
	}, in, b.Clock, b.Logger, b.Telemetry, b.Registry)
	elector := b.Elector()
	actors := []service.Actor{func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context, s *leader.Session) error { return poller.Run(ctx, s) })
	}}

	// The compat entry writes only the inbox, so every replica serves it, the standby too.
	var tlsCfg *tls.Config
	if c := b.Config; c.HTTP.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.HTTP.TLSCert, c.HTTP.TLSKey)
		if err != nil {
			return fmt.Errorf("compat HTTP certificate (MSGX_HTTP_TLS_CERT, MSGX_HTTP_TLS_KEY): %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	h, err := compat.New(compat.Config{Token: b.Config.HTTP.Token, Insecure: b.Config.HTTP.Insecure, MaxBody: b.Config.HTTP.MaxBody,
		MaxInFlight: b.Config.HTTP.MaxInFlight, TLS: tlsCfg}, in, b.Clock, b.Logger, b.Registry)
	switch {
	case b.Config.Shadow:
		// Shadow mode writes nothing to the shared MySQL, and the compat entry's only effect
		// is an inbox row.
		b.Logger.Warn("SHADOW MODE: compat HTTP entry not served (it would write to the shared inbox)")
	case errors.Is(err, compat.ErrNoToken) || b.Config.HTTP.Addr == "":
		b.Logger.Warn("compat HTTP entry not served: set MSGX_HTTP_TOKEN (and MSGX_HTTP_ADDR) to accept POST "+compat.Path,
			"http_addr", b.Config.HTTP.Addr)
	case err != nil:
		return err
	default:
		actors = append(actors, func(ctx context.Context) error { return h.Run(ctx, b.Config.HTTP.Addr) })
	}
	return b.Run(ctx, actors...)
}
