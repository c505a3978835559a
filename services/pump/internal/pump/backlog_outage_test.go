package pump_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/testlog"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// switchExecutor is a PostgreSQL that stops answering while down is set.
type switchExecutor struct {
	db.Executor
	down  atomic.Bool
	calls atomic.Int32
}

var errPGDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (s *switchExecutor) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	s.calls.Add(1)
	if s.down.Load() {
		return errRow{errPGDown}
	}
	return s.Executor.QueryRow(ctx, sql, args...)
}

func (s *switchExecutor) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return nil, errPGDown
	}
	return s.Executor.Query(ctx, sql, args...)
}

func (s *switchExecutor) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return pgconn.CommandTag{}, errPGDown
	}
	return s.Executor.Exec(ctx, sql, args...)
}

// The backlog figures, refreshed in every instance, log a PostgreSQL outage once when they
// become unavailable and once when they are back, not at every refresh (R-START-1).
func TestBacklogLogsAnOutageOnce(t *testing.T) {
	e := newEnv(t)
	tel, err := telemetry.New(context.Background(), "pump-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	var logs testlog.Buffer
	cfg := pump.FromConfig(e.cfg)
	cfg.BacklogInterval = 10 * time.Millisecond
	p := pump.New(cfg, pump.NewReadAhead(e.inbox, slog.New(slog.DiscardHandler)), e.proj, processor.Route(flight.DayRule{Zone: zone}),
		e.clock(), slog.New(slog.NewTextHandler(&logs, nil)), tel, prometheus.NewRegistry())
	q := &switchExecutor{Executor: e.pg.Pool}
	q.down.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.RunBacklog(ctx, q) }()
	defer func() {
		cancel()
		<-done
	}()
	testwait.For(t, 10*time.Second, "ten refreshes during the outage", func() bool { return q.calls.Load() >= 10 })
	if n := strings.Count(logs.String(), "backlog figures unavailable"); n != 1 {
		t.Errorf("%d lines for one outage of %d refreshes, want 1:\n%s", n, q.calls.Load(), logs.String())
	}
	q.down.Store(false)
	testwait.For(t, 10*time.Second, "the figures back", func() bool {
		return strings.Contains(logs.String(), "backlog figures available again")
	})
	before := q.calls.Load()
	testwait.For(t, 10*time.Second, "ten refreshes after the outage", func() bool { return q.calls.Load() >= before+10 })
	if n := strings.Count(logs.String(), "backlog figures available again"); n != 1 {
		t.Errorf("%d lines for the end of the outage, want 1:\n%s", n, logs.String())
	}
}
