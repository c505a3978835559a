package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// A bound refuses at once what it cannot hold and takes a call again once a slot is back.
func TestSlots(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		size     int
		acquire  int
		release  int
		thenMore int
		wantOK   int
	}{
		{name: "below the bound", size: 3, acquire: 2, wantOK: 2},
		{name: "at the bound", size: 3, acquire: 5, wantOK: 3},
		{name: "released slots are taken again", size: 3, acquire: 3, release: 2, thenMore: 3, wantOK: 5},
		{name: "a bound of one", size: 1, acquire: 2, release: 1, thenMore: 2, wantOK: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSlots(tt.size)
			ok := 0
			for range tt.acquire {
				if s.tryAcquire() {
					ok++
				}
			}
			for range tt.release {
				s.release()
			}
			for range tt.thenMore {
				if s.tryAcquire() {
					ok++
				}
			}
			if ok != tt.wantOK {
				t.Errorf("%d acquired, want %d", ok, tt.wantOK)
			}
			if s.inUse() > tt.size {
				t.Errorf("%d in use, over the bound %d", s.inUse(), tt.size)
			}
		})
	}
}

// Past the bound a connection is closed as soon as it is accepted; a closed connection gives
// its slot back, once however often it is closed.
func TestBoundedListenerClosesConnectionsPastTheBound(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	bl := &boundedListener{Listener: ln, slots: newSlots(2), refused: func() { refused.Add(1) }}
	defer bl.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := bl.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	dial()
	dial()
	first, second := <-accepted, <-accepted
	third := dial()
	// The third is accepted by the kernel and closed by the listener: the client reads EOF.
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the connection past the bound read %v, want EOF", err)
	}
	if refused.Load() != 1 {
		t.Errorf("%d refusals counted, want 1", refused.Load())
	}
	_ = first.Close()
	_ = first.Close() // a second Close must not give a second slot back
	dial()
	<-accepted
	fourth := dial()
	_ = fourth.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := fourth.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("with the freed slot taken again, the next connection read %v, want EOF", err)
	}
	if n := bl.slots.inUse(); n != 2 {
		t.Errorf("%d slots in use, want 2", n)
	}
	_ = second.Close()
}

// blocking is a ControlService whose GetStatus holds its call until release is closed, and
// counts the calls that reached it.
type blocking struct {
	controlv1.UnimplementedControlServiceServer
	release chan struct{}
	reached atomic.Int64
}

func (b *blocking) GetStatus(ctx context.Context, _ *controlv1.GetStatusRequest) (*controlv1.GetStatusResponse, error) {
	b.reached.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return &controlv1.GetStatusResponse{}, nil
}

// boundsWith is the registry's default bounds (what production starts with) with set applied.
func boundsWith(set func(b *config.Bounds)) config.Bounds {
	b := config.Default().Control.Bounds
	set(&b)
	return b
}

func serveBounded(t *testing.T, b config.Bounds, svc controlv1.ControlServiceServer) *grpc.ClientConn {
	t.Helper()
	conn, _ := serveBoundedOn(t, b, svc)
	return conn
}

// serveBoundedOn is serveBounded that also returns the server's registry.
func serveBoundedOn(t *testing.T, b config.Bounds, svc controlv1.ControlServiceServer) (*grpc.ClientConn, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	srv, err := New(Config{
		Addr:           "127.0.0.1:0",
		Auth:           TokenAuth(opTok),
		Services:       []string{controlv1.ControlService_ServiceDesc.ServiceName},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer:     reg,
		TracerProvider: noop.NewTracerProvider(),
		StopTimeout:    2 * time.Second,
		CallTimeout:    config.Default().Control.CallTimeout,
		Bounds:         b,
	})
	if err != nil {
		t.Fatal(err)
	}
	controlv1.RegisterControlServiceServer(srv.Registrar(), svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn, reg
}

// A call of the API without a valid credential is refused UNAUTHENTICATED by the tap: its
// handler never runs, its body is never read, and it takes no slot of the call bound.
func TestTapRefusesTheAPIWithoutCredential(t *testing.T) {
	t.Parallel()
	svc := &blocking{release: make(chan struct{})}
	close(svc.release)
	conn, reg := serveBoundedOn(t, boundsWith(func(b *config.Bounds) { b.MaxCalls = 1 }), svc)
	client := controlv1.NewControlServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no token", ctx},
		{"a wrong token", bearer(ctx, "wrong-token-0123456789abcdef0123456")},
		{"a token of another scheme", metadataBasic(ctx)},
	} {
		_, err := client.GetStatus(tc.ctx, &controlv1.GetStatusRequest{})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want UNAUTHENTICATED", tc.name, err)
		}
	}
	if n := svc.reached.Load(); n != 0 {
		t.Errorf("%d unauthenticated calls reached the handler, want 0", n)
	}
	if _, err := client.GetStatus(bearer(ctx, opTok), &controlv1.GetStatusRequest{}); err != nil {
		t.Errorf("an authenticated call after the refusals: %v", err)
	}
	// The interceptors see every call the tap lets through: only the authenticated one here.
	if started := startedGetStatus(t, reg); started != 1 {
		t.Errorf("%v calls got past the tap, want only the authenticated one", started)
	}
}

// startedGetStatus is grpc_server_started_total of GetStatus.
func startedGetStatus(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_started_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_method" && l.GetValue() == "GetStatus" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatal("no grpc_server_started_total series for GetStatus")
	return 0
}

// The authenticated calls in flight are bounded over all connections; a slot is free again
// when its call ends.
func TestCallsInFlightAreBounded(t *testing.T) {
	t.Parallel()
	svc := &blocking{release: make(chan struct{})}
	conn := serveBounded(t, boundsWith(func(b *config.Bounds) { b.MaxCalls = 2 }), svc)
	client := controlv1.NewControlServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	held := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := client.GetStatus(bearer(ctx, opTok), &controlv1.GetStatusRequest{})
			held <- err
		}()
	}
	testwait.ForState(t, 5*time.Second, "two calls in the handler", func() (bool, string) {
		return svc.reached.Load() == 2, ""
	})
	_, err := client.GetStatus(bearer(ctx, opTok), &controlv1.GetStatusRequest{})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a third call with two in flight: %v, want RESOURCE_EXHAUSTED", err)
	}
	close(svc.release)
	for range 2 {
		if err := <-held; err != nil {
			t.Errorf("a held call: %v", err)
		}
	}
	testwait.ForState(t, 5*time.Second, "a call after the held ones ended", func() (bool, string) {
		_, err := client.GetStatus(bearer(ctx, opTok), &controlv1.GetStatusRequest{})
		return err == nil, ""
	})
}

// Health streams need no credential but share one bound over all connections: past it a
// stream is refused RESOURCE_EXHAUSTED, and a stream that ends gives its slot back.
func TestAnonymousStreamsAreBoundedOverAllConnections(t *testing.T) {
	t.Parallel()
	svc := &blocking{release: make(chan struct{})}
	conn := serveBounded(t, boundsWith(func(b *config.Bounds) { b.MaxAnonymousCalls = 3 }), svc)
	// A second connection: the bound is the server's, not each connection's.
	other, err := grpc.NewClient(conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	watch := func(c *grpc.ClientConn) (context.CancelFunc, error) {
		wctx, wcancel := context.WithCancel(ctx)
		s, err := healthpb.NewHealthClient(c).Watch(wctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = s.Recv()
		}
		return wcancel, err
	}
	var open []context.CancelFunc
	for i := range 3 {
		c := conn
		if i%2 == 1 {
			c = other
		}
		stop, err := watch(c)
		if err != nil {
			t.Fatalf("watch %d: %v", i+1, err)
		}
		open = append(open, stop)
	}
	stop, err := watch(other)
	stop()
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a fourth watch with three open: %v, want RESOURCE_EXHAUSTED", err)
	}
	// A health check with a valid token is still a credential-free call: it is bounded too.
	if _, err := healthpb.NewHealthClient(conn).Check(bearer(ctx, opTok), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a health check with three watches open: %v, want RESOURCE_EXHAUSTED", err)
	}
	// The API's authenticated calls have their own bound.
	close(svc.release)
	if _, err := controlv1.NewControlServiceClient(conn).GetStatus(bearer(ctx, opTok), &controlv1.GetStatusRequest{}); err != nil {
		t.Errorf("an authenticated call with the anonymous bound reached: %v", err)
	}
	open[0]()
	testwait.ForState(t, 5*time.Second, "a watch after one ended", func() (bool, string) {
		stop, err := watch(conn)
		if err == nil {
			open = append(open, stop)
		} else {
			stop()
		}
		return err == nil, fmt.Sprint(err)
	})
	for _, stop := range open {
		stop()
	}
}

// metadataBasic carries the operator token under another scheme than Bearer.
func metadataBasic(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+opTok)
}

// A connection lives MaxConnectionAge and its calls the grace after it: a Watch stream does
// not hold its connection for ever, and its slot comes back.
func TestConnectionAgeEndsLongStreams(t *testing.T) {
	t.Parallel()
	conn := serveBounded(t, boundsWith(func(b *config.Bounds) {
		b.MaxConnectionAge = 300 * time.Millisecond
		b.MaxConnectionAgeGrace = 300 * time.Millisecond
		b.MaxAnonymousCalls = 1
	}),
		&blocking{release: make(chan struct{})})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.Unavailable || time.Since(began) > 5*time.Second {
		t.Errorf("the Watch stream ended with %v after %s, want UNAVAILABLE within the age and its grace", err, time.Since(began))
	}
	testwait.ForState(t, 5*time.Second, "the slot back for a new stream", func() (bool, string) {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil, fmt.Sprint(err)
	})
}
