package ctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// A follower keeps showing the job a call started until it ends, instead of printing the
// call's response and returning: the commands of RPCs that start long-running work on the
// server. --detach gives the plain behaviour back.
type follower func(ctx context.Context, o *options, resp proto.Message, stdout, stderr io.Writer) error

var followers = map[protoreflect.Name]follower{
	"RebuildProjection": followRebuild,
}

// A confirmer runs before a mutating call whose effect is too large to start by a slip (an
// --all): it may preview the call and ask on the terminal. An error stops the call. --yes skips
// it.
type confirmer func(ctx context.Context, c *client, md protoreflect.MethodDescriptor, req proto.Message, p prompt) error

var confirmers = map[protoreflect.Name]confirmer{}

// prompt is where a confirmer writes its preview and reads the answer; interactive says
// whether in is a terminal, where a person can answer.
type prompt struct {
	in          io.Reader
	out         io.Writer
	interactive bool
}

// stdinTerminal reports whether r, the command's stdin, is a terminal.
var stdinTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// pollInterval is how often a follower asks for the job's progress.
var pollInterval = time.Second

// terminal reports whether w is a terminal, where progress is redrawn in place.
var terminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// followRebuild polls GetProjectionRebuild and redraws the progress (flights done of total and
// the drift counts) until the rebuild ends, then prints the rebuild as get-projection-rebuild
// does. On a terminal the progress line is redrawn in place; otherwise (a pipe, a log) a plain
// line is written whenever the progress changed. With -o json only the final rebuild is
// printed. A rebuild that ends CANCELLED exits with ABORTED's code.
func followRebuild(ctx context.Context, o *options, resp proto.Message, stdout, stderr io.Writer) error {
	r := resp.(*controlv1.RebuildProjectionResponse)
	job := r.GetRebuild()
	if r.GetAlreadyRunning() {
		fmt.Fprintf(stderr, "msgxctl: rebuild %d was already %s (requested by %s%s): following it instead; nothing new was requested\n",
			job.GetRebuildId(), rebuildState(job), job.GetRequestedBy(), scopeText(job))
	}
	get := Service().Methods().ByName("GetProjectionRebuild")
	return followJob(ctx, o, stdout, job, jobView[*controlv1.ProjectionRebuild]{
		noun: "rebuild", getCommand: "get-projection-rebuild",
		id: (*controlv1.ProjectionRebuild).GetRebuildId, state: (*controlv1.ProjectionRebuild).GetState,
		done: (*controlv1.ProjectionRebuild).GetDone, total: (*controlv1.ProjectionRebuild).GetTotal,
		line: progressLine,
		get: func(ctx context.Context, id int64) (*controlv1.ProjectionRebuild, error) {
			got := &controlv1.GetProjectionRebuildResponse{}
			err := o.invoke(ctx, get, &controlv1.GetProjectionRebuildRequest{RebuildId: id}, got)
			return got.GetRebuild(), err
		},
		final: func(j *controlv1.ProjectionRebuild) proto.Message {
			return &controlv1.GetProjectionRebuildResponse{Rebuild: j}
		},
	})
}

// jobView is what followJob needs of one kind of job the backfill runs (a projection rebuild,
// a republish): how to read its fields, draw its progress and fetch it again.
type jobView[J any] struct {
	noun, getCommand string
	id               func(J) int64
	state            func(J) controlv1.RebuildState
	done, total      func(J) int64
	line             func(J) string
	get              func(ctx context.Context, id int64) (J, error)
	final            func(J) proto.Message
}

// followJob polls a job until it ends, drawing its progress line (on a terminal, in place)
// whenever it changed, then renders the job as -o asks. A restarting control instance
// (UNAVAILABLE) is polled again: the job goes on in the backfill. A job that ends CANCELLED
// exits with ABORTED's code.
func followJob[J any](ctx context.Context, o *options, stdout io.Writer, job J, v jobView[J]) error {
	tty := terminal(stdout)
	progress := o.output == "table" || o.output == "wide"
	last := ""
	for {
		if progress {
			if line := v.line(job); line != last {
				if tty {
					fmt.Fprintf(stdout, "\r\033[K%s", line)
				} else {
					fmt.Fprintln(stdout, line)
				}
				last = line
			}
		}
		if s := v.state(job); s == controlv1.RebuildState_REBUILD_STATE_DONE || s == controlv1.RebuildState_REBUILD_STATE_CANCELLED {
			break
		}
		select {
		case <-ctx.Done():
			return localErr(fmt.Errorf("stopped following %s %d, which goes on: msgxctl %s %d", v.noun, v.id(job), v.getCommand, v.id(job)))
		case <-time.After(pollInterval):
		}
		got, err := v.get(ctx, v.id(job))
		if err != nil {
			if ee, ok := err.(*exitError); ok && ee.code == ExitCode(codes.Unavailable) {
				continue
			}
			return err
		}
		job = got
	}
	if tty && progress {
		fmt.Fprintln(stdout)
	}
	if err := render(stdout, o.output, o.noHeaders, v.final(job)); err != nil {
		return err
	}
	if v.state(job) == controlv1.RebuildState_REBUILD_STATE_CANCELLED {
		return &exitError{code: ExitCode(codes.Aborted), err: fmt.Errorf("%s %d was cancelled after %d of %d flights", v.noun, v.id(job), v.done(job), v.total(job))}
	}
	return nil
}

// progressLine is one line of a rebuild's progress.
func progressLine(j *controlv1.ProjectionRebuild) string {
	state := rebuildState(j)
	mode := "rebuild"
	if j.GetDryRun() {
		mode = "dry run"
	}
	line := fmt.Sprintf("%s %d %s: %d/%d flights, phase %s; drift missing %d stale %d content %d extra %d; repaired %d",
		mode, j.GetRebuildId(), state, j.GetDone(), j.GetTotal(), j.GetPhase(),
		j.GetMissing(), j.GetStale(), j.GetContent(), j.GetExtra(), j.GetRepaired())
	if j.GetError() != "" {
		line += "; last error: " + j.GetError()
	}
	return line
}

func scopeText(j *controlv1.ProjectionRebuild) string {
	scope := fmt.Sprintf(", %d FLIDs", j.GetFlidCount())
	if j.GetAll() {
		scope = ", all flights"
	}
	if j.GetDryRun() {
		scope += ", dry run"
	}
	return scope
}

func rebuildState(j *controlv1.ProjectionRebuild) string {
	return strings.TrimPrefix(j.GetState().String(), "REBUILD_STATE_")
}
