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

// Handle mounts an extra handler (for a service's own diagnostics).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var failed []error
	for name, c := range s.checks {
		if err := c(ctx); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", name, err))
		}
	}
	if len(failed) > 0 {
		http.Error(w, errors.Join(failed...).Error(), http.StatusServiceUnavailable)
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
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second}
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
