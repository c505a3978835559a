package ctl

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// progressServer answers GetProjectionRebuild with the next of its states on each call.
type progressServer struct {
	controlv1.UnimplementedControlServiceServer
	mu     sync.Mutex
	states []*controlv1.ProjectionRebuild
}

func (s *progressServer) GetProjectionRebuild(context.Context, *controlv1.GetProjectionRebuildRequest) (*controlv1.GetProjectionRebuildResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.states[0]
	if len(s.states) > 1 {
		s.states = s.states[1:]
	}
	return &controlv1.GetProjectionRebuildResponse{Rebuild: r}, nil
}

// On a terminal the progress line is redrawn in place (carriage return, erase line) and the
// final rebuild follows on a line of its own. Not parallel: it sets the package's terminal check.
func TestFollowRedrawsOnATerminal(t *testing.T) {
	running := func(done, missing int64) *controlv1.ProjectionRebuild {
		return &controlv1.ProjectionRebuild{RebuildId: 3, All: true, State: controlv1.RebuildState_REBUILD_STATE_RUNNING,
			Phase: "FLIGHTS", Done: done, Total: 200, Missing: missing, Repaired: missing}
	}
	final := running(200, 7)
	final.State = controlv1.RebuildState_REBUILD_STATE_DONE
	srv := &progressServer{states: []*controlv1.ProjectionRebuild{running(100, 3), running(100, 3), final}}
	addr := fakeControl(t, srv)

	oldTerm, oldPoll := terminal, pollInterval
	terminal, pollInterval = func(io.Writer) bool { return true }, 10*time.Millisecond
	defer func() { terminal, pollInterval = oldTerm, oldPoll }()

	var out, errOut bytes.Buffer
	o := &options{addr: addr, output: "table", timeout: 5 * time.Second}
	resp := &controlv1.RebuildProjectionResponse{Rebuild: running(0, 0), AlreadyRunning: true}
	if err := followRebuild(t.Context(), o, resp, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	redraws := strings.Count(got, "\r\033[K")
	if redraws != 3 { // 0/200, 100/200 (once: an unchanged line is not redrawn), 200/200
		t.Errorf("%d redraws, want 3:\n%q", redraws, got)
	}
	if !strings.Contains(got, "\r\033[Krebuild 3 DONE: 200/200 flights, phase FLIGHTS; drift missing 7 stale 0 content 0 extra 0; repaired 7\n") ||
		!strings.Contains(got, "rebuild.state") {
		t.Errorf("final line or fields missing:\n%q", got)
	}
	if !strings.Contains(errOut.String(), "rebuild 3 was already RUNNING") {
		t.Errorf("stderr %q does not say the rebuild was already running", errOut.String())
	}
}
