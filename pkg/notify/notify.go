// Package notify turns PostgreSQL NOTIFY into wake-ups. A committed enqueue or outbox write
// notifies a channel; the listening service wakes at once instead of waiting for its next
// poll, which remains the fallback when a notification is lost (e.g. while reconnecting).
package notify

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/pgfence"
)

// Listener holds one dedicated connection that LISTENs to some channels.
type Listener struct {
	dsn      string
	channels []string
	logger   *slog.Logger
	wake     chan struct{}
}

// New returns a listener for channels; Run must be running for C to deliver.
func New(dsn string, logger *slog.Logger, channels ...string) *Listener {
	return &Listener{dsn: dsn, channels: channels, logger: logger, wake: make(chan struct{}, 1)}
}

// C delivers at most one pending wake-up; many notifications coalesce into one.
func (l *Listener) C() <-chan struct{} { return l.wake }

// Wake queues a wake-up as a notification would (a local shortcut for the same process).
func (l *Listener) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run listens until ctx ends, reconnecting after failures. Each (re)connection also wakes
// the consumer once, since notifications sent while disconnected are lost. An outage of
// PostgreSQL is logged once when the connection is lost (or cannot be made at start-up) and
// once when it is back, not at every reconnection try (R-START-1).
func (l *Listener) Run(ctx context.Context) error {
	lost := false
	back := func() {
		if lost {
			l.logger.InfoContext(ctx, "notification listener connected again")
			lost = false
		}
	}
	for ctx.Err() == nil {
		if err := l.listen(ctx, back); err != nil && ctx.Err() == nil {
			if !lost {
				l.logger.WarnContext(ctx, "notification listener lost its connection; polling until it is back", "err", err)
				lost = true
			} else {
				l.logger.DebugContext(ctx, "notification listener still cannot connect", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// listen holds one connection until it fails or ctx ends; listening is called once the
// connection LISTENs.
func (l *Listener) listen(ctx context.Context, listening func()) error {
	cfg, err := pgx.ParseConfig(l.dsn)
	if err != nil {
		return err
	}
	// LISTEN on an old primary that came back after a failover would wait for notifications
	// nobody sends there (D-21).
	pgfence.Apply(&cfg.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	for _, ch := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	listening()
	l.Wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		l.Wake()
	}
}
