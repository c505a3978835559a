package ctl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

func statusOf(unfinished int64, rate float64) *controlv1.GetStatusResponse {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lag, max := int64(4), int64(104)
	st := &controlv1.GetStatusResponse{
		ObservedAt: timestamppb.New(t0), ServedBy: "control-a", ServedByActive: true,
		Roles: []*controlv1.RoleStatus{
			{Role: "ingest", Held: true, Active: true, Instance: "ingest-a", Since: timestamppb.New(t0)},
			{Role: "pump", Held: true, Active: true, Instance: "pump-a", Since: timestamppb.New(t0),
				Blocked: &controlv1.Blocked{Dependency: "redis", Duration: durationpb.New(80 * time.Second), Probes: 12, MsgId: 77,
					LastError: "dial tcp: connection refused"}},
			{Role: "dispatcher"},
		},
		Discovery: &controlv1.Discovery{Watermark: 100, InboxMaxId: &max, Lag: &lag, PermanentHoleRanges: 2, PermanentHoleIds: 3},
		Backlog:   &controlv1.Backlog{Unfinished: unfinished, FinishedPerSecond: rate},
		Backfill:  &controlv1.Backfill{Pending: 5},
		Outbox: []*controlv1.OutboxTarget{{Target: "KAFKA:msg", Pending: 9, Dead: 2},
			{Target: "KAFKA:schd"}},
		ByState: []*controlv1.StateCount{{State: controlv1.MessageState_MESSAGE_STATE_PENDING, Count: unfinished},
			{State: controlv1.MessageState_MESSAGE_STATE_SUCCEEDED, Count: 1_008_385, Estimated: true}},
	}
	if rate > 0 {
		st.Backlog.EstimatedDrain = durationpb.New(time.Duration(float64(unfinished)/rate) * time.Second)
	}
	return st
}

func TestWatchScreen(t *testing.T) {
	t.Parallel()
	var ws watchState
	now := time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC)
	first := renderScreen(statusOf(1000, 0), nil, &ws, 2*time.Second, now)
	for _, want := range []string{
		"every 2s", "ingest-a", "BLOCKED on redis for 1m20s (12 probes, at message 77): dial tcp: connection refused",
		"dispatcher  -  not held", "watermark 100   inbox max 104   lag 4", "permanent holes 2 (3 ids)",
		"unfinished 1000\n", "estimated drain unknown", "KAFKA:msg   pending 9   dead 2", "requeue-events",
		"STATES  PENDING 1000 SUCCEEDED ~1008385", // an estimated count is marked
	} {
		if !strings.Contains(first, want) {
			t.Errorf("first screen lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "[#") {
		t.Errorf("a bar before anything drained:\n%s", first)
	}
	// The backlog drains: a bar of the share finished since the peak, the rate and the estimate.
	second := renderScreen(statusOf(250, 50), nil, &ws, 2*time.Second, now)
	if !strings.Contains(second, "unfinished 250  ["+strings.Repeat("#", 23)+strings.Repeat(".", 7)+"]  75% of 1000 drained") ||
		!strings.Contains(second, "rate 50.0/s (last 5m)   estimated drain 5s") {
		t.Errorf("draining screen:\n%s", second)
	}
	// A failed call keeps the last answer on the screen, marked.
	third := renderScreen(nil, errors.New("GetStatus: Unavailable: connection refused"), &ws, 2*time.Second, now)
	if !strings.Contains(third, "!! the last call failed: GetStatus: Unavailable") || !strings.Contains(third, "unfinished 250") {
		t.Errorf("screen after a failed call:\n%s", third)
	}
	// Drained: the next backlog starts a new bar.
	renderScreen(statusOf(0, 50), nil, &ws, 2*time.Second, now)
	if got := renderScreen(statusOf(10, 50), nil, &ws, 2*time.Second, now); strings.Contains(got, "drained") {
		t.Errorf("a new backlog shows the old bar:\n%s", got)
	}
}

func TestWatchLine(t *testing.T) {
	t.Parallel()
	var ws watchState
	first := renderLine(statusOf(1000, 0), nil, &ws)
	want := "2026-03-01T12:00:00Z W=100 lag=4 hole_age=0s holes=2/3 open_holes=0 waiting=0 oldest_waiting=0s unfinished=1000 rate=0.0/s drain=unknown backfill=5/0" +
		" outbox=KAFKA:msg:9/2,KAFKA:schd:0/0 roles=ingest:ingest-a,pump:pump-a,dispatcher:- blocked=pump:redis\n"
	if first != want {
		t.Errorf("line\n%q, want\n%q", first, want)
	}
	if got := renderLine(statusOf(500, 25), nil, &ws); !strings.Contains(got, " unfinished=500 drained=50% rate=25.0/s drain=20s ") {
		t.Errorf("draining line %q", got)
	}
	if got := renderLine(nil, errors.New("boom"), &ws); !strings.HasSuffix(got, ` error="boom"`+"\n") || strings.Contains(got, "\x1b") {
		t.Errorf("error line %q", got)
	}
}

// Rows held behind holes are not unfinished, yet they are a backlog: the watch shows them,
// each hole's age, and no "estimated drain 0s".
func TestWatchShowsRowsWaitingForDiscovery(t *testing.T) {
	t.Parallel()
	st := statusOf(0, 0)
	t0 := st.GetObservedAt().AsTime()
	st.Discovery.WaitingRows, st.Discovery.OpenHoleRanges, st.Discovery.OpenHoleIds = 553, 2, 2
	st.Discovery.OldestWaitingAge = durationpb.New(4 * time.Minute)
	st.Discovery.NextReleaseAt = timestamppb.New(t0.Add(time.Minute))
	st.Discovery.OpenHoles = []*controlv1.OpenHole{
		{FirstId: 151, LastId: 151, Age: durationpb.New(4 * time.Minute)},
		{FirstId: 226, LastId: 227, Age: durationpb.New(3 * time.Minute)},
	}
	st.Discovery.CommitDelay = &controlv1.CommitDelay{Fills: 40, Max: durationpb.New(2 * time.Second), P99Bound: durationpb.New(time.Second)}
	st.Discovery.MaxCommitDelay = durationpb.New(5 * time.Minute)
	st.Backlog.WaitingDiscovery = 553
	var ws watchState
	screen := renderScreen(st, nil, &ws, 2*time.Second, t0)
	for _, want := range []string{
		"waiting beyond W 553 rows, oldest seen 4m0s ago   open holes 2 (2 ids)   next release 2026-03-01T12:01:00Z",
		"holes 151:4m0s 226-227:3m0s",
		"commit delay measured 40 fills   max 2s   p99 ≤ 1s   (max-commit-delay 5m0s)",
		"unfinished 0   + 553 waiting for discovery",
		"estimated drain unknown",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	if line := renderLine(st, nil, &ws); !strings.Contains(line, "open_holes=2 waiting=553 oldest_waiting=4m0s unfinished=0") ||
		!strings.Contains(line, "drain=unknown") {
		t.Errorf("line: %s", line)
	}
}
