package ctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// An explainer says why a call that changes state changed nothing, so an operator never reads
// "reopened 0" without a reason. It returns "" when the call did something. A non-nil error is
// the exit status after the output and the note: a named message that does not exist is exit
// 15 (NOT_FOUND, as if the server had refused the call), so a typo in an ID never exits 0
// (issue #56 finding 10).
type explainer func(ctx context.Context, c *client, req, resp proto.Message) (string, error)

// notFound is the exit of a call that named messages that do not exist.
func notFound(command string, ids []int64) error {
	return &exitError{code: ExitCode(codes.NotFound), err: fmt.Errorf("%s: %s: no message %s (check the IDs)", command, codes.NotFound, joinIDs(ids))}
}

var explainers = map[protoreflect.Name]explainer{
	"Replay":        explainReplay,
	"Reopen":        explainReopen,
	"RequeueEvents": explainRequeue,
	// The dry runs of these say what the call would do (they change nothing either way).
	"CancelRepublish":         explainCancelDryRun,
	"CancelProjectionRebuild": explainCancelDryRun,
	"AcknowledgeDead":         explainAck,
}

// maxExplained bounds the messages a no-op is explained for, one GetMessage call each.
const maxExplained = 10

func explainReplay(_ context.Context, _ *client, req, resp proto.Message) (string, error) {
	q, r := req.(*controlv1.ReplayRequest), resp.(*controlv1.ReplayResponse)
	if r.GetReplayed() > 0 {
		return "", nil
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
	return "nothing " + verb(r.GetDryRun(), "replayed") + ": " + strings.Join(why, "; "), nil
}

func explainRequeue(_ context.Context, _ *client, req, resp proto.Message) (string, error) {
	q, r := req.(*controlv1.RequeueEventsRequest), resp.(*controlv1.RequeueEventsResponse)
	if r.GetRequeued() > 0 {
		return "", nil
	}
	if ids := r.GetNotDeadIds(); len(ids) > 0 {
		return "nothing " + verb(r.GetDryRun(), "requeued") + ": not DEAD (PENDING or SENT), unknown, or outside the other selectors: " + joinIDs(ids), nil
	}
	scope := "the selection"
	if t := q.GetTarget(); t != "" {
		scope = t
	}
	return "nothing " + verb(r.GetDryRun(), "requeued") + ": no DEAD event of " + scope + " matches", nil
}

// explainReopen looks the named messages it did not reopen up: only an abandoned marker can be
// reopened, and the operator needs to know what each message is instead, and which do not exist.
func explainReopen(ctx context.Context, c *client, req, resp proto.Message) (string, error) {
	q, r := req.(*controlv1.ReopenRequest), resp.(*controlv1.ReopenResponse)
	var rest []int64
	for _, id := range q.GetMsgIds() {
		if !slices.Contains(r.GetReopenedIds(), id) && !slices.Contains(rest, id) {
			rest = append(rest, id)
		}
	}
	if r.GetReopened() > 0 && len(rest) == 0 {
		return "", nil
	}
	head := "nothing " + verb(r.GetDryRun(), "reopened")
	if r.GetReopened() > 0 {
		head = fmt.Sprintf("%d %s; not the others", r.GetReopened(), verb(r.GetDryRun(), "reopened"))
	}
	if len(q.GetMsgIds()) == 0 {
		what := "no abandoned marker"
		if q.GetReason() != controlv1.AbandonReason_ABANDON_REASON_UNSPECIFIED {
			what += " of reason " + enumWordOf("ABANDON_REASON_", q.GetReason().Descriptor().Values().ByNumber(q.GetReason().Number()))
		}
		return head + ": " + what + " (list them with: msgxctl list-messages --abandoned)", nil
	}
	md := Service().Methods().ByName("GetMessage")
	var (
		lines   []string
		missing []int64
	)
	for i, id := range rest {
		if i == maxExplained {
			lines = append(lines, fmt.Sprintf("  … and %d more", len(rest)-maxExplained))
			break
		}
		got := &controlv1.GetMessageResponse{}
		if err := c.call(ctx, md, &controlv1.GetMessageRequest{MsgId: id}, got); err != nil {
			var ee *exitError
			if errors.As(err, &ee) && ee.code == ExitCode(codes.NotFound) {
				missing = append(missing, id)
				lines = append(lines, fmt.Sprintf("  message %d: not found (no such message)", id))
				continue
			}
			lines = append(lines, fmt.Sprintf("  message %d: %v", id, err))
			continue
		}
		lines = append(lines, "  "+reopenState(got.GetMessage(), q.GetReason()))
	}
	note := head + ": only messages whose processed marker was abandoned can be reopened\n" + strings.Join(lines, "\n")
	if len(missing) > 0 {
		return note, notFound(c.command, missing)
	}
	return note, nil
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
func explainCancelDryRun(_ context.Context, _ *client, _, resp proto.Message) (string, error) {
	var (
		noun  string
		id    int64
		state controlv1.RebuildState
	)
	switch r := resp.(type) {
	case *controlv1.CancelRepublishResponse:
		if !r.GetDryRun() {
			return "", nil
		}
		noun, id, state = "republish", r.GetRepublish().GetRepublishId(), r.GetRepublish().GetState()
	case *controlv1.CancelProjectionRebuildResponse:
		if !r.GetDryRun() {
			return "", nil
		}
		noun, id, state = "rebuild", r.GetRebuild().GetRebuildId(), r.GetRebuild().GetState()
	default:
		return "", nil
	}
	what := "stop it after the page it is on (it stays RUNNING until then)"
	if state == controlv1.RebuildState_REBUILD_STATE_CANCELLED {
		what = "end it at once (it has not started)"
	}
	return fmt.Sprintf("dry run: the cancel of %s %d would %s; nothing was changed", noun, id, what), nil
}

// explainAck says what an acknowledgement's dry run found, and which named messages were not
// acknowledged because they do not exist, apart from those that are not DEAD.
func explainAck(_ context.Context, c *client, _, resp proto.Message) (string, error) {
	r := resp.(*controlv1.AcknowledgeDeadResponse)
	var lines []string
	if r.GetDryRun() {
		more := ""
		if r.GetMore() {
			more = " (the class holds more: the real call takes this many and says to call again)"
		}
		lines = append(lines, fmt.Sprintf("dry run: %d DEAD messages would be acknowledged%s; nothing was changed", r.GetAcknowledged(), more))
	}
	if ids := r.GetNotDeadIds(); len(ids) > 0 {
		lines = append(lines, "not DEAD, not acknowledged: "+joinIDs(ids))
	}
	ids := r.GetNotFoundIds()
	if len(ids) == 0 {
		return strings.Join(lines, "\n"), nil
	}
	lines = append(lines, "not found (no such message), not acknowledged: "+joinIDs(ids))
	return strings.Join(lines, "\n"), notFound(c.command, ids)
}
