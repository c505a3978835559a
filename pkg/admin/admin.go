// Package admin serves a service's operational HTTP endpoints: Prometheus /metrics, /healthz
// (the process is alive), /readyz (its dependencies answer) and, for a service whose traffic
// goes to the role's holder only, /readyz/active (ready and holding the role).
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one dependency is usable.
type Check func(ctx context.Context) error

// ReadyTTL is how long a /readyz verdict is served without checking again. /readyz needs no
// credential, so every request used to ping PostgreSQL and MySQL: a flood of them took
// connections and time from the work. The kubelet probes every few seconds; one check a
// second is still fresh for it.
const ReadyTTL = time.Second

// checkTimeout bounds one round of the readiness checks.
const checkTimeout = 2 * time.Second

// Server is the admin HTTP server.
type Server struct {
	addr   string
	logger *slog.Logger
	mux    *http.ServeMux
	checks map[string]Check
	ttl    time.Duration
	rounds prometheus.Counter

	active func() bool // set by ServeActive; nil leaves /readyz/active unserved

	mu       sync.Mutex
	lastFail string   // the failures /readyz last logged, "" while ready
	last     *verdict // the latest round of checks, in flight until its done is closed
}

// verdict is one round of the readiness checks; summary, names and at are set before done is
// closed.
type verdict struct {
	done    chan struct{}
	summary string   // "" when ready
	names   []string // the checks that failed, sorted
	at      time.Time
}

// New builds the server; register readiness checks with AddCheck before Run.
func New(addr string, reg *prometheus.Registry, logger *slog.Logger) *Server {
	s := &Server{addr: addr, logger: logger, mux: http.NewServeMux(), checks: map[string]Check{}, ttl: ReadyTTL,
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "msgx_admin_readiness_checks_total",
			Help: "Rounds of the readiness checks /readyz ran (at most one at a time, its verdict served for 1 s).",
		})}
	reg.MustRegister(s.rounds)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	s.mux.HandleFunc("GET /readyz", s.ready)
	return s
}

// AddCheck adds a named readiness check.
func (s *Server) AddCheck(name string, c Check) { s.checks[name] = c }

// ServeActive serves /readyz/active: 200 "active" while /readyz is ready and held reports that
// this instance holds its role, 503 "standby" (or /readyz's "not ready: …") otherwise. It is
// the readiness probe of a service whose Service must route to the role's holder only (the
// control API, where a standby refuses mutating calls); /readyz and /healthz stay what they
// are, so a standby is neither restarted nor reported broken. held must not block: it is asked
// on every request, uncached, so the Service follows a takeover within one probe period.
// Call it before Run.
func (s *Server) ServeActive(held func() bool) {
	s.active = held
	s.mux.HandleFunc("GET /readyz/active", s.readyActive)
}

// ServeHTTP serves the admin endpoints: Run serves them on the configured address through it,
// and a test of an embedding service serves them without a listener.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// ready answers anonymous callers with "ready", or "not ready" and the names of the checks that
// failed ("not ready: kafka"), and nothing more: the failing dependency's error names users,
// databases and internal addresses, a check's name (a kind of dependency) none of them. The
// name is what an operator needs to see why a service that stays up waiting for a dependency
// is not ready (R-START-1); the details go to the log, once per change (a probe every few
// seconds would repeat them), and GetStatus reports them.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) { s.answer(w, r, false) }

// readyActive is /readyz/active: the dependencies first (a holder whose database is gone is no
// better than a standby), then the role.
func (s *Server) readyActive(w http.ResponseWriter, r *http.Request) { s.answer(w, r, true) }

// answer serves the verdict, and with role also whether this instance holds its role.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, role bool) {
	v, ok := s.verdict(r.Context())
	switch {
	case !ok:
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	case v.summary != "":
		http.Error(w, "not ready: "+strings.Join(v.names, ", "), http.StatusServiceUnavailable)
	case role && !s.active():
		http.Error(w, "standby", http.StatusServiceUnavailable)
	case role:
		_, _ = w.Write([]byte("active\n"))
	default:
		_, _ = w.Write([]byte("ready\n"))
	}
}

// verdict is the latest round of checks: the cached one while younger than the TTL, else the
// one in flight, else a new round. Callers share a round, so at most one runs at a time however
// many ask. ok is false when ctx ended before the round did.
func (s *Server) verdict(ctx context.Context) (_ *verdict, ok bool) {
	s.mu.Lock()
	v := s.last
	if v != nil {
		select {
		case <-v.done:
			if time.Since(v.at) >= s.ttl {
				v = nil
			}
		default: // in flight: wait for it
		}
	}
	if v == nil {
		v = &verdict{done: make(chan struct{})}
		s.last = v
		go s.check(v)
	}
	s.mu.Unlock()
	select {
	case <-v.done:
		return v, true
	case <-ctx.Done():
		return nil, false
	}
}

// check runs one round of the checks, detached from the request that started it (the others
// waiting on it must not lose it when that client goes away), and logs a change of verdict
// before it answers.
func (s *Server) check(v *verdict) {
	s.rounds.Inc()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	names := make([]string, 0, len(s.checks))
	for name := range s.checks {
		names = append(names, name)
	}
	sort.Strings(names)
	var failed []error
	for _, name := range names {
		if err := s.checks[name](ctx); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", name, err))
			v.names = append(v.names, name)
		}
	}
	if len(failed) > 0 {
		v.summary = errors.Join(failed...).Error()
	}
	v.at = time.Now()
	s.mu.Lock()
	changed := v.summary != s.lastFail
	s.lastFail = v.summary
	s.mu.Unlock()
	switch {
	case changed && v.summary != "":
		s.logger.Warn("not ready", "failed", v.summary)
	case changed:
		s.logger.Info("ready again")
	}
	close(v.done)
}

// Run serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("admin listen %s: %w", s.addr, err)
	}
	// Every timeout set: a scraper or prober that stops reading, or an idle keep-alive
	// connection, must not hold a goroutine and a socket forever.
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	s.logger.InfoContext(ctx, "admin endpoints listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("admin server: %w", err)
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	}
}
