// Package server is the control service's gRPC server: the interceptor chain, tracing, the
// standard health service and server reflection around the services registered on it. It knows
// nothing of the pipeline; handlers live in package api.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/validator"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
)

// Config configures a Server.
type Config struct {
	// Addr is the TCP address Run listens on (MSGX_GRPC_ADDR).
	Addr string
	Auth Auth
	// TLS, when set, serves TLS (and mTLS when it requires client certificates); see LoadTLS.
	TLS *tls.Config
	// Services are the names the health service reports SERVING for, besides the overall "".
	Services []string

	Logger         *slog.Logger
	Registerer     prometheus.Registerer
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// StopTimeout bounds the graceful stop: calls still running after it are cut.
	StopTimeout time.Duration
	// CallTimeout is the server-side deadline of every call of the API's services
	// (control.call-timeout).
	CallTimeout time.Duration
	// Clock times the refusal log's intervals; default the real clock.
	Clock clock.Clock
	// RequireComment refuses a mutating call without a comment (control.require-comment),
	// dry runs excepted.
	RequireComment bool
	// Bounds are the global limits (docs/security.md): what all clients together can make the
	// server hold, where the constants of limits.go bound one connection. Every field is set:
	// the values come from pkg/config's registry.
	Bounds config.Bounds
}

// Server is the control gRPC server.
type Server struct {
	cfg     Config
	grpc    *grpc.Server
	health  *health.Server
	metrics *grpcprom.ServerMetrics
	log     *slog.Logger
	// conns holds the open connections' slots (Bounds.MaxConnections); connRefused counts
	// the connections closed at the bound.
	conns       *slots
	connRefused prometheus.Counter
	// refused summarises those connections in the log with the refused calls.
	refused *refusalLog
}

// New builds the server; register services on Registrar() before Serve.
func New(cfg Config) (*Server, error) {
	if err := cfg.Auth.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil || cfg.Registerer == nil || cfg.TracerProvider == nil {
		return nil, errors.New("server: Logger, Registerer and TracerProvider are required")
	}
	if cfg.Propagator == nil {
		cfg.Propagator = propagation.TraceContext{}
	}
	// Both come from the registry (control.call-timeout, shutdown-timeout) through app.New.
	if cfg.StopTimeout <= 0 || cfg.CallTimeout <= 0 {
		return nil, errors.New("server: StopTimeout and CallTimeout must be positive")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	log := cfg.Logger.With("component", "grpc")

	// grpc_server_* metrics on the service's registry, served by the admin /metrics endpoint.
	metrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	if err := cfg.Registerer.Register(metrics); err != nil {
		return nil, fmt.Errorf("server: register gRPC metrics: %w", err)
	}
	panics := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "msgx_control_grpc_panics_recovered_total",
		Help: "Panics in control gRPC handlers turned into INTERNAL errors.",
	})
	if err := cfg.Registerer.Register(panics); err != nil {
		return nil, fmt.Errorf("server: register panic counter: %w", err)
	}
	throttled := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "msgx_control_grpc_throttled_total",
		Help: "Control gRPC calls without a valid credential refused by the per-connection rate limit.",
	})
	if err := cfg.Registerer.Register(throttled); err != nil {
		return nil, fmt.Errorf("server: register throttle counter: %w", err)
	}
	anonymous := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "msgx_control_grpc_anonymous_calls_total",
		Help: "Control gRPC calls that the access log keeps at DEBUG: server reflection (needs no credential) and calls refused UNAUTHENTICATED.",
	}, []string{"kind"})
	if err := cfg.Registerer.Register(anonymous); err != nil {
		return nil, fmt.Errorf("server: register anonymous call counter: %w", err)
	}
	refused := newRefusalLog(log, cfg.Clock, anonymous.WithLabelValues("unauthenticated"))
	budget, err := newSendBudget(cfg.Registerer, cfg.Bounds, refused)
	if err != nil {
		return nil, err
	}
	g := &gate{auth: cfg.Auth, anonymous: newSlots(cfg.Bounds.MaxAnonymousCalls), calls: newSlots(cfg.Bounds.MaxCalls),
		refused: refused, budget: budget, throttled: throttled}
	conns := newSlots(cfg.Bounds.MaxConnections)
	bounded, err := registerBounds(cfg.Registerer, g, conns)
	if err != nil {
		return nil, err
	}
	g.full = bounded.full
	reflected := anonymous.WithLabelValues("reflection")

	grpcLog := logging.LoggerFunc(func(ctx context.Context, level logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(level), msg, fields...)
	})
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(codeToLevel),
	}
	// Reflection needs no credential, so anyone can make many such calls: logged at DEBUG and
	// counted, never a line each at INFO.
	debugOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(func(codes.Code) logging.Level { return logging.LevelDebug }),
	}
	recoverOpts := []recovery.Option{recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		panics.Inc()
		log.ErrorContext(ctx, "panic in gRPC handler", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})}
	// Health checks arrive every few seconds from probes: they are neither logged nor asked for
	// a token. Reflection needs a token (the tap refuses it without one: its answers are large,
	// docs/security.md); it is logged at DEBUG and counted.
	needsToken := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return !isHealth(c.Service)
	})
	// Reads are logged at DEBUG when they succeed (a dashboard or a watch reads every few
	// seconds, and each line at INFO would bury the mutations); a read that fails keeps the
	// level of its code. Mutations are logged at INFO, besides their audit line.
	readOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(readLevel),
	}
	loggedMutation := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return !isHealth(c.Service) && !isReflection(c.Service) && Mutating(c.FullMethod())
	})
	loggedRead := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return !isHealth(c.Service) && !isReflection(c.Service) && !Mutating(c.FullMethod())
	})
	reflectionCall := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return isReflection(c.Service) })

	// The order follows go-grpc-middleware's v2 example server: metrics see every call,
	// refused ones included; logging sees the auth outcome, and the refusal log summarises
	// refused calls once per interval; recovery is innermost, next to the handler, so a panic
	// still passes through logging and metrics as INTERNAL. Between auth and recovery, the
	// audit log records every authenticated mutating call with its outcome (a reader refused
	// PERMISSION_DENIED by the role check included), then the server's own deadline starts,
	// then validation (the requests' Validate methods) refuses malformed requests with
	// INVALID_ARGUMENT before any handler runs.
	// Tracing is a stats handler rather than an interceptor (otelgrpc's interceptors are
	// deprecated), so a span covers the whole call, refused ones included. Probes' health
	// checks are not traced: they would be most of the spans and say nothing.
	api := map[string]bool{}
	for _, name := range cfg.Services {
		api[name] = true
	}
	opts := []grpc.ServerOption{
		// Limits that hold before any credential is checked (limits.go, docs/security.md).
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.MaxHeaderListSize(MaxHeaderListSize),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		// A response larger than a connection may queue could never be sent whole to a client
		// that reads slowly; it is refused RESOURCE_EXHAUSTED (package sendbudget).
		grpc.MaxSendMsgSize(int(cfg.Bounds.MaxQueuedBytesPerConnection)),
		grpc.ConnectionTimeout(10 * time.Second),
		// Clients may ping at most every 10 s and only with calls open; a connection without
		// calls for 5 minutes is closed (GOAWAY), so idle connections cannot pile up.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second}),
		// A connection lives MaxConnectionAge at most: then the client is asked to reconnect
		// (GOAWAY) and its calls have the grace to finish, so no stream (a health Watch, a
		// msgxctl watch) holds its connection's buffers for ever.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute, Time: 2 * time.Minute, Timeout: 20 * time.Second,
			MaxConnectionAge: cfg.Bounds.MaxConnectionAge, MaxConnectionAgeGrace: cfg.Bounds.MaxConnectionAgeGrace}),
		grpc.InTapHandle(g.handle),
		grpc.StatsHandler(connTagger{}),
		grpc.StatsHandler(budget.StatsHandler()),
		grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(cfg.TracerProvider),
			otelgrpc.WithPropagators(cfg.Propagator),
			otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool { return !isHealth(serviceOf(info.FullMethodName)) }),
		)),
		grpc.ChainUnaryInterceptor(
			metrics.UnaryServerInterceptor(),
			// Outermost but for metrics: it reserves the response that the chain returns.
			budget.UnaryInterceptor(),
			selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(grpcLog, logOpts...), loggedMutation),
			selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(grpcLog, readOpts...), loggedRead),
			refusals(refused),
			selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(cfg.Auth.authenticate), needsToken),
			auditInterceptor(cfg.Logger.With("component", "audit"), api),
			authorize(api),
			deadline(api, cfg.CallTimeout),
			validator.UnaryServerInterceptor(),
			requireComment(api, cfg.RequireComment),
			recovery.UnaryServerInterceptor(recoverOpts...),
		),
		grpc.ChainStreamInterceptor(
			metrics.StreamServerInterceptor(),
			budget.StreamInterceptor(),
			selector.StreamServerInterceptor(logging.StreamServerInterceptor(grpcLog, logOpts...), loggedMutation),
			selector.StreamServerInterceptor(logging.StreamServerInterceptor(grpcLog, readOpts...), loggedRead),
			selector.StreamServerInterceptor(logging.StreamServerInterceptor(grpcLog, debugOpts...), reflectionCall),
			selector.StreamServerInterceptor(countStream(reflected), reflectionCall),
			refusalsStream(refused),
			selector.StreamServerInterceptor(auth.StreamServerInterceptor(cfg.Auth.authenticate), needsToken),
			auditStreamInterceptor(cfg.Logger.With("component", "audit"), api),
			authorizeStream(api),
			validator.StreamServerInterceptor(),
			recovery.StreamServerInterceptor(recoverOpts...),
		),
	}
	// The send budget watches every connection's frames above TLS (package sendbudget).
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	opts = append(opts, grpc.Creds(budget.Credentials(creds)))
	gs := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)

	return &Server{cfg: cfg, grpc: gs, health: hs, metrics: metrics, log: log, conns: conns, connRefused: bounded.connRefused, refused: refused}, nil
}

// Registrar is where the API's services are registered, before Serve.
func (s *Server) Registrar() grpc.ServiceRegistrar { return s.grpc }

// Listen opens the listener on Config.Addr; with ":0" the kernel picks the port, which
// ln.Addr() then tells.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("grpc listen %s: %w", s.cfg.Addr, err)
	}
	return ln, nil
}

// Serve serves on ln until ctx ends, then stops gracefully: health turns NOT_SERVING so load
// balancers drain the instance, running calls get StopTimeout to finish, and the rest are cut.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Every method gets its metric series at zero now, so a rate() over a never-called method
	// reads 0 rather than no data.
	s.metrics.InitializeMetrics(s.grpc)
	// The health service reports liveness: SERVING whenever the process serves, on the active
	// instance and on a standby alike (a standby serves reads). Which instance is active is in
	// GetStatus, not in health, so a probe never restarts a healthy standby.
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	for _, name := range s.cfg.Services {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	if s.cfg.Auth.Insecure {
		s.log.Warn("control API is UNAUTHENTICATED: no token configured and "+EnvInsecure+"=true; never run this in production",
			"addr", ln.Addr().String())
	} else {
		s.log.Info("control API listening", "addr", ln.Addr().String(), "auth", s.cfg.Auth.describe(), "credential_source", s.cfg.Auth.Source,
			"transport", transport(s.cfg.TLS), "call_timeout", s.cfg.CallTimeout,
			"max_connections", s.cfg.Bounds.MaxConnections, "max_calls", s.cfg.Bounds.MaxCalls,
			"max_anonymous_calls", s.cfg.Bounds.MaxAnonymousCalls, "max_connection_age", s.cfg.Bounds.MaxConnectionAge,
			"max_queued_bytes_per_connection", s.cfg.Bounds.MaxQueuedBytesPerConnection, "max_queued_bytes", s.cfg.Bounds.MaxQueuedBytes,
			"send_stall_timeout", s.cfg.Bounds.SendStallTimeout)
	}

	errc := make(chan error, 1)
	bl := &boundedListener{Listener: ln, slots: s.conns, refused: func() {
		s.connRefused.Inc()
		s.refused.note(context.Background(), "connection_limit", "")
	}}
	go func() { errc <- s.grpc.Serve(bl) }()
	select {
	case err := <-errc:
		s.health.Shutdown()
		return fmt.Errorf("grpc server: %w", err)
	case <-ctx.Done():
	}
	s.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(s.cfg.StopTimeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		s.log.Warn("gRPC calls still running after the stop timeout; cutting them", "timeout", s.cfg.StopTimeout)
		s.grpc.Stop()
		<-stopped
	}
	<-errc // Serve returns nil after a stop
	return nil
}

// codeToLevel keeps refused calls out of the warnings of the access log: the refusal log
// summarises them at WARN once per interval, so a flood of wrong tokens cannot flood the log.
// The rest is the library's default.
func codeToLevel(code codes.Code) logging.Level {
	if code == codes.Unauthenticated || code == codes.PermissionDenied {
		return logging.LevelDebug
	}
	return logging.DefaultServerCodeToLevel(code)
}

// readLevel is codeToLevel for a read: what codeToLevel logs at INFO (a success, a NOT_FOUND, a
// malformed request) is DEBUG; warnings and errors stay.
func readLevel(code codes.Code) logging.Level {
	if l := codeToLevel(code); l != logging.LevelInfo {
		return l
	}
	return logging.LevelDebug
}

func isHealth(service string) bool { return service == healthpb.Health_ServiceDesc.ServiceName }

// isReflection matches both reflection versions that reflection.Register serves: grpcurl
// still falls back to v1alpha against older servers and some clients only speak it.
func isReflection(service string) bool {
	return service == reflectionv1.ServerReflection_ServiceDesc.ServiceName ||
		service == "grpc.reflection.v1alpha.ServerReflection"
}

// serviceOf returns the service of a full method name "/pkg.Service/Method".
func serviceOf(fullMethod string) string {
	if len(fullMethod) > 0 && fullMethod[0] == '/' {
		fullMethod = fullMethod[1:]
	}
	for i := len(fullMethod) - 1; i >= 0; i-- {
		if fullMethod[i] == '/' {
			return fullMethod[:i]
		}
	}
	return fullMethod
}

// transport names the listener's security for the start-up log.
func transport(c *tls.Config) string {
	switch {
	case c == nil:
		return "plaintext"
	case c.ClientAuth == tls.RequireAndVerifyClientCert:
		return "mTLS (client certificates required)"
	default:
		return "TLS"
	}
}
