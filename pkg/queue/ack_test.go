package queue_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// An acknowledgement takes DEAD rows out of the DEAD count into the acknowledged one, keeps
// the first acknowledgement of a row, refuses rows that are not DEAD, shows on the row and in
// the listing's filter, and is cleared by a replay of a replayable row.
func TestAcknowledgeDead(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx, q := t.Context(), pg.Pool
	replayRow(t, pg, 1, queue.Dead, queue.Malformed, false)
	replayRow(t, pg, 2, queue.Dead, queue.Malformed, true)
	replayRow(t, pg, 3, queue.Dead, queue.Protocol, false)
	replayRow(t, pg, 4, queue.Dead, queue.Exhausted, false)
	replayRow(t, pg, 5, queue.Succeeded, "", true)

	for _, bad := range []queue.AckRequest{
		{Reason: "r"},
		{MsgIDs: []int64{1}, Class: queue.Malformed, Reason: "r"},
		{MsgIDs: []int64{1}},
	} {
		if _, err := queue.AcknowledgeDead(ctx, q, bad, replayNow); !errors.Is(err, queue.ErrAckSelector) {
			t.Errorf("%+v: %v, want ErrAckSelector", bad, err)
		}
	}
	// A dry run names what the call would acknowledge and changes nothing.
	dry, err := queue.AcknowledgeDead(ctx, q, queue.AckRequest{MsgIDs: []int64{1, 2, 5, 99}, By: "op-x", Reason: "r", DryRun: true}, replayNow)
	if err != nil || !slices.Equal(dry.Acknowledged, []int64{1, 2}) || !slices.Equal(dry.NotDead, []int64{5}) || !slices.Equal(dry.NotFound, []int64{99}) || len(dry.Already) != 0 {
		t.Fatalf("dry run by IDs: %+v, %v", dry, err)
	}
	if dry, err = queue.AcknowledgeDead(ctx, q, queue.AckRequest{Class: queue.Malformed, By: "op-x", Reason: "r", DryRun: true, Limit: 1}, replayNow); err != nil ||
		!slices.Equal(dry.Acknowledged, []int64{1}) || !dry.More {
		t.Fatalf("dry run by class, limit 1: %+v, %v", dry, err)
	}
	if m, err := queue.Get(ctx, q, 1); err != nil || m.Ack != nil {
		t.Fatalf("a dry run acknowledged row 1: %+v, %v", m.Ack, err)
	}
	res, err := queue.AcknowledgeDead(ctx, q, queue.AckRequest{Class: queue.Malformed, By: "op-a", Reason: "upstream bug, ticket 7"}, replayNow)
	if err != nil || !slices.Equal(res.Acknowledged, []int64{1, 2}) || res.More {
		t.Fatalf("by class: %+v, %v", res, err)
	}
	res, err = queue.AcknowledgeDead(ctx, q, queue.AckRequest{MsgIDs: []int64{2, 3, 5, 99}, By: "op-b", Reason: "again"}, replayNow.Add(1))
	if err != nil || !slices.Equal(res.Acknowledged, []int64{3}) || !slices.Equal(res.Already, []int64{2}) ||
		!slices.Equal(res.NotDead, []int64{5}) || !slices.Equal(res.NotFound, []int64{99}) {
		t.Fatalf("by IDs: %+v, %v", res, err)
	}
	m, err := queue.Get(ctx, q, 2)
	if err != nil || m.Ack == nil || m.Ack.By != "op-a" || m.Ack.Reason != "upstream bug, ticket 7" || !m.Ack.At.Equal(replayNow) {
		t.Fatalf("row 2 keeps its first acknowledgement: %+v, %v", m.Ack, err)
	}
	s, err := queue.Stats(ctx, q, replayNow)
	if err != nil {
		t.Fatal(err)
	}
	if s.DeadByErrorClass[queue.Malformed] != 0 || s.DeadByErrorClass[queue.Protocol] != 0 || s.DeadByErrorClass[queue.Exhausted] != 1 ||
		s.DeadAcknowledgedByErrorClass[queue.Malformed] != 2 || s.DeadAcknowledgedByErrorClass[queue.Protocol] != 1 {
		t.Fatalf("dead %v, acknowledged %v", s.DeadByErrorClass, s.DeadAcknowledgedByErrorClass)
	}
	yes, no := true, false
	for _, tc := range []struct {
		ack  *bool
		want []int64
	}{{&yes, []int64{1, 2, 3}}, {&no, []int64{4, 5}}, {nil, []int64{1, 2, 3, 4, 5}}} {
		got, err := queue.List(ctx, q, queue.Filter{Acknowledged: tc.ack}, 100)
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []int64
		for _, m := range got {
			gotIDs = append(gotIDs, m.MsgID)
		}
		if !slices.Equal(gotIDs, tc.want) {
			t.Errorf("acknowledged %v: %v, want %v", tc.ack, gotIDs, tc.want)
		}
	}

	// Acknowledged, then replayed: a replayable class may be, and the acknowledgement goes.
	if res, err := queue.AcknowledgeDead(ctx, q, queue.AckRequest{MsgIDs: []int64{4}, By: "op", Reason: "r"}, replayNow); err != nil || len(res.Acknowledged) != 1 {
		t.Fatalf("ack 4: %+v, %v", res, err)
	}
	if r, err := queue.Replay(ctx, q, queue.ReplayRequest{MsgIDs: []int64{4}}, replayNow); err != nil || len(r.Replayed) != 1 {
		t.Fatalf("replay 4: %+v, %v", r, err)
	}
	if m, err := queue.Get(ctx, q, 4); err != nil || m.State != queue.Pending || m.Ack != nil {
		t.Fatalf("replayed row: %s, ack %+v, %v", m.State, m.Ack, err)
	}
}
