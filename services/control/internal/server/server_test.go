package server

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// panicky is a ControlService whose GetStatus panics, to exercise the recovery interceptor.
type panicky struct {
	controlv1.UnimplementedControlServiceServer
}

func (panicky) GetStatus(context.Context, *controlv1.GetStatusRequest) (*controlv1.GetStatusResponse, error) {
	panic("boom")
}

func TestPanicBecomesInternal(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	srv, err := New(Config{
		Addr:           "127.0.0.1:0",
		Auth:           TokenAuth("t"),
		Logger:         slog.New(slog.NewTextHandler(t.Output(), nil)),
		Registerer:     reg,
		TracerProvider: noop.NewTracerProvider(),
		StopTimeout:    5 * time.Second,
		CallTimeout:    config.Default().Control.CallTimeout,
		Bounds:         config.Default().Control.Bounds,
	})
	if err != nil {
		t.Fatal(err)
	}
	controlv1.RegisterControlServiceServer(srv.Registrar(), panicky{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := controlv1.NewControlServiceClient(conn)
	for range 2 { // the server survives the first panic
		_, err = client.GetStatus(bearer(t.Context(), "t"), &controlv1.GetStatusRequest{})
		if status.Code(err) != codes.Internal {
			t.Errorf("GetStatus = %v, want Internal", err)
		}
	}
	// An unimplemented RPC still goes through auth and answers Unimplemented.
	if _, err := client.GetMessage(bearer(t.Context(), "t"), &controlv1.GetMessageRequest{MsgId: 1}); status.Code(err) != codes.Unimplemented {
		t.Errorf("GetMessage = %v, want Unimplemented", err)
	}
	if n := counterValue(t, reg, "msgx_control_grpc_panics_recovered_total"); n != 2 {
		t.Errorf("panics counted = %v, want 2", n)
	}
	if n, err := testutil.GatherAndCount(reg, "grpc_server_handled_total"); err != nil || n == 0 {
		t.Errorf("grpc_server_handled_total series = %d (%v), want the gRPC metrics registered", n, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("counter %s not registered", name)
	return 0
}
