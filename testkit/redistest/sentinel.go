package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Sentinel setup's timings: short, so that a failover takes a few seconds instead of the
// production defaults' half a minute (down-after-milliseconds 30000, failover-timeout 180000).
const (
	// SentinelMaster is the name the sentinels monitor the master under.
	SentinelMaster = "msgxmaster"
	sentinelQuorum = 2
	sentinelCount  = 3
	downAfterMS    = 1000
	failoverMS     = 4000
	// sentinelSetup bounds the start of the five processes and their discovery of each other
	// (the sentinels announce themselves on the master every 2 s).
	sentinelSetup = 30 * time.Second
)

// Sentinel is a Redis master, one replica of it and three sentinels monitoring it with
// quorum 2, all of the test's own on loopback TCP ports, stopped when the test ends. A test
// of a Redis failover uses it: KillMaster kills the master with SIGKILL and WaitFailover
// waits for the sentinels to promote the replica.
type Sentinel struct {
	// Master is the name the sentinels know the master by (redis.sentinel-master).
	Master string
	// Addrs are the sentinels' addresses (redis.sentinel-addrs).
	Addrs []string

	nodes map[string]*exec.Cmd // data node address → its process
	dir   string
}

// OwnSentinel starts the master, its replica and the three sentinels, and returns once the
// replica is in sync and every sentinel knows the replica and the other sentinels, so that a
// failover can happen from the first moment.
func OwnSentinel(t testing.TB) *Sentinel {
	t.Helper()
	bin := serverBinary(t)
	dir, err := os.MkdirTemp("", "msgxsentinel")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sentinel{Master: SentinelMaster, nodes: map[string]*exec.Cmd{}, dir: dir}
	var procs []*exec.Cmd
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
		if t.Failed() {
			s.dumpLogs(t)
		}
		_ = os.RemoveAll(dir)
	})
	start := func(name string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("redistest: start %s: %v", name, err)
		}
		procs = append(procs, cmd)
		return cmd
	}
	node := func(name string, extra ...string) string {
		t.Helper()
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--dbfilename", name + ".rdb", "--logfile", filepath.Join(dir, name+".log")}, extra...)
		s.nodes[addr] = start(name, args...)
		return addr
	}
	master := node("master")
	mhost, mport, _ := net.SplitHostPort(master)
	replica := node("replica", "--replicaof", mhost, mport)
	for i := range sentinelCount {
		port := freePort(t)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel%d.conf", i))
		// A sentinel rewrites its configuration file as it learns the setup: it must be its own.
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s %s %s %d\nsentinel down-after-milliseconds %s %d\n"+
			"sentinel failover-timeout %s %d\nsentinel parallel-syncs %s 1\n",
			port, dir, filepath.Join(dir, fmt.Sprintf("sentinel%d.log", i)),
			s.Master, mhost, mport, sentinelQuorum, s.Master, downAfterMS, s.Master, failoverMS, s.Master)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		start(fmt.Sprintf("sentinel%d", i), conf, "--sentinel")
		s.Addrs = append(s.Addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}

	ctx, cancel := context.WithTimeout(context.Background(), sentinelSetup)
	defer cancel()
	s.await(ctx, t, "the replica in sync with the master", func(ctx context.Context) error {
		return linkUp(ctx, replica)
	})
	for _, a := range s.Addrs {
		s.await(ctx, t, "sentinel "+a+" to know the replica and the other sentinels", func(ctx context.Context) error {
			sc := redis.NewSentinelClient(&redis.Options{Addr: a})
			defer sc.Close()
			reps, err := sc.Replicas(ctx, s.Master).Result()
			if err != nil {
				return err
			}
			if len(reps) < 1 {
				return fmt.Errorf("knows %d replicas", len(reps))
			}
			others, err := sc.Sentinels(ctx, s.Master).Result()
			if err != nil {
				return err
			}
			if len(others) < sentinelCount-1 {
				return fmt.Errorf("knows %d other sentinels", len(others))
			}
			return sc.CkQuorum(ctx, s.Master).Err()
		})
	}
	return s
}

// MasterAddr is the master's address as the sentinels report it.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	var last error
	for _, a := range s.Addrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: a})
		hp, err := sc.GetMasterAddrByName(ctx, s.Master).Result()
		_ = sc.Close()
		if err == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
		last = err
	}
	return "", fmt.Errorf("no sentinel named the master %s: %w", s.Master, last)
}

// Client connects straight to one data node, bypassing the sentinels (to look at or damage
// what a node holds).
func (s *Sentinel) Client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize})
}

// KillMaster kills the current master with SIGKILL, as a crashed host would lose it, and
// returns its address. The process is not restarted.
func (s *Sentinel) KillMaster(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	addr, err := s.MasterAddr(ctx)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	cmd := s.nodes[addr]
	if cmd == nil {
		t.Fatalf("redistest: the sentinels name %s as master, not a node of this setup", addr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("redistest: kill -9 the master %s: %v", addr, err)
	}
	return addr
}

// WaitFailover waits up to timeout for the sentinels to name a master other than old, and
// returns it once it answers as a master.
func (s *Sentinel) WaitFailover(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var now string
	s.await(ctx, t, "the sentinels to promote a replica in place of "+old, func(ctx context.Context) error {
		a, err := s.MasterAddr(ctx)
		if err != nil {
			return err
		}
		if a == old {
			return fmt.Errorf("the master is still %s", a)
		}
		c := s.Client(a)
		defer c.Close()
		role, err := c.Do(ctx, "ROLE").Slice()
		if err != nil {
			return err
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s answers ROLE %v", a, role)
		}
		now = a
		return nil
	})
	return now
}

// await retries probe until it succeeds, failing the test with probe's last error when ctx
// ends.
func (s *Sentinel) await(ctx context.Context, t testing.TB, what string, probe func(context.Context) error) {
	t.Helper()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := probe(pctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("redistest: waiting for %s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// linkUp reports whether the replica at addr has completed its sync with the master.
func linkUp(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "master_link_status:up") {
		return fmt.Errorf("replica %s: master link not up", addr)
	}
	return nil
}

// dumpLogs logs the processes' logs of a failed test: what the sentinels decided is there.
func (s *Sentinel) dumpLogs(t testing.TB) {
	logs, _ := filepath.Glob(filepath.Join(s.dir, "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		t.Logf("%s:\n%s", filepath.Base(l), b)
	}
}

// freePort returns a loopback TCP port free at the time of the call.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
