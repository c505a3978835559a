package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// R-INGEST-13: the wait after a round follows what the round did.
func TestWait(t *testing.T) {
	t.Parallel()
	cfg := Config{PollInterval: time.Second, BusyPollInterval: 100 * time.Millisecond}
	for _, tt := range []struct {
		name     string
		cfg      Config
		progress Progress
		want     time.Duration
	}{
		{"quiet inbox: the poll interval", cfg, Progress{}, time.Second},
		{"W moved: the busy interval", cfg, Progress{Moved: true}, 100 * time.Millisecond},
		{"a full batch: at once", cfg, Progress{Moved: true, Full: true}, 0},
		{"a busy interval above the poll interval is the poll interval",
			Config{PollInterval: 100 * time.Millisecond, BusyPollInterval: time.Second}, Progress{Moved: true}, 100 * time.Millisecond},
		{"no busy interval: the poll interval", Config{PollInterval: time.Second}, Progress{Moved: true}, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.wait(tt.progress); got != tt.want {
				t.Errorf("wait(%+v) = %s, want %s", tt.progress, got, tt.want)
			}
		})
	}
}

// R-INGEST-13: a round reports W moving, a full batch, and nothing for rows held behind a
// young hole, on the real inbox.
func TestRoundReportsItsProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.ClaimBatch = 2
	p := e.poller()
	progress := func(want Progress) {
		t.Helper()
		got, err := p.Round(t.Context(), e.tx)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("progress = %+v, want %+v", got, want)
		}
	}
	progress(Progress{})
	e.insert(e.my.Admin)
	progress(Progress{Moved: true})
	progress(Progress{})
	e.insert(e.my.Admin)
	e.insert(e.my.Admin)
	progress(Progress{Moved: true, Full: true})
	_, held := e.hold()
	e.insert(e.my.Admin)
	progress(Progress{})
	e.wantW(held - 1)
}

// R-INGEST-13 through Run: a round that moved W is followed by one after the busy interval
// (50 ms; the test allows 10 s for a loaded machine, far below the hour of the poll), and
// once that one found nothing the inbox is quiet and the next waits the poll interval (an
// hour here, so a third round within the test would be a quiet inbox read too early).
func TestBusyRoundIsFollowedSoonAndAQuietOneLate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.PollInterval, e.cfg.BusyPollInterval = time.Hour, 50*time.Millisecond
	reg := prometheus.NewRegistry()
	p := New(e.cfg, e.in, clock.Real{}, slog.New(slog.NewTextHandler(e.logs, nil)), e.tel, reg)
	rounds := func() uint64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "msgx_ingest_round_duration_seconds" {
				return mf.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		return 0
	}
	a := e.insert(e.my.Admin)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, e.tx) }()
	defer func() {
		cancel()
		<-done
	}()
	testwait.ForState(t, 10*time.Second, "two rounds: the one that enqueued, the busy one after it", func() (bool, string) {
		n := rounds()
		return n >= 2, fmt.Sprint(n)
	})
	e.wantQueued(a)
	time.Sleep(500 * time.Millisecond)
	if n := rounds(); n != 2 {
		t.Errorf("%d rounds after a round that found nothing, want 2: a quiet inbox waits the poll interval", n)
	}
}
