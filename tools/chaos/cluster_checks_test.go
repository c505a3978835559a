package chaos

import (
	"slices"
	"strings"
	"testing"
)

// onPartition places records of the given event ids at the given offsets of partition 1.
func onPartition(ids []int64, offsets ...int64) []received {
	out := make([]received, len(ids))
	for i, id := range ids {
		out[i] = received{eventID: id, version: id, partition: 1, offset: offsets[i]}
	}
	return out
}

func TestCrossings(t *testing.T) {
	recs := onPartition([]int64{1, 2, 3}, 10, 20, 30)
	for _, tt := range []struct {
		bounds map[int32][]int64
		want   int
	}{
		{map[int32][]int64{1: {15}}, 1},
		{map[int32][]int64{1: {15, 30}}, 2},      // an election at the last record's offset: it was written after
		{map[int32][]int64{1: {10, 31}}, 0},      // before the first record, after the last
		{map[int32][]int64{0: {15}, 2: {25}}, 0}, // other partitions' elections
		{map[int32][]int64{1: {11, 12, 13}}, 3},  // three elections between two records
		{map[int32][]int64{}, 0},
	} {
		if got := crossings(recs, tt.bounds); got != tt.want {
			t.Errorf("bounds %v: %d crossings, want %d", tt.bounds, got, tt.want)
		}
	}
}

// elected is a cluster run whose flight F1 has three change events on KAFKA:msg, with an
// election of its partition between the first and the second record.
func elected() (evidence, *ClusterReport, map[int32][]int64) {
	ev := healthy()
	ev.chaos.events = []event{
		{ID: 10, FLID: "F1", Target: "KAFKA:msg", Version: 1, State: "SENT"},
		{ID: 12, FLID: "F1", Target: "KAFKA:msg", Version: 2, State: "SENT"},
		{ID: 13, FLID: "F1", Target: "KAFKA:msg", Version: 3, State: "SENT"},
	}
	ev.msg = map[string][]received{"F1": onPartition([]int64{10, 12, 13}, 4, 9, 11)}
	rep := &ClusterReport{Brokers: 3, Elections: map[string]int{"msg": 2, transactionState: 1},
		Replication: []string{"msg: 3 partitions × 3 replicas, min.insync.replicas 2"}}
	return ev, rep, map[int32][]int64{1: {6}}
}

func TestCheckElections(t *testing.T) {
	ev, rep, bounds := elected()
	if c := checkElections(ev, rep, true, bounds); !c.Pass || !strings.Contains(c.Detail, "1 FLIDs with KAFKA:msg records on both sides") {
		t.Fatalf("an in-order run across an election: %v %s", c.Pass, c.Detail)
	}
	defects := map[string]func(ev *evidence, rep *ClusterReport, replicated *bool, bounds map[int32][]int64){
		"out of order": func(ev *evidence, _ *ClusterReport, _ *bool, _ map[int32][]int64) {
			ev.msg["F1"] = onPartition([]int64{10, 13, 12}, 4, 9, 11)
		},
		"lost": func(ev *evidence, _ *ClusterReport, _ *bool, _ map[int32][]int64) {
			ev.msg["F1"] = onPartition([]int64{10, 13}, 4, 9)
		},
		"no election": func(_ *evidence, rep *ClusterReport, _ *bool, _ map[int32][]int64) {
			rep.Elections = map[string]int{"msg": 0}
		},
		"no FLID across one": func(_ *evidence, _ *ClusterReport, _ *bool, bounds map[int32][]int64) { bounds[1] = []int64{20} },
		"not replicated":     func(_ *evidence, _ *ClusterReport, replicated *bool, _ map[int32][]int64) { *replicated = false },
	}
	for name, spoil := range defects {
		ev, rep, bounds := elected()
		replicated := true
		spoil(&ev, rep, &replicated, bounds)
		if c := checkElections(ev, rep, replicated, bounds); c.Pass {
			t.Errorf("%s passed: %s", name, c.Detail)
		}
	}
}

// On a cluster the broker's kill gives way to the leader's and the coordinator's, and both wait
// out the long outage of the brokers as the broker's kill does.
func TestClusterKinds(t *testing.T) {
	in := &injector{counts: map[Kind]*tally{}, long: map[Dep]bool{}}
	if !slices.Equal(in.kinds(), ShortKinds) {
		t.Errorf("one broker: kinds %v, want %v", in.kinds(), ShortKinds)
	}
	in.kc = &clusterFaults{}
	kinds := in.kinds()
	if slices.Contains(kinds, BrokerKill) || !slices.Contains(kinds, LeaderKill) || !slices.Contains(kinds, CoordinatorKill) ||
		len(kinds) != len(ShortKinds)+1 {
		t.Errorf("cluster: kinds %v", kinds)
	}
	in.setLong(DepKafka, true)
	for _, k := range []Kind{LeaderKill, CoordinatorKill} {
		if !in.blocked(k) || weights[k] == 0 {
			t.Errorf("%s: blocked %v during the brokers' outage, weight %d", k, in.blocked(k), weights[k])
		}
	}
}

func TestClusterFromEnv(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, "1": true, "false": false} {
		c, err := FromEnv(func(k string) string { return map[string]string{EnvCluster: v}[k] })
		if err != nil || c.Cluster != want {
			t.Errorf("%s=%q: cluster %v, %v; want %v", EnvCluster, v, c.Cluster, err, want)
		}
	}
	if _, err := FromEnv(func(k string) string { return map[string]string{EnvCluster: "three"}[k] }); err == nil {
		t.Errorf("%s=three accepted", EnvCluster)
	}
}
