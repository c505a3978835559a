package api

import (
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// The enums convert by name; these fail when the database's words and the .proto drift apart.
func TestEnumsCoverTheSchema(t *testing.T) {
	t.Parallel()
	for _, s := range []queue.State{queue.Pending, queue.Failed, queue.Succeeded, queue.Skipped, queue.Dead} {
		if messageState(s) == controlv1.MessageState_MESSAGE_STATE_UNSPECIFIED {
			t.Errorf("state %s has no MessageState", s)
		}
	}
	for _, c := range []queue.ErrorClass{queue.Malformed, queue.Protocol, queue.CodecError, queue.Unsupported, queue.Infra, queue.Exhausted} {
		if errorClass(c) == controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
			t.Errorf("error class %s has no ErrorClass", c)
		}
	}
	// The reasons of proc_state's CHECK constraint (migrations/sql/00001_pipeline.sql).
	for _, r := range []string{"MISSING_ROW", "TRANSIENT_DEADLINE"} {
		if abandonReason(r) == controlv1.AbandonReason_ABANDON_REASON_UNSPECIFIED {
			t.Errorf("abandon reason %s has no AbandonReason", r)
		}
	}
	if got := messageState("NOT_A_STATE"); got != controlv1.MessageState_MESSAGE_STATE_UNSPECIFIED {
		t.Errorf("unknown state converts to %v, want UNSPECIFIED", got)
	}
	// Every state appears in by_state, so the status table never loses a row.
	if got := len(stateCounts(nil, nil)); got != 5 {
		t.Errorf("stateCounts lists %d states, want 5", got)
	}
	// An estimated bulk state keeps its flag; the others read as counted.
	for _, c := range stateCounts(map[queue.State]int64{queue.Succeeded: 70_000}, map[queue.State]bool{queue.Succeeded: true}) {
		want := c.GetState() == controlv1.MessageState_MESSAGE_STATE_SUCCEEDED
		if c.GetEstimated() != want {
			t.Errorf("%s estimated = %t, want %t", c.GetState(), c.GetEstimated(), want)
		}
	}
}

func TestUnknownClassIsCountedNotDropped(t *testing.T) {
	t.Parallel()
	got := errorClassCounts(map[queue.ErrorClass]int64{queue.Infra: 2, "NEW_CLASS": 3})
	if len(got) != 2 || got[0].GetErrorClass() != controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED || got[0].GetCount() != 3 ||
		got[1].GetErrorClass() != controlv1.ErrorClass_ERROR_CLASS_INFRA || got[1].GetCount() != 2 {
		t.Errorf("errorClassCounts = %v, want UNSPECIFIED 3, INFRA 2", got)
	}
}

// The API refuses a replay of a class the store would never replay, and the other way round;
// the two whitelists must stay one.
func TestReplayWhitelistsAgree(t *testing.T) {
	t.Parallel()
	for _, c := range []queue.ErrorClass{queue.Malformed, queue.Protocol, queue.CodecError, queue.Unsupported, queue.Infra, queue.Exhausted} {
		if api, store := controlv1.Replayable(errorClass(c)), slices.Contains(queue.Replayable(), c); api != store {
			t.Errorf("class %s: the API says replayable=%v, queue says %v", c, api, store)
		}
	}
}

func TestSeedModesCoverTheAPI(t *testing.T) {
	t.Parallel()
	values := controlv1.SeedMode_SEED_MODE_UNSPECIFIED.Descriptor().Values()
	for i := range values.Len() {
		m := controlv1.SeedMode(values.Get(i).Number())
		if _, ok := seedModes[m]; !ok && m != controlv1.SeedMode_SEED_MODE_UNSPECIFIED {
			t.Errorf("SeedMode %s has no cursor mode", m)
		}
	}
}

func TestPageToken(t *testing.T) {
	t.Parallel()
	for _, after := range []int64{1, 99, 1 << 40} {
		got, err := decodePageToken(encodePageToken(after))
		if err != nil || got != after {
			t.Errorf("round trip of %d = %d, %v", after, got, err)
		}
	}
	for _, bad := range []string{"x", encodePageToken(0), "djI6MTA"} {
		if _, err := decodePageToken(bad); err == nil {
			t.Errorf("decodePageToken(%q) accepted a token this API never returns", bad)
		}
	}
}

// A blocked holder is shown with its outage only while it is alive: the mark of a holder that
// died blocked says nothing about the role now.
func TestRoleStatusBlocked(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := &leader.Blocked{Dependency: "redis", Since: now.Add(-90 * time.Second), LastError: "i/o timeout", MsgID: 42, Probes: 3}
	for _, c := range []struct {
		name   string
		holder leader.Holder
		want   bool
	}{
		{"active and blocked", leader.Holder{Role: "pump", Active: true, Blocked: b}, true},
		{"dead holder, blocked mark left", leader.Holder{Role: "pump", Active: false, Blocked: b}, false},
		{"active, working", leader.Holder{Role: "pump", Active: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got *controlv1.RoleStatus
			for _, r := range roleStatus([]leader.Holder{c.holder}, now) {
				if r.Role == "pump" {
					got = r
				}
			}
			if (got.GetBlocked() != nil) != c.want {
				t.Fatalf("blocked = %v, want set: %v", got.GetBlocked(), c.want)
			}
			if c.want {
				bl := got.GetBlocked()
				if bl.Dependency != "redis" || bl.MsgId != 42 || bl.Probes != 3 || bl.Duration.AsDuration() != 90*time.Second {
					t.Errorf("blocked %+v", bl)
				}
			}
		})
	}
}

// The API's violation kinds are the cursor's words (validation checks the API's, ingest
// records the cursor's), and every resolution of the API has an action.
func TestContractWordsAgree(t *testing.T) {
	t.Parallel()
	if got, want := []string{controlv1.KindInboxBehindWatermark, controlv1.KindMarkedAboveWatermark}, cursor.Kinds(); !slices.Equal(got, want) {
		t.Errorf("API kinds %v, cursor kinds %v", got, want)
	}
	values := controlv1.ContractResolution_CONTRACT_RESOLUTION_UNSPECIFIED.Descriptor().Values()
	for i := range values.Len() {
		v := controlv1.ContractResolution(values.Get(i).Number())
		if _, ok := resolutions[v]; ok == (v == controlv1.ContractResolution_CONTRACT_RESOLUTION_UNSPECIFIED) {
			t.Errorf("resolution %s: mapped %v", v, ok)
		}
	}
}

// The drain estimate counts the rows discovery holds, never ends before the last open
// hole is due, and is unknown, not zero, while nothing finishes.
func TestBacklogCountsRowsWaitingForDiscovery(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	due := now.Add(3 * time.Minute)
	d := &controlv1.Discovery{WaitingRows: 553}
	if b := backlogWithDiscovery(queue.Statistics{}, d, &due, now); b.EstimatedDrain != nil || b.GetWaitingDiscovery() != 553 {
		t.Errorf("no rate: drain %v, waiting %d; want unknown and 553", b.EstimatedDrain, b.GetWaitingDiscovery())
	}
	b := backlogWithDiscovery(queue.Statistics{Backlog: queue.Backlog{Unfinished: 47, FinishedPerSecond: 100}}, d, &due, now)
	if got := b.GetEstimatedDrain().AsDuration(); got != 3*time.Minute {
		t.Errorf("drain = %s, want the last hole's release in 3m (600 rows at 100/s is only 6s)", got)
	}
	b = backlogWithDiscovery(queue.Statistics{Backlog: queue.Backlog{Unfinished: 600, FinishedPerSecond: 1}}, &controlv1.Discovery{}, nil, now)
	if got := b.GetEstimatedDrain().AsDuration(); got != 10*time.Minute {
		t.Errorf("drain = %s, want 600 rows at 1/s", got)
	}
	if b := backlogWithDiscovery(queue.Statistics{}, &controlv1.Discovery{}, nil, now); b.GetEstimatedDrain().AsDuration() != 0 || b.EstimatedDrain == nil {
		t.Errorf("nothing left: drain %v, want 0", b.EstimatedDrain)
	}
}
