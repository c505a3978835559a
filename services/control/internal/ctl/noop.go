package ctl

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// An explainer says why a call that changes state changed nothing, so an operator never reads
// "reopened 0" without a reason. It returns "" when the call did something.
type explainer func(ctx context.Context, c *client, req, resp proto.Message) string

var explainers = map[protoreflect.Name]explainer{
	"Replay":        explainReplay,
	"Reopen":        explainReopen,
	"RequeueEvents": explainRequeue,
	// The dry runs of these say what the call would do (they change nothing either way).
	"CancelRepublish":         explainCancelDryRun,
	"CancelProjectionRebuild": explainCancelDryRun,
	"AcknowledgeDead":         explainAckDryRun,
}

// maxExplained bounds the messages a no-op is explained for, one GetMessage call each.
const maxExplained = 10

func explainReplay(_ context.Context, _ *client, req, resp proto.Message) string {
	q, r := req.(*controlv1.ReplayRequest), resp.(*controlv1.ReplayResponse)
	if r.GetReplayed() > 0 {
		return ""
	}
	var why []string
	if ids := r.GetMalformedIds(); len(ids) > 0 {
		why = append(why, "MALFORMED, never replayed: "+joinIDs(ids))
	}
	if ids := r.GetNotReplayableIds(); len(ids) > 0 {
		why = append(why, "not FAILED or DEAD of a replayable class (nor SKIPPED(UNSUPPORTED)), or unknown: "+joinIDs(ids))
	}
	if len(why) == 0 {
		if len(q.GetMsgIds()) > 0 {
			why = append(why, "no named message matches the other selectors")
		} else {
			why = append(why, "no FAILED or DEAD message of a replayable class (codec-error, unsupported, infra, exhausted), nor SKIPPED(UNSUPPORTED), matches the selection")
		}
	}
	return "nothing " + verb(r.GetDryRun(), "replayed") + ": " + strings.Join(why, "; ")
}

func explainRequeue(_ context.Context, _ *client, req, resp proto.Message) string {
	q, r := req.(*controlv1.RequeueEventsRequest), resp.(*controlv1.RequeueEventsResponse)
	if r.GetRequeued() > 0 {
		return ""
	}
	if ids := r.GetNotDeadIds(); len(ids) > 0 {
		return "nothing " + verb(r.GetDryRun(), "requeued") + ": not DEAD (PENDING or SENT), unknown, or outside the other selectors: " + joinIDs(ids)
	}
	scope := "the selection"
	if t := q.GetTarget(); t != "" {
		scope = t
	}
	return "nothing " + verb(r.GetDryRun(), "requeued") + ": no DEAD event of " + scope + " matches"
}

// explainReopen looks the named messages up: only an abandoned marker can be reopened, and
// the operator needs to know what each message is instead.
func explainReopen(ctx context.Context, c *client, req, resp proto.Message) string {
	q, r := req.(*controlv1.ReopenRequest), resp.(*controlv1.ReopenResponse)
	if r.GetReopened() > 0 {
		return ""
	}
	head := "nothing " + verb(r.GetDryRun(), "reopened")
	ids := q.GetMsgIds()
	if len(ids) == 0 {
		what := "no abandoned marker"
		if q.GetReason() != controlv1.AbandonReason_ABANDON_REASON_UNSPECIFIED {
			what += " of reason " + enumWordOf("ABANDON_REASON_", q.GetReason().Descriptor().Values().ByNumber(q.GetReason().Number()))
		}
		return head + ": " + what + " (list them with: msgxctl list-messages --abandoned)"
	}
	md := Service().Methods().ByName("GetMessage")
	var lines []string
	for i, id := range ids {
		if i == maxExplained {
			lines = append(lines, fmt.Sprintf("  … and %d more", len(ids)-maxExplained))
			break
		}
		got := &controlv1.GetMessageResponse{}
		if err := c.call(ctx, md, &controlv1.GetMessageRequest{MsgId: id}, got); err != nil {
			lines = append(lines, fmt.Sprintf("  message %d: %v", id, err))
			continue
		}
		lines = append(lines, "  "+reopenState(got.GetMessage(), q.GetReason()))
	}
	return head + ": only messages whose processed marker was abandoned can be reopened\n" + strings.Join(lines, "\n")
}

func reopenState(m *controlv1.Message, reason controlv1.AbandonReason) string {
	state := strings.TrimPrefix(m.GetState().String(), "MESSAGE_STATE_")
	switch {
	case m.GetBackfillAbandonedAt() != nil && reason != controlv1.AbandonReason_ABANDON_REASON_UNSPECIFIED && reason != m.GetBackfillAbandonReason():
		return fmt.Sprintf("message %d is %s, abandoned for another reason (%s)", m.GetMsgId(), state,
			strings.TrimPrefix(m.GetBackfillAbandonReason().String(), "ABANDON_REASON_"))
	case m.GetBackfillAbandonedAt() != nil:
		return fmt.Sprintf("message %d is %s and abandoned: it was reopened by another call meanwhile, or is locked (run again)", m.GetMsgId(), state)
	case m.GetBackfillAt() != nil:
		return fmt.Sprintf("message %d is %s, not abandoned: its marker was written %s", m.GetMsgId(), state, clock(m.GetBackfillAt()))
	}
	return fmt.Sprintf("message %d is %s, not abandoned: its marker is still being tried (%d tries so far)", m.GetMsgId(), state, m.GetBackfillAttempts())
}

func verb(dryRun bool, past string) string {
	if dryRun {
		return "would be " + past
	}
	return past
}

// explainCancelDryRun says what a cancel's dry run found: the job as the cancel would leave it.
func explainCancelDryRun(_ context.Context, _ *client, _, resp proto.Message) string {
	var (
		noun  string
		id    int64
		state controlv1.RebuildState
	)
	switch r := resp.(type) {
	case *controlv1.CancelRepublishResponse:
		if !r.GetDryRun() {
			return ""
		}
		noun, id, state = "republish", r.GetRepublish().GetRepublishId(), r.GetRepublish().GetState()
	case *controlv1.CancelProjectionRebuildResponse:
		if !r.GetDryRun() {
			return ""
		}
		noun, id, state = "rebuild", r.GetRebuild().GetRebuildId(), r.GetRebuild().GetState()
	default:
		return ""
	}
	what := "stop it after the page it is on (it stays RUNNING until then)"
	if state == controlv1.RebuildState_REBUILD_STATE_CANCELLED {
		what = "end it at once (it has not started)"
	}
	return fmt.Sprintf("dry run: the cancel of %s %d would %s; nothing was changed", noun, id, what)
}

// explainAckDryRun says what an acknowledgement's dry run found.
func explainAckDryRun(_ context.Context, _ *client, _, resp proto.Message) string {
	r := resp.(*controlv1.AcknowledgeDeadResponse)
	if !r.GetDryRun() {
		return ""
	}
	more := ""
	if r.GetMore() {
		more = " (the class holds more: the real call takes this many and says to call again)"
	}
	return fmt.Sprintf("dry run: %d DEAD messages would be acknowledged%s; nothing was changed", r.GetAcknowledged(), more)
}
