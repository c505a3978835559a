package ctl

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// republishServer answers GetRepublish with the next of its states on each call.
type republishServer struct {
	controlv1.UnimplementedControlServiceServer
	mu     sync.Mutex
	states []*controlv1.SchdRepublish
}

func (s *republishServer) GetRepublish(context.Context, *controlv1.GetRepublishRequest) (*controlv1.GetRepublishResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.states[0]
	if len(s.states) > 1 {
		s.states = s.states[1:]
	}
	return &controlv1.GetRepublishResponse{Republish: r}, nil
}

// On a pipe msgxctl republish writes one plain line per change of progress (flights written,
// rows not yet sent) and then the republish's fields; one that ends CANCELLED exits with
// ABORTED's code.
func TestFollowRepublish(t *testing.T) {
	step := func(state controlv1.RebuildState, done, pending int64) *controlv1.SchdRepublish {
		return &controlv1.SchdRepublish{RepublishId: 4, All: true, State: state, Done: done, Total: 300, OutboxPending: pending,
			RequestedBy: "operator-token"}
	}
	run := func(t *testing.T, states ...*controlv1.SchdRepublish) (string, error) {
		srv := &republishServer{states: states}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		controlv1.RegisterControlServiceServer(gs, srv)
		go func() { _ = gs.Serve(lis) }()
		defer gs.Stop()
		var out, errOut bytes.Buffer
		o := &options{addr: lis.Addr().String(), output: "table", timeout: 5 * time.Second}
		resp := &controlv1.RepublishResponse{Republish: step(controlv1.RebuildState_REBUILD_STATE_PENDING, 0, 0)}
		err = followRepublish(t.Context(), o, resp, &out, &errOut)
		return out.String(), err
	}
	oldPoll := pollInterval
	pollInterval = 10 * time.Millisecond
	defer func() { pollInterval = oldPoll }()

	got, err := run(t, step(controlv1.RebuildState_REBUILD_STATE_RUNNING, 100, 100), step(controlv1.RebuildState_REBUILD_STATE_RUNNING, 100, 100),
		step(controlv1.RebuildState_REBUILD_STATE_DONE, 300, 140))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"republish 4 PENDING: 0/300 flights written to the outbox; KAFKA:schd rows not yet sent 0\n",
		"republish 4 RUNNING: 100/300 flights written to the outbox; KAFKA:schd rows not yet sent 100\n",
		"republish 4 DONE: 300/300 flights written to the outbox; KAFKA:schd rows not yet sent 140\n",
		"republish.outbox_pending",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "RUNNING: 100/300"); n != 1 {
		t.Errorf("an unchanged line written %d times:\n%s", n, got)
	}

	_, err = run(t, step(controlv1.RebuildState_REBUILD_STATE_CANCELLED, 100, 0))
	if ee, ok := err.(*exitError); !ok || ee.code != ExitCode(codes.Aborted) {
		t.Errorf("a cancelled republish: %v, want ABORTED's exit code", err)
	}
}
