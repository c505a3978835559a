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
		addr := fakeControl(t, srv)
		var out, errOut bytes.Buffer
		o := &options{addr: addr, output: "table", timeout: 5 * time.Second}
		resp := &controlv1.RepublishResponse{Republish: step(controlv1.RebuildState_REBUILD_STATE_PENDING, 0, 0)}
		err := followRepublish(t.Context(), o, resp, &out, &errOut)
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

// previewServer answers Republish: a dry run with the preview it holds, a real call by
// counting it.
type previewServer struct {
	controlv1.UnimplementedControlServiceServer
	mu        sync.Mutex
	preview   *controlv1.RepublishResponse
	requested int
}

func (s *previewServer) Republish(_ context.Context, req *controlv1.RepublishRequest) (*controlv1.RepublishResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.GetDryRun() {
		return s.preview, nil
	}
	s.requested++
	return &controlv1.RepublishResponse{Republish: &controlv1.SchdRepublish{RepublishId: 9}}, nil
}

// republish --all shows the dry run's preview and asks: "yes" on a terminal lets the call
// through, anything else stops it with ExitLocal, no terminal stops it with ExitUsage naming
// --yes; an open republish, a dry run and a scope of FLIDs are not asked about.
func TestConfirmRepublishAll(t *testing.T) {
	srv := &previewServer{preview: &controlv1.RepublishResponse{DryRun: true,
		Republish: &controlv1.SchdRepublish{All: true, State: controlv1.RebuildState_REBUILD_STATE_PENDING, Total: 41234, OutboxPending: 7}}}
	addr := fakeControl(t, srv)
	o := &options{addr: addr, output: "table", timeout: 5 * time.Second}
	c, err := o.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.conn.Close() }()
	md := Service().Methods().ByName("Republish")
	ask := func(req *controlv1.RepublishRequest, interactive bool, answer string) (string, error) {
		var out bytes.Buffer
		err := confirmRepublishAll(t.Context(), c, md, req, prompt{in: strings.NewReader(answer), out: &out, interactive: interactive})
		return out.String(), err
	}
	code := func(err error) int {
		if ee, ok := err.(*exitError); ok {
			return ee.code
		}
		return -1
	}
	all := &controlv1.RepublishRequest{All: true, Comment: "INC-1"}

	out, err := ask(all, false, "")
	if code(err) != ExitUsage || !strings.Contains(err.Error(), "--yes") || !strings.Contains(err.Error(), "nothing was requested") {
		t.Errorf("without a terminal: %v, want ExitUsage naming --yes", err)
	}
	if !strings.Contains(out, "would write the current state of 41234 flights to KAFKA:schd") || !strings.Contains(out, "7 KAFKA:schd rows") {
		t.Errorf("preview:\n%s", out)
	}
	if out, err = ask(all, true, "yes\n"); err != nil || !strings.Contains(out, "Type yes to request it: ") {
		t.Errorf("answered yes: %v\n%s", err, out)
	}
	if _, err = ask(all, true, "y\n"); code(err) != ExitLocal || !strings.Contains(err.Error(), "not confirmed") {
		t.Errorf("answered y: %v, want ExitLocal, not confirmed", err)
	}
	if _, err = ask(all, true, ""); code(err) != ExitLocal {
		t.Errorf("stdin closed at the question: %v, want ExitLocal", err)
	}
	for _, req := range []*controlv1.RepublishRequest{{All: true, DryRun: true}, {Flid: []string{"F1"}}} {
		if out, err := ask(req, false, ""); err != nil || out != "" {
			t.Errorf("%v: %v, %q; want no question", req, err, out)
		}
	}
	srv.preview = &controlv1.RepublishResponse{DryRun: true, AlreadyRunning: true, Republish: &controlv1.SchdRepublish{RepublishId: 4, All: true}}
	if out, err := ask(all, false, ""); err != nil || out != "" {
		t.Errorf("with a republish open: %v, %q; want it followed without a question", err, out)
	}
	if srv.requested != 0 {
		t.Errorf("the confirmation itself requested %d republishes", srv.requested)
	}
}

// fakeControl serves srv on a port of its own until the test ends and returns its address.
func fakeControl(t *testing.T, srv controlv1.ControlServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	controlv1.RegisterControlServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}
