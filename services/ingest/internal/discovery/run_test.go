package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// Run under a real election: the rounds and the late-arrival lookup run on the lock
// connection's session, as in msgx-ingest.
func TestRunUnderTheLeaderSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.LateDetectPeriod = 50 * time.Millisecond
	p := New(e.cfg, e.in, clock.Real{}, slog.New(slog.NewTextHandler(e.logs, nil)), e.tel, prometheus.NewRegistry())
	el := leader.New(leader.Config{DSN: e.pg.DSN, Role: "ingest", Instance: "run-test",
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)), RetryInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- el.Run(ctx, func(ctx context.Context, s *leader.Session) error { return p.Run(ctx, s) })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("elector: %v", err)
		}
	}()

	a := e.insert(e.my.Admin)
	b := e.insert(e.my.Admin)
	testwait.ForState(t, time.Minute, fmt.Sprintf("proc_state to hold [%d %d]", a, b), func() (bool, string) {
		q := e.queued()
		return slices.Equal(q, []int64{a, b}), fmt.Sprint(q)
	})
	e.wantW(b)
}
