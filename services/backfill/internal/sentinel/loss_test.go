package sentinel_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/services/backfill/internal/sentinel"
	"github.com/msgexchange/msgexchange/testkit/testclock"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

func (e *env) sentinelKey(t *testing.T) (string, bool) {
	t.Helper()
	v, ok, err := e.proj.Sentinel(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}

// A Redis without the projection's sentinel key (a first start, then a FLUSHDB) gets a rebuild
// of the whole projection requested by the backfill, recorded as a job with its requester, and
// the key; once the job ran, Redis holds PostgreSQL's projection again, and with the key
// present nothing more is requested. The loss is logged once, not a line per missing flight.
func TestLostProjectionIsRebuiltOnItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	e.s = sentinel.New(configWith(2), e.proj, testclock.New(t0), slog.New(slog.NewTextHandler(&logs, nil)), reg)
	e.save(t, mk("L1", 1, map[string]string{"FLNO": "CA101"}), mk("L2", 3, nil), mk("L3", 2, nil))
	for round, lose := range []func() error{
		func() error { return nil }, // never had the key
		func() error { return e.rd.Client.FlushDB(t.Context()).Err() },
	} {
		if err := lose(); err != nil {
			t.Fatal(err)
		}
		id, err := e.s.CheckLoss(t.Context(), e.sess)
		if err != nil || id == 0 {
			t.Fatalf("round %d: CheckLoss = %d, %v; want a job", round, id, err)
		}
		if v, ok := e.sentinelKey(t); !ok || !strings.Contains(v, "rebuild ") {
			t.Fatalf("round %d: sentinel key %q, %v after the request", round, v, ok)
		}
		j := e.runJob(t, e.s, id)
		if !j.All() || j.DryRun || j.RequestedBy != sentinel.LossRequester || j.Comment == "" {
			t.Fatalf("round %d: the job %+v is not the backfill's rebuild of the whole projection", round, j)
		}
		if res := e.check(t); res.Found() != 0 || res.Checked != 3 {
			t.Fatalf("round %d: after the rebuild a check found %v", round, res)
		}
		if again, err := e.s.CheckLoss(t.Context(), e.sess); err != nil || again != 0 {
			t.Fatalf("round %d: with the key present CheckLoss = %d, %v", round, again, err)
		}
	}
	if n := plainCounter(t, reg, "msgx_projection_lost_total"); n != 2 {
		t.Fatalf("msgx_projection_lost_total = %v, want 2", n)
	}
	if out := logs.String(); strings.Count(out, "sentinel key is missing") != 2 || strings.Contains(out, "projection drifted") {
		t.Fatalf("the loss is not logged once per loss, without a line per flight:\n%s", out)
	}
}

// With another job open, CheckLoss requests none: it takes over a pending rebuild of the whole
// projection (every page still to come) by writing the key, and leaves the key absent while a
// job that has begun or covers less runs, so that the loss is found again once it ended.
func TestLostProjectionWithAnOpenJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		spec    jobs.RebuildSpec
		started bool
		takes   bool
	}{
		{"a pending rebuild of everything", jobs.RebuildSpec{}, false, true},
		{"a rebuild of everything already running", jobs.RebuildSpec{}, true, false},
		{"a dry run", jobs.RebuildSpec{DryRun: true}, false, false},
		{"some FLIDs", jobs.RebuildSpec{FLIDs: []string{"O1"}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 1)
			e.save(t, mk("O1", 1, nil), mk("O2", 1, nil))
			if err := e.rd.Client.FlushDB(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			open := e.request(t, tc.spec)
			if tc.started {
				if _, _, err := e.s.Step(t.Context(), e.sess); err != nil {
					t.Fatal(err)
				}
			}
			id, err := e.s.CheckLoss(t.Context(), e.sess)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := e.sentinelKey(t); ok != tc.takes || (id == open.ID) != tc.takes || (id != 0 && id != open.ID) {
				t.Fatalf("CheckLoss = %d with job %d open, key written %v; want taken over %v", id, open.ID, ok, tc.takes)
			}
			e.runJob(t, e.s, open.ID)
			if tc.takes {
				return
			}
			// The job ended with the key still absent: the loss is found now.
			next, err := e.s.CheckLoss(t.Context(), e.sess)
			if err != nil || next == 0 || next == open.ID {
				t.Fatalf("after job %d ended CheckLoss = %d, %v", open.ID, next, err)
			}
			e.runJob(t, e.s, next)
			if res := e.check(t); res.Found() != 0 {
				t.Fatalf("after the rebuild a check found %v", res)
			}
		})
	}
}

// A Redis that does not answer decides nothing: no job is requested, and the loop, started
// with the automatic rebuild on, rebuilds the projection flushed under it once Redis answers.
func TestLostProjectionThroughRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	e.save(t, mk("R1", 1, nil), mk("R2", 2, nil), mk("R3", 1, nil))
	// The service's client options: the call's deadline bounds the wait (pkg/service).
	opts, err := redis.ParseURL(e.rd.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled, opts.MaxRetries = true, -1
	client := redis.NewClient(opts)
	defer client.Close()
	if err := e.rd.Client.Do(t.Context(), "CLIENT", "PAUSE", "1500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	paused := projection.New(client, e.rd.Prefix, 300*time.Millisecond)
	s := sentinel.New(configWith(2), paused, testclock.New(t0), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if id, err := s.CheckLoss(t.Context(), e.sess); err == nil || id != 0 {
		t.Fatalf("CheckLoss with Redis paused = %d, %v; want an error and no job", id, err)
	}
	if list, err := jobs.Rebuilds.List(t.Context(), e.pg.Pool, 0, 10); err != nil || len(list) != 0 {
		t.Fatalf("jobs after a failed look: %v, %v", list, err)
	}
	if err := e.rd.Client.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	run := sentinel.New(withLossRebuild(configWith(2), 50*time.Millisecond), e.proj, testclock.New(t0),
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run.Run(ctx, e.sess) }()
	stop := func() {
		cancel()
		<-done
	}
	defer func() {
		if ctx.Err() == nil {
			stop()
		}
	}()
	jobsDone := func(n int) func() (bool, string) {
		return func() (bool, string) {
			list, err := jobs.Rebuilds.List(t.Context(), e.pg.Pool, 0, 10)
			return err == nil && len(list) == n && list[0].State == jobs.StateDone, fmt.Sprintf("%+v %v", list, err)
		}
	}
	// The projection the flights were saved with has no sentinel key yet: a first start.
	testwait.ForState(t, 10*time.Second, "the first rebuild ended", jobsDone(1))
	if err := e.rd.Client.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	testwait.ForState(t, 10*time.Second, "the rebuild after the flush ended", jobsDone(2))
	stop()
	// Stopping the loop may close its connection mid-statement: the check gets its own.
	e.sess = e.pg.Session(t)
	if res := e.check(t); res.Found() != 0 {
		t.Fatalf("after the rebuilds a check found %v", res)
	}
}

// withLossRebuild is c rebuilding a lost projection on its own, looking every poll.
func withLossRebuild(c sentinel.Config, poll time.Duration) sentinel.Config {
	c.RebuildOnLoss, c.JobPoll = true, poll
	return c
}
