package chaos

import (
	"strings"
	"testing"
)

// The drill's own checks must be able to fail: each is fed an end state the runbook gives and
// then the same with the defect it exists to catch.

// restoredEvidence is a FLID published at v1..v3 before the restore, whose last change the
// restore took back and resume published again above the floor, at v4.
func restoredEvidence() evidence {
	row := func(v string) string {
		return `{"flid":"F1","state":"ACTIVE","state_version":` + v + `,"last_msg_id":3}`
	}
	ev := evidence{
		chaos: &snapshot{outcomes: map[int64]outcome{}, tables: map[string][]string{"flight_schd": {row("4")}}},
		clean: &snapshot{outcomes: map[int64]outcome{}, tables: map[string][]string{"flight_schd": {row("3")}}},
		msg:   map[string][]received{"F1": {{eventID: 1, version: 1}, {eventID: 2, version: 2}, {eventID: 3, version: 3}, {eventID: 4, version: 4}}},
		schd:  map[string][]received{"F1": {{eventID: 10, version: 3}, {eventID: 11, version: 4}}},
	}
	for i, v := range []int64{1, 2, 4} {
		ev.chaos.events = append(ev.chaos.events, event{ID: int64(i + 1), FLID: "F1", Target: "KAFKA:msg", Type: "UPSERT", Version: v, MsgID: int64(i + 1), Payload: `{"STATE_VERSION":1}`})
	}
	ev.chaos.events[2].ID = 4
	for i, v := range []int64{1, 2, 3} {
		ev.clean.events = append(ev.clean.events, event{ID: int64(i + 1), FLID: "F1", Target: "KAFKA:msg", Type: "UPSERT", Version: v, MsgID: int64(i + 1), Payload: `{"STATE_VERSION":1}`})
	}
	return ev
}

func TestRestoredKafkaCheck(t *testing.T) {
	if c := checkRestoredKafka(restoredEvidence()); !c.Pass {
		t.Fatalf("the runbook's end state failed: %s", c.Detail)
	}
	for name, tc := range map[string]struct {
		mutate func(*evidence)
		want   string
	}{
		// Without the floor the re-processed change goes out at v3 after v3 and v4 were held.
		"a version below one received": {func(ev *evidence) {
			ev.msg["F1"] = append(ev.msg["F1"], received{eventID: 5, version: 3})
		}, "version 3 (event 5) after 4"},
		"an outbox event never received":         {func(ev *evidence) { ev.msg["F1"] = ev.msg["F1"][:3] }, "never received"},
		"the last schd record is not the latest": {func(ev *evidence) { ev.schd["F1"] = ev.schd["F1"][:1] }, "last record v3"},
	} {
		ev := restoredEvidence()
		tc.mutate(&ev)
		if c := checkRestoredKafka(ev); c.Pass || !strings.Contains(c.Detail, tc.want) {
			t.Errorf("%s: pass %t, %s; want a failure naming %q", name, c.Pass, c.Detail, tc.want)
		}
	}
	ev := restoredEvidence()
	ev.msg["F1"] = append(ev.msg["F1"], received{eventID: 3, version: 3})
	if c := checkRestoredKafka(ev); !c.Pass {
		t.Errorf("a redelivery of an event already received failed: %s", c.Detail)
	}
}

func TestRestoredCleanCheck(t *testing.T) {
	if c := checkRestoredClean(restoredEvidence()); !c.Pass {
		t.Fatalf("the runbook's end state failed: %s", c.Detail)
	}
	for name, tc := range map[string]struct {
		mutate func(*evidence)
		want   string
	}{
		"a version below the clean run's": {func(ev *evidence) {
			ev.chaos.tables["flight_schd"] = []string{`{"flid":"F1","state":"ACTIVE","state_version":2,"last_msg_id":3}`}
		}, "below the clean run's"},
		"another column differs": {func(ev *evidence) {
			ev.chaos.tables["flight_schd"] = []string{`{"flid":"F1","state":"ACTIVE","state_version":4,"last_msg_id":2}`}
		}, "flight_schd"},
		"an event version below the clean run's": {func(ev *evidence) { ev.chaos.events[1].Version = 1 }, "below the clean run's 2"},
		"an event lost":                          {func(ev *evidence) { ev.chaos.events = ev.chaos.events[:2] }, "event sequences differ"},
	} {
		ev := restoredEvidence()
		tc.mutate(&ev)
		if c := checkRestoredClean(ev); c.Pass || !strings.Contains(c.Detail, tc.want) {
			t.Errorf("%s: pass %t, %s; want a failure naming %q", name, c.Pass, c.Detail, tc.want)
		}
	}
}
