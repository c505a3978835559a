package redistest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/testwait"
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
	args  map[string][]string  // data node address → its redis-server arguments, for Rejoin
	bin   string
	dir   string

	mu    sync.Mutex
	procs []*exec.Cmd // every process started, killed at cleanup
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
	s := &Sentinel{Master: SentinelMaster, nodes: map[string]*exec.Cmd{}, args: map[string][]string{}, bin: bin, dir: dir}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.procs {
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
		cmd, err := s.start(args)
		if err != nil {
			t.Fatalf("redistest: start %s: %v", name, err)
		}
		return cmd
	}
	node := func(name string, extra ...string) string {
		t.Helper()
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--dbfilename", name + ".rdb", "--logfile", filepath.Join(dir, name+".log")}, extra...)
		s.nodes[addr] = start(name, args...)
		s.args[addr] = args
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
	addr, err := s.Kill(ctx)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return addr
}

// Kill is KillMaster for a caller that is not the test's goroutine: it returns its error.
func (s *Sentinel) Kill(ctx context.Context) (string, error) {
	addr, err := s.MasterAddr(ctx)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	cmd := s.nodes[addr]
	s.mu.Unlock()
	if cmd == nil {
		return "", fmt.Errorf("the sentinels name %s as master, not a node of this setup", addr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return "", fmt.Errorf("kill -9 the master %s: %w", addr, err)
	}
	return addr, nil
}

// WaitFailover waits up to timeout for the sentinels to name a master other than old, and
// returns it once it answers as a master.
func (s *Sentinel) WaitFailover(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	now, err := s.AwaitFailover(ctx, old)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return now
}

// AwaitFailover is WaitFailover bounded by ctx, returning its error.
func (s *Sentinel) AwaitFailover(ctx context.Context, old string) (string, error) {
	var now string
	err := testwait.Until(ctx, "the sentinels to promote a replica in place of "+old, time.Second, func(ctx context.Context) error {
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
	return now, err
}

// Rejoin starts the killed data node at addr again, empty, as a replica of the current master
// (as an operator or the platform brings a failed host back), and returns once it is in sync
// and every sentinel counts it a replica fit to promote: the setup can fail over again.
func (s *Sentinel) Rejoin(ctx context.Context, addr string) error {
	master, err := s.MasterAddr(ctx)
	if err != nil {
		return err
	}
	if master == addr {
		return fmt.Errorf("%s is the master", addr)
	}
	s.mu.Lock()
	args, ok := s.args[addr]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s is not a data node of this setup", addr)
	}
	mhost, mport, _ := net.SplitHostPort(master)
	args = append(slices.Clone(args), "--replicaof", mhost, mport)
	cmd, err := s.start(args)
	if err != nil {
		return fmt.Errorf("start %s again: %w", addr, err)
	}
	s.mu.Lock()
	s.nodes[addr] = cmd
	s.mu.Unlock()
	if err := testwait.Until(ctx, addr+" in sync with the master", time.Second, func(ctx context.Context) error { return linkUp(ctx, addr) }); err != nil {
		return err
	}
	for _, a := range s.Addrs {
		err := testwait.Until(ctx, "sentinel "+a+" to count "+addr+" a replica", time.Second, func(ctx context.Context) error {
			sc := redis.NewSentinelClient(&redis.Options{Addr: a})
			defer sc.Close()
			reps, err := sc.Replicas(ctx, s.Master).Result()
			if err != nil {
				return err
			}
			for _, r := range reps {
				if net.JoinHostPort(r["ip"], r["port"]) == addr {
					if strings.Contains(r["flags"], "down") || r["master-link-status"] != "ok" {
						return fmt.Errorf("%s: flags %s, master link %s", addr, r["flags"], r["master-link-status"])
					}
					return nil
				}
			}
			return fmt.Errorf("%s not among its replicas", addr)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// DataNodes lists the data nodes' addresses (the master and the replica, alive or not).
func (s *Sentinel) DataNodes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.nodes))
}

// start runs redis-server with args and keeps the process for the cleanup.
func (s *Sentinel) start(args []string) (*exec.Cmd, error) {
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.procs = append(s.procs, cmd)
	s.mu.Unlock()
	return cmd, nil
}

// await retries probe until it succeeds, failing the test with probe's last error when ctx
// ends.
func (s *Sentinel) await(ctx context.Context, t testing.TB, what string, probe func(context.Context) error) {
	t.Helper()
	if err := testwait.Until(ctx, what, time.Second, probe); err != nil {
		t.Fatalf("redistest: %v", err)
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

// ReplicaAddr is the address of the data node other than master: the replica the sentinels
// would promote.
func (s *Sentinel) ReplicaAddr(t testing.TB, master string) string {
	t.Helper()
	for _, a := range s.DataNodes() {
		if a != master {
			return a
		}
	}
	t.Fatalf("redistest: no data node besides %s", master)
	return ""
}
