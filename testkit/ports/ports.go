// Package ports hands tests TCP ports on the loopback that nothing listens on, for the servers a
// test starts and restarts on the same address.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// first is the lowest port handed out: above the well-known and the usual service ports.
const first = 10000

// Free returns a port on 127.0.0.1 that nothing listens on, taken below the kernel's ephemeral
// range. A test that restarts a server on the port it first gave it (a broker after kill -9, a
// service after a crash) must not find it taken meanwhile: a port of the ephemeral range may go
// to another process's listener on port 0 or to an outgoing connection at any time, and make
// test once failed so (the restore drill's restarted control found its port held by another
// package's admin endpoint). Two tests may still draw the same port; the server's start then
// fails on it, and the caller draws again.
func Free() (int, error) {
	low := 32768 // Linux's default start of the ephemeral range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	for range 100 {
		if low <= first+100 {
			break
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first+rand.IntN(low-first))))
		if err == nil {
			defer ln.Close()
			return ln.Addr().(*net.TCPAddr).Port, nil
		}
	}
	return 0, fmt.Errorf("ports: no free port below the ephemeral range (from %d)", low)
}
