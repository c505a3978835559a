package server

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

// answering is a ControlService whose reads and one mutation answer as the test needs.
type answering struct {
	controlv1.UnimplementedControlServiceServer
}

func (answering) GetStatus(context.Context, *controlv1.GetStatusRequest) (*controlv1.GetStatusResponse, error) {
	return &controlv1.GetStatusResponse{}, nil
}

func (answering) GetFlight(context.Context, *controlv1.GetFlightRequest) (*controlv1.GetFlightResponse, error) {
	return nil, status.Error(codes.NotFound, "no such flight")
}

func (answering) GetMessage(context.Context, *controlv1.GetMessageRequest) (*controlv1.GetMessageResponse, error) {
	return nil, status.Error(codes.Internal, "broken")
}

func (answering) Replay(context.Context, *controlv1.ReplayRequest) (*controlv1.ReplayResponse, error) {
	return &controlv1.ReplayResponse{}, nil
}

// TestReadsLogAtDebugMutationsAtInfo: the access log keeps a successful read (and a read
// answered NOT_FOUND) at DEBUG, a failing read at its code's level, and a mutation at INFO.
func TestReadsLogAtDebugMutationsAtInfo(t *testing.T) {
	t.Parallel()
	var buf testlog.Buffer
	srv, err := New(Config{
		Addr:           "127.0.0.1:0",
		Auth:           TokenAuth("levels-test-token-0123456789abcdef"),
		Logger:         slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer:     prometheus.NewRegistry(),
		TracerProvider: noop.NewTracerProvider(),
		StopTimeout:    5 * time.Second,
		CallTimeout:    config.Default().Control.CallTimeout,
		Bounds:         config.Default().Control.Bounds,
	})
	if err != nil {
		t.Fatal(err)
	}
	controlv1.RegisterControlServiceServer(srv.Registrar(), answering{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		<-done
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := controlv1.NewControlServiceClient(conn)
	call := bearer(t.Context(), "levels-test-token-0123456789abcdef")
	_, _ = c.GetStatus(call, &controlv1.GetStatusRequest{})
	_, _ = c.GetFlight(call, &controlv1.GetFlightRequest{Flid: "X"})
	_, _ = c.GetMessage(call, &controlv1.GetMessageRequest{MsgId: 1})
	_, _ = c.Replay(call, &controlv1.ReplayRequest{MsgIds: []int64{1}, DryRun: true})

	want := map[string]string{"GetStatus": "DEBUG", "GetFlight": "DEBUG", "GetMessage": "ERROR", "Replay": "INFO"}
	got := map[string]string{}
	for _, l := range buf.Lines() {
		if m, ok := l["grpc.method"].(string); ok && l["msg"] == "finished call" {
			got[m], _ = l["level"].(string)
		}
	}
	for m, level := range want {
		if got[m] != level {
			t.Errorf("%s logged at %q, want %s (all: %v)", m, got[m], level, got)
		}
	}
}
