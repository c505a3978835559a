package ctl

import (
	"context"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// msgxctl republish follows its job as rebuild-projection does; registered here so the
// follower of each job kind sits with its own rendering.
func init() { followers["Republish"] = followRepublish }

// followRepublish polls GetRepublish and redraws the progress (flights written of total, and
// the KAFKA:schd rows still on their way to the broker) until the republish ends, then prints
// it as get-republish does. A terminal gets the line redrawn in place, a pipe a line per
// change; -o json prints only the final republish. One that ends CANCELLED exits with
// ABORTED's code.
func followRepublish(ctx context.Context, o *options, resp proto.Message, stdout, stderr io.Writer) error {
	r := resp.(*controlv1.RepublishResponse)
	job := r.GetRepublish()
	if r.GetAlreadyRunning() {
		fmt.Fprintf(stderr, "msgxctl: republish %d was already %s (requested by %s%s): following it instead; nothing new was requested\n",
			job.GetRepublishId(), republishState(job), job.GetRequestedBy(), republishScope(job))
	}
	get := Service().Methods().ByName("GetRepublish")
	return followJob(ctx, o, stdout, job, jobView[*controlv1.SchdRepublish]{
		noun: "republish", getCommand: "get-republish",
		id: (*controlv1.SchdRepublish).GetRepublishId, state: (*controlv1.SchdRepublish).GetState,
		done: (*controlv1.SchdRepublish).GetDone, total: (*controlv1.SchdRepublish).GetTotal,
		line: republishLine,
		get: func(ctx context.Context, id int64) (*controlv1.SchdRepublish, error) {
			got := &controlv1.GetRepublishResponse{}
			err := o.invoke(ctx, get, &controlv1.GetRepublishRequest{RepublishId: id}, got)
			return got.GetRepublish(), err
		},
		final: func(j *controlv1.SchdRepublish) proto.Message { return &controlv1.GetRepublishResponse{Republish: j} },
	})
}

// republishLine is one line of a republish's progress.
func republishLine(j *controlv1.SchdRepublish) string {
	line := fmt.Sprintf("republish %d %s: %d/%d flights written to the outbox%s; KAFKA:schd rows not yet sent %d",
		j.GetRepublishId(), republishState(j), j.GetDone(), j.GetTotal(), unknownText(j), j.GetOutboxPending())
	if j.GetError() != "" {
		line += "; last error: " + j.GetError()
	}
	return line
}

func unknownText(j *controlv1.SchdRepublish) string {
	if j.GetUnknown() == 0 {
		return ""
	}
	return fmt.Sprintf(", %d FLIDs unknown", j.GetUnknown())
}

func republishScope(j *controlv1.SchdRepublish) string {
	if j.GetAll() {
		return ", all flights"
	}
	return fmt.Sprintf(", %d FLIDs", j.GetFlidCount())
}

func republishState(j *controlv1.SchdRepublish) string {
	return strings.TrimPrefix(j.GetState().String(), "REBUILD_STATE_")
}
