// Package compat serves the legacy entry POST /cminmsgs/send (R-INGEST-12): it
// writes the posted message into the shared inbox exactly as upstream would, and discovery
// then finds it like any other row. It never writes to PostgreSQL, so it needs no fencing and
// runs on every replica, the standby included. docs/compat-http.md is the contract.
package compat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
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

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/secret"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Path is the endpoint legacy clients post to.
const Path = "/cminmsgs/send"

// Inserter stores one message in the inbox and returns its CMINMSGS_ID once committed
// (*aodb.Inbox).
type Inserter interface {
	Insert(ctx context.Context, text string, received time.Time) (int64, error)
}

// Config configures the endpoint.
type Config struct {
	// Token is the bearer token every request must present.
	Token string
	// Insecure accepts requests without a token; only when Token is empty.
	Insecure bool
	// MaxBody is the largest accepted body in bytes; a larger one is 413 (it can never fit).
	MaxBody int
	// MaxInFlight bounds the requests served at once; past it a request is 503 with
	// Retry-After before its body is read, so a flood of large bodies cannot exhaust memory.
	MaxInFlight int
	// TLS, when set, serves HTTPS.
	TLS *tls.Config

	tokenSum [sha256.Size]byte
}

// retryAfter is the Retry-After of a request refused because the entry is busy;
// inboxRetryAfter that of one the inbox could not take (an outage lasts longer).
const (
	retryAfter      = "1"
	inboxRetryAfter = "5"
)

// EnvToken is the variable of the compat token, named in start-up errors.
const EnvToken = "MSGX_HTTP_TOKEN"

// ErrNoToken means neither a token nor insecure mode is configured.
var ErrNoToken = errors.New("compat HTTP needs http.token (or http.insecure=true for development)")

// Handler serves POST /cminmsgs/send.
type Handler struct {
	cfg      Config
	slots    chan struct{}
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
	// A token read from a file or an env file may carry the newline an editor adds; the
	// client side trims it too, so both compare the same bytes. A token that is all
	// whitespace is no token: refused, not served as if http.insecure were set.
	if cfg.Token != "" {
		cfg.Token = strings.TrimSpace(cfg.Token)
		if len(cfg.Token) < secret.MinTokenLength {
			return nil, fmt.Errorf("%s is %d characters after trimming: a token needs at least %d (e.g. openssl rand -hex 32)",
				EnvToken, len(cfg.Token), secret.MinTokenLength)
		}
		cfg.tokenSum = sha256.Sum256([]byte(cfg.Token))
	}
	if cfg.MaxBody <= 0 {
		return nil, fmt.Errorf("compat HTTP: max body must be positive, got %d", cfg.MaxBody)
	}
	if cfg.MaxInFlight <= 0 {
		return nil, fmt.Errorf("compat HTTP: max in flight must be positive, got %d", cfg.MaxInFlight)
	}
	h := &Handler{cfg: cfg, slots: make(chan struct{}, cfg.MaxInFlight), inbox: in, clock: clk, logger: logger,
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
	// A body that can never fit is refused before it is read, and as 413: not a reason to
	// retry, unlike 503.
	if r.ContentLength > int64(h.cfg.MaxBody) {
		h.tooLarge(w)
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		w.Header().Set("Retry-After", retryAfter)
		h.fail(w, http.StatusServiceUnavailable, "too many messages in flight; retry later")
		return
	}
	raw, err := readBody(w, r, h.cfg.MaxBody)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.tooLarge(w)
		return
	case err != nil:
		h.fail(w, http.StatusBadRequest, "reading the body failed")
		return
	case len(bytes.TrimSpace(raw)) == 0:
		h.fail(w, http.StatusBadRequest, "empty body: the message XML is required")
		return
	}
	text, err := sis.BytesToText(raw, charset)
	raw = nil // the decoded text is what is kept; let the bytes go before the insert
	switch {
	case errors.Is(err, sis.ErrUnsupportedCharset):
		h.fail(w, http.StatusUnsupportedMediaType, "unsupported charset: UTF-8, US-ASCII and GB2312/GBK/GB18030 are accepted")
		return
	case err != nil:
		h.fail(w, http.StatusBadRequest, "the body is not valid in its charset: "+err.Error())
		return
	}
	if len(text) > h.cfg.MaxBody {
		// Decoding GBK into UTF-8 grows the text by up to half: it must still fit the column.
		h.tooLarge(w)
		return
	}
	size := len(text)
	id, err := h.inbox.Insert(r.Context(), text, h.clock.Now())
	if err != nil {
		if aodb.TooLarge(err) {
			h.logger.Warn("compat HTTP: the inbox refused the message for its size", "err", err, "bytes", size)
			h.tooLarge(w)
			return
		}
		if aodb.Rejected(err) {
			h.logger.ErrorContext(r.Context(), "compat HTTP: the inbox rejected the message", "err", err, "bytes", size)
			h.fail(w, http.StatusInternalServerError, "the inbox rejected the message")
			return
		}
		h.logger.WarnContext(r.Context(), "compat HTTP: inbox unreachable", "err", err)
		w.Header().Set("Retry-After", inboxRetryAfter)
		h.fail(w, http.StatusServiceUnavailable, "the inbox is unreachable; retry later")
		return
	}
	h.logger.InfoContext(r.Context(), "compat HTTP: message stored in the inbox", "msg_id", id, "bytes", size, "remote", r.RemoteAddr)
	h.reply(w, http.StatusOK, map[string]any{"id": id})
}

// readBody reads at most max bytes, into a buffer sized from Content-Length when the client
// sent one (io.ReadAll's doubling would hold up to twice the body).
func readBody(w http.ResponseWriter, r *http.Request, max int) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, int64(max))
	if n := r.ContentLength; n > 0 {
		buf := bytes.NewBuffer(make([]byte, 0, n+1))
		_, err := buf.ReadFrom(body)
		return buf.Bytes(), err
	}
	return io.ReadAll(body)
}

func (h *Handler) tooLarge(w http.ResponseWriter) {
	h.fail(w, http.StatusRequestEntityTooLarge, "body larger than "+strconv.Itoa(h.cfg.MaxBody)+
		" bytes: the inbox cannot store it; do not retry")
}

func (h *Handler) authorized(r *http.Request) bool {
	if h.cfg.Token == "" {
		return h.cfg.Insecure
	}
	// The scheme is case-insensitive (RFC 7235, section 2.1): clients send "bearer" as well.
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	// Digests of equal length are compared, so the time tells nothing of the token's length
	// (ConstantTimeCompare returns at once on a length mismatch).
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], h.cfg.tokenSum[:]) == 1 && ok && strings.EqualFold(scheme, "Bearer")
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
	// The idle timeout closes keep-alive connections nobody uses; the header limit keeps a
	// request's headers to what a token and a content type need.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10, TLSConfig: h.cfg.TLS}
	h.logger.InfoContext(ctx, "compat HTTP listening", "addr", ln.Addr().String(), "path", Path, "authenticated", h.cfg.Token != "",
		"tls", h.cfg.TLS != nil, "max_body", h.cfg.MaxBody, "max_in_flight", h.cfg.MaxInFlight)
	if h.cfg.Token == "" {
		h.logger.WarnContext(ctx, "compat HTTP is UNAUTHENTICATED (http.insecure=true); never run this in production")
	}
	errc := make(chan error, 1)
	go func() {
		if h.cfg.TLS != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("compat HTTP server: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
