package server

import (
	"context"
	"log/slog"
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

// tapHandle refuses, before the stream exists, a call without a valid credential once its
// connection spent its budget. It runs on the transport's reader goroutine: it must stay cheap
// (a token digest and a limiter).
func tapHandle(a Auth, refused *refusalLog, throttled prometheus.Counter) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if a.authenticated(ctx, info.Header) {
			return ctx, nil
		}
		l, ok := ctx.Value(connLimiterKey{}).(connLimiter)
		if !ok || l.Allow() {
			return ctx, nil
		}
		throttled.Inc()
		refused.note(ctx, "throttled", info.FullMethodName)
		return nil, status.Error(codes.ResourceExhausted, "too many calls without a valid credential on this connection")
	}
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
