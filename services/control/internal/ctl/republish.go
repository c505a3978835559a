package ctl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// msgxctl republish follows its job as rebuild-projection does; registered here so the
// follower of each job kind sits with its own rendering.
// Its --all asks first (confirmRepublishAll).
func init() {
	followers["Republish"] = followRepublish
	confirmers["Republish"] = confirmRepublishAll
}

// followRepublish polls GetRepublish and redraws the progress (flights written of total, and
// the KAFKA:schd rows still on their way to the broker) until the republish ends, then prints
// it as get-republish does. A terminal gets the line redrawn in place, a pipe a line per
// change; -o json prints only the final republish. One that ends CANCELLED exits with
// ABORTED's code.
func followRepublish(ctx context.Context, o *options, resp proto.Message, stdout, stderr io.Writer) error {
	r := resp.(*controlv1.RepublishResponse)
	job := r.GetRepublish()
	if r.GetDryRun() {
		// Nothing was requested: there is no job to follow, only the preview to print.
		if err := renderAs(stdout, o.output, o.noHeaders, r, "republish.republish_id", false); err != nil {
			return err
		}
		_, err := fmt.Fprintln(stderr, republishPreview(r)+"; dry run: nothing was requested")
		return wrapWrite(err)
	}
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

// republishPreview says what a dry run of Republish found, in a line.
func republishPreview(r *controlv1.RepublishResponse) string {
	j := r.GetRepublish()
	if r.GetAlreadyRunning() {
		return fmt.Sprintf("republish %d is already %s (requested by %s%s): the call would follow it and request nothing",
			j.GetRepublishId(), republishState(j), j.GetRequestedBy(), republishScope(j))
	}
	if j.GetAll() {
		return fmt.Sprintf("republish --all would write the current state of %d flights to KAFKA:schd, and every consumer of the topic "+
			"receives each of them again (%d KAFKA:schd rows are not sent yet)", j.GetTotal(), j.GetOutboxPending())
	}
	line := fmt.Sprintf("republish would write the current state of %d of the %d FLIDs named to KAFKA:schd", j.GetTotal()-j.GetUnknown(), j.GetTotal())
	if u := r.GetUnknownFlid(); len(u) > 0 {
		line += fmt.Sprintf("; %d are not in the current state (%s", j.GetUnknown(), strings.Join(u, ", "))
		if int64(len(u)) < j.GetUnknown() {
			line += ", …"
		}
		line += ")"
	}
	return line
}

// confirmRepublishAll shows what republish --all would send (a dry run of the same request)
// and asks before requesting it: the whole current state, sent to every consumer again, is
// not a thing to start by a slip of the shell's history. --yes skips the question, --dry-run
// and a scope of FLIDs do not need it, and an open republish is followed without asking (the
// call requests nothing then). Without a terminal on stdin nobody can answer: refused with
// ExitUsage, naming --yes.
func confirmRepublishAll(ctx context.Context, c *client, md protoreflect.MethodDescriptor, req proto.Message, p prompt) error {
	r := req.(*controlv1.RepublishRequest)
	if !r.GetAll() || r.GetDryRun() {
		return nil
	}
	dry := proto.CloneOf(r)
	dry.DryRun = true
	preview := &controlv1.RepublishResponse{}
	if err := c.call(ctx, md, dry, preview); err != nil {
		return err
	}
	if preview.GetAlreadyRunning() {
		return nil
	}
	if _, err := fmt.Fprintln(p.out, republishPreview(preview)+"."); err != nil {
		return wrapWrite(err)
	}
	if !p.interactive {
		return usageErr("republish --all asks for a confirmation and stdin is not a terminal: add --yes to request it anyway " +
			"(--dry-run shows the preview only); nothing was requested")
	}
	if _, err := fmt.Fprint(p.out, "Type yes to request it: "); err != nil {
		return wrapWrite(err)
	}
	answer, _ := bufio.NewReader(p.in).ReadString('\n')
	if strings.ToLower(strings.TrimSpace(answer)) != "yes" {
		return &exitError{code: ExitLocal, err: fmt.Errorf("republish --all not confirmed (answer %q): nothing was requested", strings.TrimSpace(answer))}
	}
	return nil
}
