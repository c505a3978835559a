package mysqltest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Environment variables that override the binaries Own runs.
const (
	EnvServer  = "MSGX_TEST_MARIADBD"
	EnvInstall = "MSGX_TEST_MARIADB_INSTALL_DB"
)

// Server is a MariaDB server of one test's own. A test that stops, kills or restarts the inbox
// server uses it, so that the fault never reaches the shared server the other test packages
// are using at the same time. It listens only on a Unix socket in a directory of its own; its
// data directory survives Stop and Kill, so Start brings back the same server with what it had
// committed.
type Server struct {
	t      testing.TB
	bin    string
	dir    string
	sock   string
	rawDSN string
	root   *mysql.Config

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when cmd has been waited for.
	exited chan struct{}
}

// Own initialises a data directory (mariadb-install-db), starts mariadbd on it and stops it
// when the test ends. It takes some seconds, most of them the initialisation.
func Own(t testing.TB) *Server {
	t.Helper()
	bin := lookBinary(t, EnvServer, "mariadbd")
	install := lookBinary(t, EnvInstall, "mariadb-install-db")
	// Socket paths are limited to about 100 bytes; t.TempDir can be longer than that.
	dir, err := os.MkdirTemp("", "msgxmariadb")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, dir: dir, sock: filepath.Join(dir, "mysqld.sock")}
	t.Cleanup(func() {
		s.Kill()
		_ = os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	// --user=root: test machines and CI run as root, which mariadbd otherwise refuses.
	init := exec.CommandContext(ctx, install, "--no-defaults", "--datadir="+s.dataDir(),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--user=root")
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("mysqltest: %s: %v\n%s", install, err, out)
	}
	s.root = &mysql.Config{User: "root", Net: "unix", Addr: s.sock, Timeout: 5 * time.Second,
		AllowNativePasswords: true, Params: map[string]string{}}
	s.rawDSN = s.root.FormatDSN()
	s.Start()
	return s
}

func lookBinary(t testing.TB, env, name string) string {
	t.Helper()
	if bin := os.Getenv(env); bin != "" {
		return bin
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		// The Debian packages install the server into /usr/sbin, which a user's PATH may lack.
		if _, statErr := os.Stat("/usr/sbin/" + name); statErr == nil {
			return "/usr/sbin/" + name
		}
		t.Fatalf("mysqltest: no %s on PATH (set %s): %v", name, env, err)
	}
	return bin
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// New is mysqltest.New on this server: a database with the inbox fixture and a restricted
// account, dropped when the test ends.
func (s *Server) New(t testing.TB) *DB {
	t.Helper()
	return newOn(t, s.rawDSN, s.root)
}

// Start starts the server on its data directory and waits until it answers.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.t.Fatal("mysqltest: own server started twice")
	}
	logFile := filepath.Join(s.dir, "error.log")
	cmd := exec.Command(s.bin, "--no-defaults", "--datadir="+s.dataDir(), "--socket="+s.sock,
		"--skip-networking", "--user=root", "--log-error="+logFile, "--pid-file="+filepath.Join(s.dir, "mysqld.pid"),
		// Small enough for a test machine; the defaults would take 128 MB each.
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--max-connections=200")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("mysqltest: start %s: %v", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for {
		db, err := open(ctx, serverConfig(s.root))
		if err == nil {
			_ = db.Close()
			return
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logFile)
			s.t.Fatalf("mysqltest: own mariadbd exited at start: %v\n%s", err, log)
		case <-ctx.Done():
			log, _ := os.ReadFile(logFile)
			s.t.Fatalf("mysqltest: own mariadbd did not answer on %s: %v\n%s", s.sock, err, log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop shuts the server down cleanly (SIGTERM, as systemd or Kubernetes would) and waits for
// it to exit.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill ends the server at once (SIGKILL, a crash): InnoDB recovers what was committed at the
// next Start. Killing a stopped server does nothing.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.t.Errorf("mysqltest: signal own mariadbd: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(cleanupTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.t.Errorf("mysqltest: own mariadbd did not exit within %s of %s", cleanupTimeout, sig)
	}
	s.cmd, s.exited = nil, nil
}
