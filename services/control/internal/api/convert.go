package api

import (
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// The API's enums are the database's words with a prefix (PENDING ↔ MESSAGE_STATE_PENDING), so
// they convert by name through the generated value maps: a value added to the schema and the
// .proto converts without code here, and one missing from the .proto reads as UNSPECIFIED
// instead of being mistaken for another (a test checks every queue value has its enum).
const (
	statePrefix  = "MESSAGE_STATE_"
	classPrefix  = "ERROR_CLASS_"
	reasonPrefix = "ABANDON_REASON_"
)

func messageState(s queue.State) controlv1.MessageState {
	return controlv1.MessageState(controlv1.MessageState_value[statePrefix+string(s)])
}

func errorClass(c queue.ErrorClass) controlv1.ErrorClass {
	return controlv1.ErrorClass(controlv1.ErrorClass_value[classPrefix+string(c)])
}

func abandonReason(r string) controlv1.AbandonReason {
	return controlv1.AbandonReason(controlv1.AbandonReason_value[reasonPrefix+r])
}

func timestamp(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func optTimestamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func optDuration(d *time.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(*d)
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// roleStatus lists every role in leader.Roles() order, held or not, so a role nobody started is
// visible; then any other role found recorded (a newer service), so nothing held is hidden.
func roleStatus(holders []leader.Holder, now time.Time) []*controlv1.RoleStatus {
	byRole := make(map[leader.Role]leader.Holder, len(holders))
	for _, h := range holders {
		byRole[h.Role] = h
	}
	roles := leader.Roles()
	out := make([]*controlv1.RoleStatus, 0, len(roles))
	add := func(role leader.Role) {
		h, ok := byRole[role]
		if !ok {
			out = append(out, &controlv1.RoleStatus{Role: string(role)})
			return
		}
		delete(byRole, role)
		out = append(out, &controlv1.RoleStatus{
			Role:        string(role),
			Held:        true,
			Instance:    h.Instance,
			BackendPid:  h.PID,
			Active:      h.Active,
			Since:       timestamp(h.Since),
			HeartbeatAt: timestamp(h.HeartbeatAt),
			Blocked:     blocked(h, now),
		})
	}
	for _, r := range roles {
		add(r)
	}
	for _, h := range holders { // in the holders' (role) order
		if _, left := byRole[h.Role]; left {
			add(h.Role)
		}
	}
	return out
}

func discovery(c cursor.Cursor, h cursor.HoleStats, now time.Time) *controlv1.Discovery {
	d := &controlv1.Discovery{
		Watermark:           c.W,
		HoleSince:           optTimestamp(c.HoleSince),
		SeededAt:            optTimestamp(c.SeededAt),
		SeedMode:            str(c.SeedMode),
		PermanentHoleRanges: h.Holes,
		PermanentHoleIds:    h.HoleIDs,
		LateDetected:        h.LateDetected,
		LateEnqueued:        h.LateEnqueued,
	}
	if c.HoleSince != nil {
		d.HoleAge = durationpb.New(max(now.Sub(*c.HoleSince), 0))
	}
	if c.SeedValue != nil {
		d.SeedValue = *c.SeedValue
	}
	d.ContractViolation = contractViolation(c.Violation)
	return d
}

func contractViolation(v *cursor.Violation) *controlv1.ContractViolation {
	if v == nil {
		return nil
	}
	return &controlv1.ContractViolation{Kind: v.Kind, Since: timestamp(v.Since), Detail: v.Detail}
}

func backlog(s queue.Statistics) *controlv1.Backlog {
	b := &controlv1.Backlog{
		Unfinished:        s.Unfinished,
		FinishedLast_5M:   s.FinishedInWindow,
		FinishedPerSecond: s.FinishedPerSecond,
		EstimatedDrain:    optDuration(s.EstimatedDrain),
	}
	if s.OldestUnfinishedEnqueuedAt != nil {
		b.OldestUnfinishedAge = durationpb.New(s.OldestUnfinishedAge)
	}
	return b
}

// stateCounts lists every state of the API in enum order, zero included, each flagged when
// queue.Stats estimated it.
func stateCounts(by map[queue.State]int64, estimated map[queue.State]bool) []*controlv1.StateCount {
	var out []*controlv1.StateCount
	values := controlv1.MessageState_MESSAGE_STATE_UNSPECIFIED.Descriptor().Values()
	for i := range values.Len() {
		v := controlv1.MessageState(values.Get(i).Number())
		if v == controlv1.MessageState_MESSAGE_STATE_UNSPECIFIED {
			continue
		}
		name := strings.TrimPrefix(v.String(), statePrefix)
		out = append(out, &controlv1.StateCount{State: v, Count: by[queue.State(name)], Estimated: estimated[queue.State(name)]})
	}
	return out
}

// errorClassCounts lists the classes that occur, in enum order; a class the API does not know
// is counted under UNSPECIFIED rather than dropped.
func errorClassCounts(by map[queue.ErrorClass]int64) []*controlv1.ErrorClassCount {
	counts := map[controlv1.ErrorClass]int64{}
	for c, n := range by {
		counts[errorClass(c)] += n
	}
	var out []*controlv1.ErrorClassCount
	values := controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED.Descriptor().Values()
	for i := range values.Len() {
		v := controlv1.ErrorClass(values.Get(i).Number())
		if n := counts[v]; n > 0 {
			out = append(out, &controlv1.ErrorClassCount{ErrorClass: v, Count: n})
		}
	}
	return out
}

func backfill(s queue.Statistics) *controlv1.Backfill {
	counts := map[controlv1.AbandonReason]int64{}
	for r, n := range s.BackfillAbandonedByReason {
		counts[abandonReason(r)] += n
	}
	b := &controlv1.Backfill{Pending: s.BackfillPending, Abandoned: s.BackfillAbandoned}
	values := controlv1.AbandonReason_ABANDON_REASON_UNSPECIFIED.Descriptor().Values()
	for i := range values.Len() {
		v := controlv1.AbandonReason(values.Get(i).Number())
		if n := counts[v]; n > 0 {
			b.AbandonedByReason = append(b.AbandonedByReason, &controlv1.AbandonedCount{Reason: v, Count: n})
		}
	}
	return b
}

// outboxTargets lists the known targets first, in a fixed order, then any other.
func outboxTargets(targets map[string]outbox.TargetStats) []*controlv1.OutboxTarget {
	order := []string{outbox.TargetMsg, outbox.TargetSchd}
	var others []string
	for t := range targets {
		if !slices.Contains(order, t) {
			others = append(others, t)
		}
	}
	slices.Sort(others)
	order = append(order, others...)
	out := make([]*controlv1.OutboxTarget, 0, len(order))
	for _, name := range order {
		t := targets[name]
		ot := &controlv1.OutboxTarget{Target: name, Pending: t.Pending, Dead: t.Dead}
		if t.OldestPendingAt != nil {
			ot.OldestPendingAge = durationpb.New(t.OldestPendingAge)
		}
		out = append(out, ot)
	}
	return out
}

func message(m queue.Message) *controlv1.Message {
	out := &controlv1.Message{
		MsgId:               m.MsgID,
		State:               messageState(m.State),
		LastError:           str(m.LastError),
		Attempts:            int32(m.Attempts),
		NextAttemptAt:       optTimestamp(m.NextAttemptAt),
		IdentityKey:         str(m.IdentityKey),
		MsgType:             str(m.MsgType),
		MsgStyp:             str(m.MsgStyp),
		ReceivedAt:          optTimestamp(m.ReceivedAt),
		EnqueuedAt:          timestamp(m.EnqueuedAt),
		ProcessingStartedAt: optTimestamp(m.ProcessingStartedAt),
		FinishedAt:          optTimestamp(m.FinishedAt),
		BackfillNextAt:      optTimestamp(m.BackfillNextAt),
		BackfillAt:          optTimestamp(m.BackfillAt),
		BackfillAttempts:    int32(m.BackfillAttempts),
		BackfillAbandonedAt: optTimestamp(m.BackfillAbandonedAt),
		TraceParent:         m.Trace.Parent,
		TraceState:          m.Trace.State,
		UpdatedAt:           timestamp(m.UpdatedAt),
		Flid:                str(m.FLID),
	}
	if m.ErrorClass != nil {
		out.ErrorClass = errorClass(*m.ErrorClass)
	}
	if m.BackfillReason != nil {
		out.BackfillAbandonReason = abandonReason(*m.BackfillReason)
	}
	if m.Ack != nil {
		out.AcknowledgedAt = timestamp(m.Ack.At)
		out.AcknowledgedBy = m.Ack.By
		out.AcknowledgedReason = m.Ack.Reason
	}
	return out
}

// blocked reports a holder's outage only while that holder is alive: the mark of a holder that
// died blocked says nothing about the role now.
func blocked(h leader.Holder, now time.Time) *controlv1.Blocked {
	if h.Blocked == nil || !h.Active {
		return nil
	}
	b := h.Blocked
	return &controlv1.Blocked{
		Dependency: b.Dependency,
		Since:      timestamp(b.Since),
		Duration:   durationpb.New(max(now.Sub(b.Since), 0)),
		LastError:  b.LastError,
		MsgId:      b.MsgID,
		Probes:     int64(b.Probes),
	}
}
