package notify

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

// gate is a TCP proxy to target that hangs up on every connection while it is down.
type gate struct {
	ln     net.Listener
	target string
	up     atomic.Bool
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newGate(t *testing.T, target string) *gate {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln, target: target}
	g.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !g.up.Load() {
				_ = c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			g.mu.Lock()
			g.conns = append(g.conns, c, s)
			g.mu.Unlock()
			g.wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
			g.wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		g.mu.Lock()
		for _, c := range g.conns {
			_ = c.Close()
		}
		g.mu.Unlock()
		g.wg.Wait()
	})
	return g
}

// A PostgreSQL that does not answer when the listener starts is logged once, however many
// reconnection tries it takes, and its return once; the consumer is woken when it is back
// (R-START-1).
func TestListenerLogsAnOutageOnce(t *testing.T) {
	db := pgtest.New(t)
	u, err := url.Parse(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t, u.Host)
	u.Host = g.ln.Addr().String()
	var logs testlog.Buffer
	l := New(u.String(), slog.New(slog.NewTextHandler(&logs, nil)), "msgx_test_channel")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	time.Sleep(2500 * time.Millisecond) // three tries, a second apart
	if n := strings.Count(logs.String(), "lost its connection"); n != 1 {
		t.Errorf("%d lines for one outage, want 1:\n%s", n, logs.String())
	}
	select {
	case <-l.C():
		t.Fatal("woken while PostgreSQL does not answer")
	default:
	}
	g.up.Store(true)
	select {
	case <-l.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("not woken once PostgreSQL answers:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "notification listener connected again"); n != 1 {
		t.Errorf("%d lines for the end of the outage, want 1:\n%s", n, logs.String())
	}
	db.Exec(t, "NOTIFY msgx_test_channel")
	select {
	case <-l.C():
	case <-time.After(10 * time.Second):
		t.Fatal("a notification did not wake the consumer")
	}
}
