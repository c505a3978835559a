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
	tty := terminal(stdout)
	last := ""
	for {
		if o.output == "table" || o.output == "wide" {
			if line := progressLine(job); line != last {
				if tty {
					fmt.Fprintf(stdout, "\r\033[K%s", line)
				} else {
					fmt.Fprintln(stdout, line)
				}
				last = line
			}
		}
		if s := job.GetState(); s == controlv1.RebuildState_REBUILD_STATE_DONE || s == controlv1.RebuildState_REBUILD_STATE_CANCELLED {
			break
		}
		select {
		case <-ctx.Done():
			return localErr(fmt.Errorf("stopped following rebuild %d, which goes on: msgxctl get-projection-rebuild %d", job.GetRebuildId(), job.GetRebuildId()))
		case <-time.After(pollInterval):
		}
		got := &controlv1.GetProjectionRebuildResponse{}
		if err := o.invoke(ctx, get, &controlv1.GetProjectionRebuildRequest{RebuildId: job.GetRebuildId()}, got); err != nil {
			if ee, ok := err.(*exitError); ok && ee.code == ExitCode(codes.Unavailable) {
				continue // a restarting control instance; the job goes on in the backfill
			}
			return err
		}
		job = got.GetRebuild()
	}
	if tty && (o.output == "table" || o.output == "wide") {
		fmt.Fprintln(stdout)
	}
	if err := render(stdout, o.output, &controlv1.GetProjectionRebuildResponse{Rebuild: job}); err != nil {
		return err
	}
	if job.GetState() == controlv1.RebuildState_REBUILD_STATE_CANCELLED {
		return &exitError{code: ExitCode(codes.Aborted), err: fmt.Errorf("rebuild %d was cancelled after %d of %d flights", job.GetRebuildId(), job.GetDone(), job.GetTotal())}
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
	scope := fmt.Sprintf(", %d FLIDs", len(j.GetFlid()))
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
