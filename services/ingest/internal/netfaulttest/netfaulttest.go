// Package netfaulttest is a TCP proxy for tests that can cut the network to a real server and
// bring it back: the server stays up and untouched, while everything that talks to it through
// the proxy sees real connection failures (reset connections, refused sessions), which a
// running MariaDB cannot be made to produce on demand.
package netfaulttest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards connections to a target while it is up.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

// New starts a proxy to target on a loopback port; it stops when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("netfault: listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Down()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Down cuts every open connection and closes each new one at once, until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Up forwards new connections again.
func (p *Proxy) Up() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	if !p.track(c) {
		_ = c.Close()
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(s) {
		_ = c.Close()
		if s != nil {
			_ = s.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
	_ = c.Close()
	_ = s.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// track registers an open connection, or reports false while the proxy is down.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = true
	return true
}
