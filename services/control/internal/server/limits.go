package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/services/control/internal/sendbudget"
)

// The transport's limits (docs/security.md). They bound what one client can make the server
// hold before any credential is checked: streams and header bytes per connection, and the rate
// of calls without a valid credential.
const (
	// MaxConcurrentStreams is the streams one connection may have open; the client queues the
	// rest (grpc-go honours the HTTP/2 setting) or has them refused.
	MaxConcurrentStreams = 100
	// MaxHeaderListSize bounds a call's metadata: a token is some dozens of bytes, and an
	// 8 MB header would otherwise be buffered and hashed.
	MaxHeaderListSize = 8 << 10
	// MaxRecvMsgSize bounds a request message; the largest request (10,000 IDs) is ~60 KB.
	MaxRecvMsgSize = 1 << 20
	// UnauthenticatedRate and UnauthenticatedBurst bound, per connection, the calls that carry
	// no valid credential (health checks, reflection, wrong tokens); past them a call is refused
	// with RESOURCE_EXHAUSTED before a stream is set up for it.
	UnauthenticatedRate  = 10
	UnauthenticatedBurst = 20
	// RefusalLogInterval is how often refused calls are summarised in the log: one line per
	// interval with the count, not one line per call.
	RefusalLogInterval = 10 * time.Second
)

// slots is a counting semaphore that never waits: a bound refuses at once what it cannot
// hold, since a waiting call would hold its memory all the same.
type slots struct{ c chan struct{} }

func newSlots(n int) *slots { return &slots{c: make(chan struct{}, n)} }

func (s *slots) tryAcquire() bool {
	select {
	case s.c <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *slots) release() { <-s.c }

func (s *slots) inUse() int { return len(s.c) }

// boundedListener accepts at most cap(slots) open connections: one past it is closed at
// once. grpc-go would otherwise give every accepted connection its buffers and goroutines,
// however many there are.
type boundedListener struct {
	net.Listener
	slots *slots
	// refused is called for every connection closed at the bound.
	refused func()
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.slots.tryAcquire() {
			return &slotConn{Conn: c, release: l.slots.release}, nil
		}
		l.refused()
		_ = c.Close()
	}
}

// slotConn gives its connection's slot back when it is closed, once however often Close is
// called.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// connLimiter is the per-connection budget of unauthenticated calls, attached to the
// connection's context by the stats handler and spent by the tap handle.
type connLimiter struct{ *rate.Limiter }

type connLimiterKey struct{}

// connTagger is a stats handler that only tags each new connection with its own limiter.
type connTagger struct{}

func (connTagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connTagger) HandleRPC(context.Context, stats.RPCStats)                       {}
func (connTagger) HandleConn(context.Context, stats.ConnStats)                     {}
func (connTagger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connLimiterKey{}, connLimiter{rate.NewLimiter(UnauthenticatedRate, UnauthenticatedBurst)})
}

// gate is the check every call passes before its stream exists, on the transport's reader
// goroutine, so before a byte of its body is read or buffered. It must stay cheap: a token
// digest, a limiter and two semaphores.
type gate struct {
	auth Auth
	// anonymous holds the health calls in flight (they need no credential), calls the
	// authenticated calls of the API (and of any other registered service).
	anonymous, calls *slots
	refused          *refusalLog
	budget           *sendbudget.Budget
	// throttled counts the calls over their connection's rate, full those over a global bound.
	throttled, full prometheus.Counter
}

// errNoCredential refuses, in the tap, a call of the API without a valid credential. It does
// not say which part was missing or wrong: the tap has not parsed the call far enough to tell
// a caller more than the auth interceptor would.
var errNoCredential = status.Error(codes.Unauthenticated, "missing or invalid credential: an authorization bearer token or a client certificate of a configured subject")

// handle decides a call from its headers and its connection: a call without a valid
// credential spends its connection's rate budget and, unless it is a health call, is refused
// UNAUTHENTICATED; every call then takes a slot of its global bound (health's or the
// authenticated calls'), RESOURCE_EXHAUSTED when none is free. The slot is given back once the
// stream's context has ended and its connection has no response bytes queued: grpc-go ends
// the context when the handler has written its status, before the response is flushed, and a
// client that grants no window would otherwise hold responses that no bound counts (issue
// #57, finding 1; package sendbudget).
func (t *gate) handle(ctx context.Context, info *tap.Info) (context.Context, error) {
	service := serviceOf(info.FullMethodName)
	// Only health needs no credential: reflection answers are tens of KB each (the whole
	// API's descriptors), and unread they held memory for anyone (docs/security.md).
	free := isHealth(service)
	if !t.auth.authenticated(ctx, info.Header) {
		if l, ok := ctx.Value(connLimiterKey{}).(connLimiter); ok && !l.Allow() {
			t.throttled.Inc()
			t.refused.note(ctx, "throttled", info.FullMethodName)
			return nil, status.Error(codes.ResourceExhausted, "too many calls without a valid credential on this connection")
		}
		if !free {
			t.refused.note(ctx, "unauthenticated", info.FullMethodName)
			return nil, errNoCredential
		}
	}
	bound, what := t.calls, "calls"
	if free {
		bound, what = t.anonymous, "health calls"
	}
	if !bound.tryAcquire() {
		t.full.Inc()
		t.refused.note(ctx, "server_full", info.FullMethodName)
		return nil, status.Errorf(codes.ResourceExhausted, "the server has %d %s in flight, its bound; retry later", cap(bound.c), what)
	}
	// A call whose expected answer does not fit the bytes its connection or the server may hold
	// unread is refused before its handler builds it (package sendbudget).
	ctx = sendbudget.Track(ctx)
	if err := t.budget.Admit(ctx, info.FullMethodName); err != nil {
		bound.release()
		return nil, err
	}
	context.AfterFunc(ctx, func() { sendbudget.Hold(ctx, bound.release) })
	return ctx, nil
}

// deadline gives every call of the API's services a server-side deadline, so a client that
// sets none cannot make a call hold a database connection for as long as it likes. A client's
// own shorter deadline still wins.
func deadline(services map[string]bool, timeout time.Duration) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !services[serviceOf(info.FullMethod)] {
			return handler(ctx, req)
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return handler(ctx, req)
	}
}

// refusalLog summarises refused calls (bad or missing credentials, throttling, a role too
// low): the first refusal of an interval is logged at once, the rest are counted into the next
// line, so a flood of refusals cannot flood the log.
type refusalLog struct {
	log   *slog.Logger
	clock clock.Clock
	// unauthenticated counts the calls refused UNAUTHENTICATED, every one of them.
	unauthenticated prometheus.Counter

	mu         sync.Mutex
	next       time.Time
	suppressed map[string]int
}

func newRefusalLog(log *slog.Logger, clk clock.Clock, unauthenticated prometheus.Counter) *refusalLog {
	return &refusalLog{log: log, clock: clk, unauthenticated: unauthenticated, suppressed: map[string]int{}}
}

func (r *refusalLog) note(ctx context.Context, kind, method string) {
	if kind == "unauthenticated" && r.unauthenticated != nil {
		r.unauthenticated.Inc()
	}
	now := r.clock.Now()
	r.mu.Lock()
	if now.Before(r.next) {
		r.suppressed[kind]++
		r.mu.Unlock()
		return
	}
	r.next = now.Add(RefusalLogInterval)
	counts := r.suppressed
	r.suppressed = map[string]int{}
	r.mu.Unlock()
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	attrs := []any{"kind", kind, "method", method, "peer", addr, "interval", RefusalLogInterval}
	for k, n := range counts {
		attrs = append(attrs, "suppressed_"+k, n)
	}
	r.log.WarnContext(ctx, "control API refused a call (one line per interval; the rest are counted)", attrs...)
}

// refusals notes every call that ends Unauthenticated or PermissionDenied.
func refusals(r *refusalLog) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		switch status.Code(err) {
		case codes.Unauthenticated:
			r.note(ctx, "unauthenticated", info.FullMethod)
		case codes.PermissionDenied:
			r.note(ctx, "permission_denied", info.FullMethod)
		}
		return resp, err
	}
}

func refusalsStream(r *refusalLog) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		switch status.Code(err) {
		case codes.Unauthenticated:
			r.note(ss.Context(), "unauthenticated", info.FullMethod)
		case codes.PermissionDenied:
			r.note(ss.Context(), "permission_denied", info.FullMethod)
		}
		return err
	}
}

// countStream counts every stream it sees.
func countStream(c prometheus.Counter) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		c.Inc()
		return handler(srv, ss)
	}
}

// boundMetrics are the global bounds' counters.
type boundMetrics struct {
	full, connRefused prometheus.Counter
}

// registerBounds registers the counters of the refusals at the global bounds and the gauges
// of what each bound holds now, so an operator sees a bound reached before a caller reports it.
func registerBounds(reg prometheus.Registerer, g *gate, conns *slots) (boundMetrics, error) {
	m := boundMetrics{
		full: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "msgx_control_grpc_bound_refused_total",
			Help: "Control gRPC calls refused RESOURCE_EXHAUSTED because a global bound (control.max-calls, control.max-anonymous-calls) was reached.",
		}),
		connRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "msgx_control_grpc_connections_refused_total",
			Help: "Connections to the control gRPC listener closed on accept because control.max-connections were open.",
		}),
	}
	collectors := []prometheus.Collector{m.full, m.connRefused,
		gaugeFunc("msgx_control_grpc_connections_open", "Open connections to the control gRPC listener (bound: control.max-connections).", conns),
		gaugeFunc("msgx_control_grpc_calls_in_flight", "Authenticated control API calls in flight (bound: control.max-calls).", g.calls),
		gaugeFunc("msgx_control_grpc_anonymous_calls_in_flight", "Health calls in flight (bound: control.max-anonymous-calls).", g.anonymous),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return boundMetrics{}, fmt.Errorf("server: register bound metrics: %w", err)
		}
	}
	return m, nil
}

func gaugeFunc(name, help string, s *slots) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(s.inUse()) })
}

// newSendBudget builds the budget of response bytes queued for clients that have not read them
// (issue #57, finding 1) with its metrics: the bytes queued, the messages refused at a bound,
// the connections closed at the stall timeout. Its refusals and stalls are summarised in the
// refusal log with the others.
func newSendBudget(reg prometheus.Registerer, b config.Bounds, refused *refusalLog) (*sendbudget.Budget, error) {
	refusedAt := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "msgx_control_grpc_send_refused_total",
		Help: "Control gRPC calls refused RESOURCE_EXHAUSTED at the bytes a connection (bound=\"connection\", control.max-queued-bytes-per-connection) or all connections (bound=\"total\", control.max-queued-bytes) may hold unread: a response that did not fit, or a call in the tap while the bound was full.",
	}, []string{"bound"})
	stalled := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "msgx_control_grpc_send_stalled_total",
		Help: "Control gRPC connections closed because their queued responses made no progress for control.send-stall-timeout.",
	})
	budget, err := sendbudget.New(sendbudget.Limits{PerConnection: int64(b.MaxQueuedBytesPerConnection), Total: int64(b.MaxQueuedBytes), Stall: b.SendStallTimeout},
		sendbudget.Hooks{
			Refused: func(ctx context.Context, bound string) {
				refusedAt.WithLabelValues(bound).Inc()
				refused.note(ctx, "send_budget_"+bound, "")
			},
			Stalled: func(remote net.Addr) {
				stalled.Inc()
				refused.note(peer.NewContext(context.Background(), &peer.Peer{Addr: remote}), "send_stalled", "")
			},
		})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "msgx_control_grpc_queued_response_bytes",
		Help: "Response bytes the control server holds for clients that have not read them yet (bound: control.max-queued-bytes).",
	}, func() float64 { return float64(budget.Queued()) })
	for _, c := range []prometheus.Collector{refusedAt, stalled, queued} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("server: register send budget metrics: %w", err)
		}
	}
	return budget, nil
}
