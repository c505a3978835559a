package compat

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/services/ingest/internal/netfaulttest"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
)

const token = "compat-test-token-0123456789abcdef"

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

type env struct {
	my    *mysqltest.DB
	proxy *netfaulttest.Proxy
	h     *Handler
	srv   *httptest.Server
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	e := &env{my: mysqltest.New(t)}
	dsn, err := mysql.ParseDSN(e.my.ServiceDSN)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = netfaulttest.New(t, dsn.Addr)
	dsn.Addr = e.proxy.Addr()
	in, err := aodb.Open(dsn.FormatDSN(), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	e.h, err = New(cfg, in, testclock.New(t0), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.h)
	t.Cleanup(e.srv.Close)
	return e
}

type reply struct {
	code int
	id   int64
	err  string
}

func (e *env) post(t *testing.T, contentType, auth string, body []byte) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+Path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		ID    int64  `json:"id"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("response body is not JSON: %v", err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return reply{code: res.StatusCode, id: out.ID, err: out.Error}
}

// stored reads a row back from the inbox: its text and received time.
func (e *env) stored(t *testing.T, id int64) (string, time.Time, *string) {
	t.Helper()
	var text string
	var received time.Time
	var processed *string
	err := e.my.Admin.QueryRowContext(t.Context(), `SELECT CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CAST(CMINMSGS_DATE_PROCESSED AS CHAR)
		FROM cminmsgs WHERE CMINMSGS_ID = ?`, id).Scan(&text, &received, &processed)
	if err != nil {
		t.Fatalf("row %d: %v", id, err)
	}
	return text, received, processed
}

func (e *env) rows(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.my.Admin.QueryRowContext(t.Context(), `SELECT count(*) FROM cminmsgs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const bearer = "Bearer " + token

// (g) Every status code of the contract, on a real inbox.
func TestSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{Token: token + "\n", MaxBody: 256, MaxInFlight: 4})
	utf8XML := `<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR></META><FLOP>航班</FLOP></MSG>`
	gbkXML, err := simplifiedchinese.GBK.NewEncoder().String(strings.Replace(utf8XML, "UTF-8", "GBK", 1))
	if err != nil {
		t.Fatal(err)
	}
	gbkNoDecl, err := simplifiedchinese.GBK.NewEncoder().String(`<MSG><FLOP>航班</FLOP></MSG>`)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("200 utf-8", func(t *testing.T) {
		r := e.post(t, "application/xml", bearer, []byte(utf8XML))
		if r.code != http.StatusOK || r.id <= 0 {
			t.Fatalf("reply = %+v", r)
		}
		text, received, processed := e.stored(t, r.id)
		if text != utf8XML || !received.Equal(t0) || processed != nil {
			t.Errorf("stored %q received %v processed %v", text, received, processed)
		}
	})
	t.Run("200 GBK by the XML declaration", func(t *testing.T) {
		r := e.post(t, "text/xml", bearer, []byte(gbkXML))
		if r.code != http.StatusOK {
			t.Fatalf("reply = %+v", r)
		}
		// Stored as characters: the declaration is kept as sent, the bytes are decoded.
		if text, _, _ := e.stored(t, r.id); text != strings.Replace(utf8XML, "UTF-8", "GBK", 1) {
			t.Errorf("stored %q", text)
		}
	})
	t.Run("200 GBK by the Content-Type charset, legacy text/plain", func(t *testing.T) {
		r := e.post(t, "text/plain; charset=GB2312", bearer, []byte(gbkNoDecl))
		if r.code != http.StatusOK {
			t.Fatalf("reply = %+v", r)
		}
		if text, _, _ := e.stored(t, r.id); text != `<MSG><FLOP>航班</FLOP></MSG>` {
			t.Errorf("stored %q", text)
		}
	})

	before := e.rows(t)
	for _, tt := range []struct {
		name        string
		contentType string
		auth        string
		body        []byte
		want        int
	}{
		{"401 without a token", "application/xml", "", []byte(utf8XML), http.StatusUnauthorized},
		{"401 with a wrong token", "application/xml", "Bearer nope", []byte(utf8XML), http.StatusUnauthorized},
		{"401 with the token but not as a bearer", "application/xml", token, []byte(utf8XML), http.StatusUnauthorized},
		{"400 empty body", "application/xml", bearer, nil, http.StatusBadRequest},
		{"400 whitespace body", "application/xml", bearer, []byte(" \r\n"), http.StatusBadRequest},
		{"413 oversized body", "application/xml", bearer, bytes.Repeat([]byte("x"), 257), http.StatusRequestEntityTooLarge},
		{"400 bytes invalid in the charset", "application/xml; charset=utf-8", bearer, []byte("<MSG>\xff</MSG>"), http.StatusBadRequest},
		{"415 unsupported charset", "application/xml; charset=iso-8859-1", bearer, []byte(utf8XML), http.StatusUnsupportedMediaType},
		{"415 unsupported declared encoding", "application/xml", bearer,
			[]byte(`<?xml version="1.0" encoding="Shift_JIS"?><MSG/>`), http.StatusUnsupportedMediaType},
		{"415 unsupported media type", "application/json", bearer, []byte(utf8XML), http.StatusUnsupportedMediaType},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.post(t, tt.contentType, tt.auth, tt.body); r.code != tt.want || r.err == "" {
				t.Errorf("reply = %+v, want %d with an error text", r, tt.want)
			}
		})
	}
	if after := e.rows(t); after != before {
		t.Errorf("refused requests wrote %d rows", after-before)
	}

	t.Run("200 with a lower-case bearer scheme and a trimmed token", func(t *testing.T) {
		if r := e.post(t, "application/xml", "bearer "+token, []byte(utf8XML)); r.code != http.StatusOK {
			t.Errorf("reply = %+v, want 200", r)
		}
	})
	t.Run("413 for a chunked body past the limit", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+Path,
			io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), 200)), bytes.NewReader(bytes.Repeat([]byte("y"), 200))))
		req.ContentLength = -1 // chunked: the size is only known while reading
		req.Header.Set("Authorization", bearer)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status = %d, want 413", res.StatusCode)
		}
	})
	t.Run("503 inbox unreachable, then 200 again", func(t *testing.T) {
		e.proxy.Down()
		if r := e.post(t, "application/xml", bearer, []byte(utf8XML)); r.code != http.StatusServiceUnavailable {
			t.Errorf("reply = %+v, want 503", r)
		}
		e.proxy.Up()
		if r := e.post(t, "application/xml", bearer, []byte(utf8XML)); r.code != http.StatusOK {
			t.Errorf("reply after recovery = %+v, want 200", r)
		}
	})
	t.Run("405 other methods", func(t *testing.T) {
		res, err := http.Get(e.srv.URL + Path)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET = %d, want 405", res.StatusCode)
		}
	})
	if got := testutil.ToFloat64(e.h.requests.WithLabelValues("401")); got != 3 {
		t.Errorf("401 count = %v, want 3", got)
	}
}

func TestTokenIsRequiredUnlessInsecure(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{MaxBody: 10, MaxInFlight: 1}, nil, clock.Real{}, slog.Default(), prometheus.NewRegistry()); err != ErrNoToken {
		t.Errorf("New without a token: err = %v, want ErrNoToken", err)
	}
	e := newEnv(t, Config{Insecure: true, MaxBody: 1024, MaxInFlight: 1})
	if r := e.post(t, "", "", []byte("<MSG/>")); r.code != http.StatusOK {
		t.Errorf("insecure, no Content-Type: reply = %+v, want 200", r)
	}
	// A short token and one of whitespace only are start-up errors naming the variable, not
	// a server that says it is insecure and refuses everything.
	for _, tok := range []string{token[:31], " \t\n", token[:31] + "\n"} {
		_, err := New(Config{Token: tok, Insecure: tok == " \t\n", MaxBody: 10, MaxInFlight: 1}, nil, clock.Real{}, slog.Default(), prometheus.NewRegistry())
		if err == nil || !strings.Contains(err.Error(), EnvToken) || !strings.Contains(err.Error(), "at least 32") {
			t.Errorf("New with the token %q: err = %v, want one naming %s and the minimum", tok, err, EnvToken)
		}
	}
}

// Past the cap on requests in flight a request is 503 with Retry-After, before its body is
// read; once a slot frees, requests are served again.
func TestInFlightCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{Token: token, MaxBody: 1024, MaxInFlight: 1})
	pr, pw := io.Pipe()
	type result struct {
		res *http.Response
		err error
	}
	held := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+Path, pr)
		req.Header.Set("Authorization", bearer)
		req.ContentLength = -1
		res, err := http.DefaultClient.Do(req)
		held <- result{res, err}
	}()
	// The first request holds the only slot while its body trickles in. When its headers reach
	// the handler depends on the machine's load, so the test waits until the slot is taken
	// (or the request ended, which is the failure) rather than for a fixed time.
	if _, err := pw.Write([]byte("<MSG>")); err != nil {
		t.Fatal(err)
	}
	giveUp := time.After(30 * time.Second)
	for len(e.h.slots) == 0 {
		select {
		case r := <-held:
			t.Fatalf("the held request ended before it took the slot: %+v, %v", r.res, r.err)
		case <-giveUp:
			t.Fatal("the held request never reached the handler")
		case <-time.After(10 * time.Millisecond):
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+Path, strings.NewReader("<MSG/>"))
	req.Header.Set("Authorization", bearer)
	busy, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = busy.Body.Close()
	if busy.StatusCode != http.StatusServiceUnavailable || busy.Header.Get("Retry-After") == "" {
		t.Fatalf("while the only slot was held: %d, Retry-After %q; want 503 with Retry-After", busy.StatusCode, busy.Header.Get("Retry-After"))
	}
	_, _ = pw.Write([]byte("</MSG>"))
	_ = pw.Close()
	if r := <-held; r.err != nil || r.res.StatusCode != http.StatusOK {
		t.Fatalf("the held request: %+v, %v; want 200", r.res, r.err)
	} else {
		_ = r.res.Body.Close()
	}
	if r := e.post(t, "application/xml", bearer, []byte("<MSG/>")); r.code != http.StatusOK {
		t.Errorf("after the slot freed: %+v, want 200", r)
	}
}
