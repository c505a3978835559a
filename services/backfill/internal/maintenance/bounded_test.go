package maintenance

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/testkit/benchdata"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
)

// timedSession counts the transactions a sweep runs on its session and keeps the longest.
type timedSession struct {
	*pgtest.Session
	mu      sync.Mutex
	txs     int
	longest time.Duration
}

func (s *timedSession) Tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	began := time.Now()
	err := s.Session.Tx(ctx, fn)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txs++
	s.longest = max(s.longest, time.Since(began))
	return err
}

// TestSweepOfManyRowsTakesBoundedBatches sweeps the expired rows of production-shaped tables
// (benchdata at test scale: tens of thousands expired in proc_state and msg_event): the sweep
// must remove them all, in at least one transaction per Batch rows, none of them near the
// statement timeout.
func TestSweepOfManyRowsTakesBoundedBatches(t *testing.T) {
	d := benchdata.New(t, benchdata.Test)
	ctx := t.Context()
	const batch = 5000
	r := redistest.New(t)
	now := time.Now()
	cfg := FromConfig(config.Default())
	cfg.Batch = batch
	cfg.Pause = time.Millisecond
	cfg.ProcRetention = 24 * time.Hour
	cfg.EventRetention = 6 * 24 * time.Hour
	cfg.SnapLogRetention = 90 * 24 * time.Hour
	cfg.ReqRetention = 30 * 24 * time.Hour
	cfg.JobRetention = 30 * 24 * time.Hour
	// A retention longer than the data keeps the history sweep out of this count.
	cfg.History = flightstore.HistoryPolicy{Retention: 365 * 24 * time.Hour, QuietPeriod: 365 * 24 * time.Hour, Zone: time.UTC}
	c := New(cfg, NewRedisForgetter(r.Client, r.Prefix, 2*time.Second), testclock.New(now),
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())

	expired := func() (proc, events int64) {
		t.Helper()
		if err := d.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM proc_state WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NOT NULL AND updated_at < $1),
			(SELECT count(*) FROM msg_event WHERE state = 'SENT' AND sent_at < $2)`,
			now.Add(-24*time.Hour), now.Add(-6*24*time.Hour)).Scan(&proc, &events); err != nil {
			t.Fatal(err)
		}
		return proc, events
	}
	proc, events := expired()
	if proc < 10*batch || events < 2*batch {
		t.Fatalf("the generated data has %d expired processing records and %d expired events: too few to need batches", proc, events)
	}
	s := &timedSession{Session: d.Session(t)}
	began := time.Now()
	c.RunOnce(ctx, s)
	took := time.Since(began)
	if p, e := expired(); p != 0 || e != 0 {
		t.Errorf("after the sweep %d expired processing records and %d expired events remain", p, e)
	}
	// Each full batch is followed by one more; every statement deletes at most batch rows.
	least := int((proc+batch-1)/batch + (events+batch-1)/batch)
	if s.txs < least {
		t.Errorf("%d + %d rows deleted in %d transactions: some statement deleted more than %d", proc, events, s.txs, batch)
	}
	if s.longest > 2*time.Second {
		t.Errorf("the longest sweep transaction took %s: a batch of %d holds its locks too long", s.longest, batch)
	}
	t.Logf("swept %d + %d rows in %d transactions in %s; longest transaction %s", proc, events, s.txs, took.Round(time.Millisecond), s.longest.Round(time.Millisecond))
}
