// Package admin serves a service's operational HTTP endpoints: Prometheus /metrics, /healthz
// (the process is alive) and /readyz (its dependencies answer).
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one dependency is usable.
type Check func(ctx context.Context) error

// Server is the admin HTTP server.
type Server struct {
	addr   string
	logger *slog.Logger
	mux    *http.ServeMux
	checks map[string]Check

	mu       sync.Mutex
	lastFail string // the failures /readyz last logged, "" while ready
}

// New builds the server; register readiness checks with AddCheck before Run.
func New(addr string, reg *prometheus.Registry, logger *slog.Logger) *Server {
	s := &Server{addr: addr, logger: logger, mux: http.NewServeMux(), checks: map[string]Check{}}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	s.mux.HandleFunc("GET /readyz", s.ready)
	return s
}

// AddCheck adds a named readiness check.
func (s *Server) AddCheck(name string, c Check) { s.checks[name] = c }

// ready answers anonymous callers with "ready" or "not ready" and nothing more: the failing
// dependency's error names users, databases and internal addresses. The details go to the log,
// once per change (a probe every few seconds would repeat them), and GetStatus reports them.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
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
		}
	}
	summary := ""
	if len(failed) > 0 {
		summary = errors.Join(failed...).Error()
	}
	s.mu.Lock()
	changed := summary != s.lastFail
	s.lastFail = summary
	s.mu.Unlock()
	switch {
	case changed && summary != "":
		s.logger.Warn("not ready", "failed", summary)
	case changed:
		s.logger.Info("ready again")
	}
	if summary != "" {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// Run serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("admin listen %s: %w", s.addr, err)
	}
	// Every timeout set: a scraper or prober that stops reading, or an idle keep-alive
	// connection, must not hold a goroutine and a socket forever.
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
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
