package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	// The control binary links gzip (through the OTLP exporter), so a client may ask for it.
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/pkg/config"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/zerowindow"
)

// bulky is a ControlService whose GetMessageBody answers size bytes of text at once: the
// handler ends as soon as it is called, so whatever the server holds afterwards is the
// response waiting for its client.
type bulky struct {
	controlv1.UnimplementedControlServiceServer
	size int
}

func (b bulky) GetMessageBody(context.Context, *controlv1.GetMessageBodyRequest) (*controlv1.GetMessageBodyResponse, error) {
	return &controlv1.GetMessageBodyResponse{Text: strings.Repeat("x", b.size), Eof: true}, nil
}

const getBody = "/msgx.control.v1.ControlService/GetMessageBody"

// unreadCalls dials a client that grants no window and starts n GetMessageBody calls on it.
func unreadCalls(t *testing.T, addr string, n int) *zerowindow.Conn {
	t.Helper()
	z, err := zerowindow.Dial(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Close() })
	req, err := proto.Marshal(&controlv1.GetMessageBodyRequest{MsgId: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := z.Call(getBody, req, "authorization", "Bearer "+opTok); err != nil {
			t.Fatal(err)
		}
	}
	return z
}

// answered waits until every call on z has an answer (its response headers or its status).
func answered(t *testing.T, z *zerowindow.Conn, n int) map[string]int {
	t.Helper()
	var tally map[string]int
	testwait.ForState(t, 10*time.Second, fmt.Sprintf("%d calls answered", n), func() (bool, string) {
		tally = z.Tally()
		return tally["none"] == 0, fmt.Sprint(tally)
	})
	return tally
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	n, err := testutil.GatherAndCount(reg, name)
	if err != nil || n != 1 {
		t.Fatalf("%s: %d series, %v", name, n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func counterWith(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// Responses a client never reads stay queued in the server after their handlers end. They are
// bounded per connection and over all connections: a response that does not fit is refused
// RESOURCE_EXHAUSTED, and the calls whose responses wait keep their slots. The client grants
// no window and never sends WINDOW_UPDATE.
func TestUnreadResponsesAreBounded(t *testing.T) {
	t.Parallel()
	const size = 400_000
	conn, reg := serveBoundedOn(t, boundsWith(func(b *config.Bounds) {
		b.MaxCalls = 64
		b.MaxQueuedBytesPerConnection = 1 << 20
		b.MaxQueuedBytes = 1_000_000
		b.SendStallTimeout = time.Minute
	}),
		bulky{size: size})
	first := unreadCalls(t, conn.Target(), 10)
	tally := answered(t, first, 10)
	// Two fit the connection's 1 MiB; the rest are refused.
	if tally["unread"] != 2 || tally["ResourceExhausted"] != 8 {
		t.Errorf("one connection, 10 calls: %v, want 2 unread and 8 RESOURCE_EXHAUSTED", tally)
	}
	for id, a := range first.Answers() {
		if a.Data != 0 {
			t.Errorf("stream %d received %d bytes of DATA with no window granted", id, a.Data)
		}
		if a.Status == "ResourceExhausted" && !strings.Contains(a.Message, "control.max-queued-bytes-per-connection") {
			t.Errorf("stream %d refused with %q, want it to name control.max-queued-bytes-per-connection", id, a.Message)
		}
	}
	// A second connection: its first response does not fit the 1,000,000 bytes of all
	// connections with two of ~400 KB queued on the first.
	second := unreadCalls(t, conn.Target(), 1)
	if tally := answered(t, second, 1); tally["ResourceExhausted"] != 1 {
		t.Errorf("a second connection past the total: %v, want RESOURCE_EXHAUSTED", tally)
	}
	if got := counterWith(t, reg, "msgx_control_grpc_send_refused_total", "bound", "connection"); got != 8 {
		t.Errorf("%v refusals at the connection's bound, want 8", got)
	}
	if got := counterWith(t, reg, "msgx_control_grpc_send_refused_total", "bound", "total"); got != 1 {
		t.Errorf("%v refusals at the total bound, want 1", got)
	}
	queued := gauge(t, reg, "msgx_control_grpc_queued_response_bytes")
	inFlight := gauge(t, reg, "msgx_control_grpc_calls_in_flight")
	t.Logf("queued %v bytes, %v calls in flight", queued, inFlight)
	// Each response is its proto size and gRPC's 5-byte prefix.
	one := proto.Size(&controlv1.GetMessageBodyResponse{Text: strings.Repeat("x", size), Eof: true}) + 5
	if queued != float64(2*one) {
		t.Errorf("%v bytes queued, want the two unread responses' %d", queued, 2*one)
	}
	// The handlers have ended; the two calls whose responses wait keep their slots.
	if inFlight != 2 {
		t.Errorf("%v calls in flight, want the 2 whose responses wait unread", inFlight)
	}
}

// A call's slot and its bytes are given back once its response is flushed: when the client
// reads at last, or when it resets the stream.
func TestSlotsAreHeldUntilTheResponseLeaves(t *testing.T) {
	t.Parallel()
	conn, reg := serveBoundedOn(t, boundsWith(func(b *config.Bounds) {
		b.MaxCalls = 3
		b.SendStallTimeout = time.Minute
	}), bulky{size: 100_000})
	z := unreadCalls(t, conn.Target(), 3)
	if tally := answered(t, z, 3); tally["unread"] != 3 {
		t.Fatalf("3 calls: %v, want 3 unread", tally)
	}
	if n := gauge(t, reg, "msgx_control_grpc_calls_in_flight"); n != 3 {
		t.Errorf("%v calls in flight with 3 responses unread, want 3", n)
	}
	// The bound is reached: another connection's call is refused, though no handler runs.
	other := unreadCalls(t, conn.Target(), 1)
	if tally := answered(t, other, 1); tally["ResourceExhausted"] != 1 {
		t.Errorf("a call with 3 responses unread at max-calls 3: %v, want RESOURCE_EXHAUSTED", tally)
	}
	// A reset stream drops its response: its share of the bytes comes back with it once no
	// stream of the connection is open, and so do the slots.
	if err := z.Cancel(1); err != nil {
		t.Fatal(err)
	}
	if err := z.Grant(1 << 20); err != nil {
		t.Fatal(err)
	}
	testwait.ForState(t, 10*time.Second, "the responses read, their slots and bytes back", func() (bool, string) {
		q, n := gauge(t, reg, "msgx_control_grpc_queued_response_bytes"), gauge(t, reg, "msgx_control_grpc_calls_in_flight")
		return q == 0 && n == 0, fmt.Sprintf("%v bytes queued, %v calls in flight, %v", q, n, z.Tally())
	})
	if tally := z.Tally(); tally["OK"] != 2 {
		t.Errorf("after the window was granted: %v, want the 2 not reset OK", tally)
	}
	again := unreadCalls(t, conn.Target(), 1)
	if tally := answered(t, again, 1); tally["unread"] != 1 {
		t.Errorf("a call after the slots came back: %v, want it answered", tally)
	}
}

// A connection whose queued responses make no progress for the stall timeout is closed, and
// what it held is given back.
func TestStalledConnectionIsClosed(t *testing.T) {
	t.Parallel()
	conn, reg := serveBoundedOn(t, boundsWith(func(b *config.Bounds) { b.SendStallTimeout = 200 * time.Millisecond }), bulky{size: 100_000})
	z := unreadCalls(t, conn.Target(), 5)
	select {
	case <-z.Closed():
	case <-time.After(10 * time.Second):
		t.Fatalf("the connection was not closed 10 s after its responses stalled: %v", z.Tally())
	}
	testwait.ForState(t, 5*time.Second, "the stalled connection's bytes and slots back", func() (bool, string) {
		q, n := gauge(t, reg, "msgx_control_grpc_queued_response_bytes"), gauge(t, reg, "msgx_control_grpc_calls_in_flight")
		return q == 0 && n == 0, fmt.Sprintf("%v bytes queued, %v calls in flight", q, n)
	})
	if n := gauge(t, reg, "msgx_control_grpc_send_stalled_total"); n != 1 {
		t.Errorf("%v stalled connections counted, want 1", n)
	}
}

// A response the client asked to be compressed is counted at its compressed size: the
// reservation of its proto size is settled against what grpc-go queued.
func TestCompressedResponsesAreCountedAsSent(t *testing.T) {
	t.Parallel()
	conn, reg := serveBoundedOn(t, boundsWith(func(b *config.Bounds) { b.SendStallTimeout = time.Minute }), bulky{size: 400_000})
	z, err := zerowindow.Dial(t.Context(), conn.Target())
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	req, err := proto.Marshal(&controlv1.GetMessageBodyRequest{MsgId: 1})
	if err != nil {
		t.Fatal(err)
	}
	// An uncompressed request may name its encoding; grpc-go answers in it.
	if _, err := z.Call(getBody, req, "authorization", "Bearer "+opTok, "grpc-encoding", "gzip", "grpc-accept-encoding", "gzip"); err != nil {
		t.Fatal(err)
	}
	if tally := answered(t, z, 1); tally["unread"] != 1 {
		t.Fatalf("a gzip call: %v, want it unread", tally)
	}
	testwait.ForState(t, 5*time.Second, "the reservation settled at the compressed size", func() (bool, string) {
		q := gauge(t, reg, "msgx_control_grpc_queued_response_bytes")
		return q > 0 && q < 10_000, fmt.Sprintf("%v bytes queued for 400,000 characters of x, gzipped", q)
	})
}

// The largest response is the connection's budget: one larger is refused, never sent.
func TestLargestResponseIsTheConnectionBudget(t *testing.T) {
	t.Parallel()
	conn, _ := serveBoundedOn(t, boundsWith(func(b *config.Bounds) { b.MaxQueuedBytesPerConnection = 1 << 20 }), bulky{size: 1 << 20})
	_, err := controlv1.NewControlServiceClient(conn).GetMessageBody(bearer(t.Context(), opTok), &controlv1.GetMessageBodyRequest{MsgId: 1})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 1 MiB response with a 1 MiB connection budget: %v, want RESOURCE_EXHAUSTED", err)
	}
}
