package pgtest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/msgexchange/msgexchange/pkg/migrate"
	"github.com/msgexchange/msgexchange/testkit/ports"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// EnvBin names the variable that overrides the directory of the PostgreSQL server binaries
// (initdb, postgres, pg_basebackup, pg_ctl) OwnReplicated runs; by default the newest under
// /usr/lib/postgresql/*/bin (Debian's packages), else the PATH.
const EnvBin = "MSGX_TEST_PG_BIN"

// Mode is how the primary of a Replicated waits for its standby.
type Mode string

const (
	// Sync: synchronous_standby_names names the standby, so a commit returns only once the
	// standby has flushed it, and a promotion loses nothing.
	Sync Mode = "sync"
	// Async: commits return at once; a promotion loses what the standby had not received.
	Async Mode = "async"
)

// replicatedSetup bounds the start of the cluster: initdb, the primary, the migration, the
// base backup and the standby catching up.
const replicatedSetup = 2 * time.Minute

// Database is the name of the database a Replicated migrates and its DSN names.
const Database = "msgx"

// Replicated is a PostgreSQL primary and one streaming standby of it (pg_basebackup -R), both
// of the test's own on loopback TCP ports, with the services' schema migrated into the
// database Database. A test of a PostgreSQL failover uses it: KillPrimary kills the primary
// with SIGKILL (every process of it, as a crashed host loses it), Promote promotes the standby
// (pg_ctl promote), and RestartOld brings the old primary back on its old data as a writable
// server: the zombie a fence must keep the services away from. Every process is killed and the
// directory removed when the test ends.
type Replicated struct {
	Mode Mode
	// Primary is the server the setup started as primary, Standby its standby; the roles stay
	// named so after a promotion.
	Primary, Standby *Node

	t    testing.TB
	bin  string
	dir  string
	cred *syscall.Credential // the postgres user's, when the test runs as root

	rot rotation // the roles of a run of failovers (FailoverCurrent, Rebuild)
}

// Node is one PostgreSQL server of a Replicated.
type Node struct {
	Name string
	Port int
	data string
	r    *Replicated

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	extra  []string // -c settings of the next start
}

// OwnReplicated initialises and starts the primary, migrates Database on it, takes a base
// backup into the standby and starts it, and returns once the standby streams (and, in Sync
// mode, is the synchronous standby).
func OwnReplicated(t testing.TB, mode Mode) *Replicated {
	t.Helper()
	if mode != Sync && mode != Async {
		t.Fatalf("pgtest: replication mode %q (want %q or %q)", mode, Sync, Async)
	}
	r := &Replicated{Mode: mode, t: t, bin: serverBin(t)}
	dir, err := os.MkdirTemp("", "msgxpg")
	if err != nil {
		t.Fatal(err)
	}
	r.dir = dir
	t.Cleanup(func() {
		for _, n := range []*Node{r.Primary, r.Standby} {
			if n != nil {
				n.kill()
			}
		}
		if t.Failed() {
			r.dumpLogs(t)
		}
		_ = os.RemoveAll(dir)
	})
	// PostgreSQL refuses to run as root: test machines and CI do run as root, so the servers
	// run as the postgres user the Debian package creates, and own the directory.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root needs a postgres user to run the servers as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		r.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), replicatedSetup)
	defer cancel()

	r.Primary = r.node("primary")
	r.run(ctx, "initdb", "-D", r.Primary.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\n"+
		"wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\nwal_keep_size = '256MB'\n"+
		// Small enough for a test machine; the services of one test open about 60 connections.
		"shared_buffers = '32MB'\nmax_connections = 200\n"+
		// A kill -9 of the server does not lose the kernel's page cache, so skipping fsync loses
		// nothing a test kills, and keeps a loaded machine's disk out of the timings.
		"fsync = off\nfull_page_writes = on\nlog_line_prefix = '%%m [%%p] %%a '\n"+
		// Who reached a server is in its log (Node.Log): a test shows that the services tried
		// the zombie and were turned away.
		"log_connections = on\n", r.dir)
	if err := appendFile(filepath.Join(r.Primary.data, "postgresql.conf"), conf); err != nil {
		t.Fatal(err)
	}
	r.Primary.start()
	admin := r.Primary.connect(ctx, "postgres")
	for _, q := range []string{
		`CREATE ROLE replicator WITH REPLICATION LOGIN`,
		`CREATE DATABASE ` + Database,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("pgtest: %s: %v", q, err)
		}
	}
	_ = admin.Close(ctx)
	if _, err := migrate.Up(ctx, r.Primary.DSN(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("pgtest: migrate the primary: %v", err)
	}

	r.Standby = r.node("standby")
	r.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(r.Primary.Port), "-U", "replicator",
		"-D", r.Standby.data, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
	// cluster_name is the application_name the standby's WAL receiver reports, which
	// synchronous_standby_names names.
	r.Standby.extra = []string{"cluster_name=standby"}
	r.Standby.start()
	if mode == Sync {
		admin := r.Primary.connect(ctx, "postgres")
		for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby)'`, `SELECT pg_reload_conf()`} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatalf("pgtest: %s: %v", q, err)
			}
		}
		_ = admin.Close(ctx)
	}
	want := map[Mode]string{Sync: "sync", Async: "async"}[mode]
	r.await(ctx, "the standby streaming in "+want+" mode", func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, r.Primary.DSN())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var state, sync string
		err = conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 'standby'`).Scan(&state, &sync)
		if err != nil {
			return err
		}
		if state != "streaming" || sync != want {
			return fmt.Errorf("standby %s, %s", state, sync)
		}
		return nil
	})
	return r
}

// DSN is the multi-host DSN of Database naming the primary then the standby, with
// target_session_attrs=read-write: what a platform team hands the services.
func (r *Replicated) DSN() string {
	return multiURL(Database, r.Primary.addr(), r.Standby.addr())
}

// KillPrimary kills every process of the primary with SIGKILL and waits for the postmaster to
// be gone. Its data directory stays, as a crashed host's disk does.
func (r *Replicated) KillPrimary() { r.Primary.kill() }

// Promote promotes the standby (pg_ctl promote) and waits until it accepts writes.
func (r *Replicated) Promote() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), replicatedSetup)
	defer cancel()
	r.run(ctx, "pg_ctl", "promote", "-D", r.Standby.data, "-w", "-t", "60")
	if err := r.Standby.awaitWritable(ctx); err != nil {
		r.t.Fatalf("pgtest: %v", err)
	}
}

// RestartOld starts the killed primary again on its own data directory: it recovers from its
// WAL and comes back as a writable primary of the old timeline, the split brain a fence must
// stop. synchronous_standby_names is cleared on it, so that its commits do not wait for a
// standby that follows another server now: the zombie accepts writes.
func (r *Replicated) RestartOld() {
	r.t.Helper()
	r.Primary.extra = []string{"synchronous_standby_names="}
	r.Primary.start()
}

// Timeline is the timeline a writable node writes its WAL on (the first eight hex digits of
// its current WAL file's name): 1 for the setup's primary, 2 for the standby once promoted.
// pg_control_checkpoint() would lag: it names the timeline of the last checkpoint, and a
// promotion only requests one.
func (n *Node) Timeline(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := n.connect(ctx, Database)
	defer conn.Close(ctx)
	var tl int
	if err := conn.QueryRow(ctx, `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`).Scan(&tl); err != nil {
		t.Fatalf("pgtest: %s timeline: %v", n.Name, err)
	}
	return tl
}

// DSN connects to Database on this node only, as the superuser postgres.
func (n *Node) DSN() string { return multiURL(Database, n.addr()) }

// Connect opens a connection to Database on this node only; it closes when the test ends.
func (n *Node) Connect(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := n.connect(ctx, Database)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func multiURL(db string, addrs ...string) string {
	u := &url.URL{Scheme: "postgres", User: url.User("postgres"), Host: strings.Join(addrs, ","), Path: "/" + db}
	q := url.Values{"sslmode": {"disable"}, "connect_timeout": {"5"}}
	if len(addrs) > 1 {
		q.Set("target_session_attrs", "read-write")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (r *Replicated) node(name string) *Node {
	r.t.Helper()
	port, err := ports.Free()
	if err != nil {
		r.t.Fatalf("pgtest: %v", err)
	}
	return &Node{Name: name, Port: port, data: filepath.Join(r.dir, name), r: r}
}

func (n *Node) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)) }

func (n *Node) logFile() string { return filepath.Join(n.r.dir, n.Name+".log") }

// start runs the postmaster in a process group of its own (so kill reaches its backends too)
// and waits until it accepts connections.
func (n *Node) start() {
	n.r.t.Helper()
	if err := n.startErr(); err != nil {
		n.r.t.Fatalf("pgtest: %v", err)
	}
}

// startErr is start returning its failure, for callers outside the test's goroutine
// (Replicated.Rebuild).
func (n *Node) startErr() error {
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		return fmt.Errorf("%s started twice", n.Name)
	}
	log, err := os.OpenFile(n.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	args := []string{"-D", n.data, "-c", "port=" + strconv.Itoa(n.Port)}
	for _, e := range n.extra {
		args = append(args, "-c", e)
	}
	cmd := exec.Command(filepath.Join(n.r.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: n.r.cred}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		_ = log.Close()
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), replicatedSetup)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, multiURL("postgres", n.addr()))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start: %w\n%s", n.Name, err, tail(n.logFile()))
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer on %s: %w\n%s", n.Name, n.addr(), err, tail(n.logFile()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL to the node's process group and waits for the postmaster.
func (n *Node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
	// Backends of a dead postmaster leave on their own; the group kill took them already, and a
	// restart must not find the old ones holding the shared memory.
	n.cmd, n.exited = nil, nil
}

func (n *Node) connect(ctx context.Context, db string) *pgx.Conn {
	t := n.r.t
	t.Helper()
	conn, err := pgx.Connect(ctx, multiURL(db, n.addr()))
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", n.Name, err)
	}
	return conn
}

// run runs one of the server's tools as the servers' user.
func (r *Replicated) run(ctx context.Context, tool string, args ...string) {
	r.t.Helper()
	if err := r.runErr(ctx, tool, args...); err != nil {
		r.t.Fatalf("pgtest: %v", err)
	}
}

func (r *Replicated) runErr(ctx context.Context, tool string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(r.bin, tool), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	cmd.Dir = r.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", tool, strings.Join(args, " "), err, out)
	}
	return nil
}

// await retries probe until it succeeds, failing the test with its last error when ctx ends.
func (r *Replicated) await(ctx context.Context, what string, probe func(context.Context) error) {
	r.t.Helper()
	if err := testwait.Until(ctx, what, 5*time.Second, probe); err != nil {
		r.t.Fatalf("pgtest: %v", err)
	}
}

func (r *Replicated) dumpLogs(t testing.TB) {
	for _, n := range []*Node{r.Primary, r.Standby} {
		if n != nil {
			t.Logf("pgtest: %s's log:\n%s", n.Name, tail(n.logFile()))
		}
	}
}

// serverBin is the directory of the server binaries: EnvBin, else the newest of Debian's
// /usr/lib/postgresql/<version>/bin, else the directory of initdb on the PATH.
func serverBin(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(EnvBin); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) < version(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		t.Fatalf("pgtest: no PostgreSQL server binaries under /usr/lib/postgresql/*/bin or on the PATH (set %s)", EnvBin)
	}
	return filepath.Dir(p)
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// tail is the end of a log file, enough to see why a server stopped.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const max = 8000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// DB is the replicated database as a *DB: its DSN is the multi-host DSN and its pool, of the
// test's own, follows a promotion as the services' pools do. It closes when the test ends.
func (r *Replicated) DB(t testing.TB) *DB {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(r.DSN())
	if err != nil {
		t.Fatalf("pgtest: parse dsn: %v", err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: open pool on the replicated database: %v", err)
	}
	t.Cleanup(pool.Close)
	return &DB{DSN: r.DSN(), Pool: pool, Name: Database}
}

// DB is Database on this node alone as a *DB, with a pool of the test's own that never moves
// to another server: a test reads the promoted server through it while a zombie is up, which
// the multi-host DSN (listing the zombie first) would reach.
func (n *Node) DB(t testing.TB) *DB {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(n.DSN())
	if err != nil {
		t.Fatalf("pgtest: parse dsn: %v", err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: open pool on %s: %v", n.Name, err)
	}
	t.Cleanup(pool.Close)
	return &DB{DSN: n.DSN(), Pool: pool, Name: Database}
}

// Log is the node's server log so far.
func (n *Node) Log(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(n.logFile())
	if err != nil {
		t.Fatalf("pgtest: %s's log: %v", n.Name, err)
	}
	return string(b)
}

// CutReplication pauses the standby and ends the primary's WAL sender: from now on the
// primary, in Async mode, commits what the standby will never receive, and KillPrimary then
// loses that tail, as an asynchronous failover does. Pausing alone would not do: the standby's
// socket still holds what the primary had sent, and it reads that on Resume. Call Resume on
// the standby before Promote.
func (r *Replicated) CutReplication() {
	r.t.Helper()
	if r.Mode != Async {
		r.t.Fatal("pgtest: CutReplication in sync mode would stop every commit of the primary")
	}
	r.Standby.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := r.Primary.connect(ctx, "postgres")
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_replication`); err != nil {
		r.t.Fatalf("pgtest: end the WAL sender: %v", err)
	}
	r.await(ctx, "the WAL sender to end", func(ctx context.Context) error {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d WAL senders", n)
		}
		return nil
	})
}

// Pause stops every process of the node with SIGSTOP. Resume continues it.
func (n *Node) Pause() { n.signal(syscall.SIGSTOP) }

// Resume continues a paused node (SIGCONT).
func (n *Node) Resume() { n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		n.r.t.Fatalf("pgtest: %s is not running", n.Name)
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, sig); err != nil {
		n.r.t.Fatalf("pgtest: signal %s: %v", n.Name, err)
	}
}
