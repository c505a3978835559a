// Package compat serves the legacy entry POST /cminmsgs/send (R-INGEST-12): it
// writes the posted message into the shared inbox exactly as upstream would, and discovery
// then finds it like any other row. It never writes to PostgreSQL, so it needs no fencing and
// runs on every replica, the standby included. docs/compat-http.md is the contract.
package compat

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/inbox"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Path is the endpoint legacy clients post to.
const Path = "/cminmsgs/send"

// Inserter stores one message in the inbox and returns its CMINMSGS_ID once committed
// (*inbox.Inbox).
type Inserter interface {
	Insert(ctx context.Context, text string, received time.Time) (int64, error)
}

// Config configures the endpoint.
type Config struct {
	// Token is the bearer token every request must present.
	Token string
	// Insecure accepts requests without a token; only when Token is empty.
	Insecure bool
	// MaxBody is the largest accepted body in bytes.
	MaxBody int
}

// ErrNoToken means neither a token nor insecure mode is configured.
var ErrNoToken = errors.New("compat HTTP needs http.token (or http.insecure=true for development)")

// Handler serves POST /cminmsgs/send.
type Handler struct {
	cfg      Config
	inbox    Inserter
	clock    clock.Clock
	logger   *slog.Logger
	requests *prometheus.CounterVec
	mux      *http.ServeMux
}

// New builds the handler and registers its metrics. It refuses a configuration without a
// token unless Insecure is set: an unauthenticated way to inject flight messages must be a
// visible, deliberate choice.
func New(cfg Config, in Inserter, clk clock.Clock, logger *slog.Logger, reg prometheus.Registerer) (*Handler, error) {
	if cfg.Token == "" && !cfg.Insecure {
		return nil, ErrNoToken
	}
	if cfg.MaxBody <= 0 {
		return nil, fmt.Errorf("compat HTTP: max body must be positive, got %d", cfg.MaxBody)
	}
	h := &Handler{cfg: cfg, inbox: in, clock: clk, logger: logger,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_ingest_compat_requests_total",
			Help: "Compat HTTP requests to POST /cminmsgs/send by response status code."}, []string{"code"}),
		mux: http.NewServeMux(),
	}
	reg.MustRegister(h.requests)
	h.mux.HandleFunc("POST "+Path, h.send)
	return h, nil
}

// ServeHTTP routes to the endpoint; other paths are 404 and other methods 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// The media types legacy clients send XML with.
var mediaTypes = map[string]bool{"application/xml": true, "text/xml": true, "text/plain": true}

func (h *Handler) send(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="msgx-ingest"`)
		h.fail(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return
	}
	charset := ""
	if ct := r.Header.Get("Content-Type"); ct != "" {
		media, params, err := mime.ParseMediaType(ct)
		if err != nil || !mediaTypes[media] {
			h.fail(w, http.StatusUnsupportedMediaType, "content type must be application/xml, text/xml or text/plain")
			return
		}
		charset = params["charset"]
	}
	if r.ContentLength > int64(h.cfg.MaxBody) {
		h.fail(w, http.StatusBadRequest, "body larger than "+strconv.Itoa(h.cfg.MaxBody)+" bytes")
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.cfg.MaxBody)))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.fail(w, http.StatusBadRequest, "body larger than "+strconv.Itoa(h.cfg.MaxBody)+" bytes")
		return
	case err != nil:
		h.fail(w, http.StatusBadRequest, "reading the body failed")
		return
	case len(bytes.TrimSpace(raw)) == 0:
		h.fail(w, http.StatusBadRequest, "empty body: the message XML is required")
		return
	}
	text, err := sis.BytesToText(raw, charset)
	switch {
	case errors.Is(err, sis.ErrUnsupportedCharset):
		h.fail(w, http.StatusUnsupportedMediaType, "unsupported charset: UTF-8, US-ASCII and GB2312/GBK/GB18030 are accepted")
		return
	case err != nil:
		h.fail(w, http.StatusBadRequest, "the body is not valid in its charset: "+err.Error())
		return
	}
	id, err := h.inbox.Insert(r.Context(), text, h.clock.Now())
	if err != nil {
		if inbox.Rejected(err) {
			h.logger.Error("compat HTTP: the inbox rejected the message", "err", err, "bytes", len(raw))
			h.fail(w, http.StatusInternalServerError, "the inbox rejected the message")
			return
		}
		h.logger.Warn("compat HTTP: inbox unreachable", "err", err)
		h.fail(w, http.StatusServiceUnavailable, "the inbox is unreachable; retry later")
		return
	}
	h.logger.Info("compat HTTP: message stored in the inbox", "msg_id", id, "bytes", len(raw), "remote", r.RemoteAddr)
	h.reply(w, http.StatusOK, map[string]any{"id": id})
}

func (h *Handler) authorized(r *http.Request) bool {
	if h.cfg.Token == "" {
		return h.cfg.Insecure
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(h.cfg.Token)) == 1
}

func (h *Handler) fail(w http.ResponseWriter, code int, msg string) {
	h.reply(w, code, map[string]any{"error": msg})
}

func (h *Handler) reply(w http.ResponseWriter, code int, body map[string]any) {
	h.requests.WithLabelValues(strconv.Itoa(code)).Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// Run serves on addr until ctx ends, then shuts down gracefully.
func (h *Handler) Run(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("compat HTTP listen %s: %w", addr, err)
	}
	return h.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends.
func (h *Handler) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	h.logger.Info("compat HTTP listening", "addr", ln.Addr().String(), "path", Path, "authenticated", h.cfg.Token != "")
	if h.cfg.Token == "" {
		h.logger.Warn("compat HTTP is UNAUTHENTICATED (http.insecure=true); never run this in production")
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("compat HTTP server: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
