package chartcheck

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// checkAdminAddr: the rendered admin address is the container's admin port on a bind that
// localhost reaches, so `kubectl port-forward` (which connects to localhost inside the pod's
// network namespace) reaches /metrics and /readyz, as the probes and Prometheus do on the pod IP.
func checkAdminAddr(t *testing.T, where, addr string, containerPort int32) {
	t.Helper()
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: MSGX_ADMIN_ADDR = %q: %v", where, addr, err)
		return
	}
	if p, err := strconv.Atoi(portText); err != nil || int32(p) != containerPort || p != 9090 {
		t.Errorf("%s: MSGX_ADMIN_ADDR = %q, want port 9090, the container's admin port (%d)", where, addr, containerPort)
	}
	if !reachableFromLocalhost(t, host) {
		t.Errorf("%s: MSGX_ADMIN_ADDR = %q binds where localhost does not reach it: kubectl port-forward cannot reach the admin endpoints", where, addr)
	}
}

// reachableFromLocalhost listens on host (any free port) the way the services' admin server
// does, and reports whether a connection to 127.0.0.1 arrives there. A host that is not an IP
// (an unexpanded $(POD_IP), a name) is not such a bind.
func reachableFromLocalhost(t *testing.T, host string) bool {
	t.Helper()
	if host != "" && net.ParseIP(host) == nil {
		return false
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Logf("listen on %q: %v", host, err)
		return false
	}
	defer func() { _ = ln.Close() }()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 2*time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// TestReachableFromLocalhost: the check tells an all-interfaces bind from one on another
// address only, as the pod IP is.
func TestReachableFromLocalhost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host string
		want bool
	}{
		{"", true},
		{"0.0.0.0", true},
		{"127.0.0.1", true},
		{"$(POD_IP)", false},
		{"192.0.2.10", false}, // not an address of this host: the listen fails, as a pod-IP-only bind is not localhost
	}
	for _, tc := range tests {
		t.Run(tc.host, func(t *testing.T) {
			t.Parallel()
			if got := reachableFromLocalhost(t, tc.host); got != tc.want {
				t.Errorf("reachableFromLocalhost(%q) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
}
