// Package stack builds the msgexchange binaries and runs them as separate processes, for the
// end-to-end tests, the benchmarks and `make demo`.
package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Services are the five roles, in start order.
var Services = []string{"ingest", "pump", "dispatcher", "backfill", "control"}

// Binaries maps each binary to its main package, relative to the repository root.
var Binaries = map[string]string{
	"msgx-ingest":     "./services/ingest/cmd/msgx-ingest",
	"msgx-pump":       "./services/pump/cmd/msgx-pump",
	"msgx-dispatcher": "./services/dispatcher/cmd/msgx-dispatcher",
	"msgx-backfill":   "./services/backfill/cmd/msgx-backfill",
	"msgx-control":    "./services/control/cmd/msgx-control",
}

// Root finds the repository root (the directory holding go.work) from the working directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.work not found above the working directory")
		}
		dir = parent
	}
}

// Build compiles every binary into outDir.
func Build(ctx context.Context, root, outDir string) error {
	args := []string{"build", "-o", outDir + string(filepath.Separator)}
	for _, pkg := range Binaries {
		args = append(args, pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// Stack is a set of running service processes sharing one environment.
type Stack struct {
	bin  string
	env  []string
	logs io.Writer

	mu    sync.Mutex
	procs map[string]*proc
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  *bytes.Buffer
}

// New returns a stack running binaries from bin with env added to the process environment;
// each process's output is copied to logs (may be nil) and kept for Output.
func New(bin string, env []string, logs io.Writer) *Stack {
	if logs == nil {
		logs = io.Discard
	}
	return &Stack{bin: bin, env: env, logs: logs, procs: map[string]*proc{}}
}

// Start starts the service role (e.g. "pump") with extra environment on top of the stack's.
func (s *Stack) Start(role string, args []string, extraEnv ...string) error {
	return s.start(role, "msgx-"+role, args, extraEnv)
}

// StartBinary starts any built binary under a name.
func (s *Stack) StartBinary(name, binary string, args []string, extraEnv ...string) error {
	return s.start(name, binary, args, extraEnv)
}

func (s *Stack) start(name, binary string, args, extraEnv []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.procs[name]; ok {
		select {
		case <-p.done:
			// It exited on its own: starting it again replaces it, as a supervisor restarts
			// a crashed process.
		default:
			return fmt.Errorf("%s already running", name)
		}
	}
	cmd := exec.Command(filepath.Join(s.bin, binary), args...)
	cmd.Env = append(append(os.Environ(), s.env...), extraEnv...)
	buf := &bytes.Buffer{}
	w := io.MultiWriter(&prefixWriter{prefix: "[" + name + "] ", w: s.logs}, &lockedBuffer{b: buf, mu: &s.mu})
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), out: buf}
	go func() { _ = cmd.Wait(); close(p.done) }()
	s.procs[name] = p
	return nil
}

// Running reports whether the named process is still alive.
func (s *Stack) Running(name string) bool {
	s.mu.Lock()
	p, ok := s.procs[name]
	s.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// PID returns the process id of the named process while it runs, else 0: a process that was
// restarted has another one.
func (s *Stack) PID(name string) int {
	if !s.Running(name) {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.procs[name]; ok {
		return p.cmd.Process.Pid
	}
	return 0
}

// Exited reports whether the named process was started and has exited on its own (not through
// Stop or Kill), and its exit code (-1 when a signal ended it).
func (s *Stack) Exited(name string) (code int, exited bool) {
	s.mu.Lock()
	p, ok := s.procs[name]
	s.mu.Unlock()
	if !ok {
		return 0, false
	}
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), true
	default:
		return 0, false
	}
}

// Stop sends SIGTERM and waits up to timeout, then kills.
func (s *Stack) Stop(name string, timeout time.Duration) {
	s.mu.Lock()
	p, ok := s.procs[name]
	delete(s.procs, name)
	s.mu.Unlock()
	if !ok {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Kill stops the named process at once with SIGKILL, as a crash would.
func (s *Stack) Kill(name string) {
	s.mu.Lock()
	p, ok := s.procs[name]
	delete(s.procs, name)
	s.mu.Unlock()
	if !ok {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// StopAll stops every process.
func (s *Stack) StopAll(timeout time.Duration) {
	s.mu.Lock()
	names := make([]string, 0, len(s.procs))
	for n := range s.procs {
		names = append(names, n)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() { defer wg.Done(); s.Stop(n, timeout) }()
	}
	wg.Wait()
}

// Output returns what the named process printed so far.
func (s *Stack) Output(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.procs[name]; ok {
		return p.out.String()
	}
	return ""
}

type prefixWriter struct {
	prefix string
	w      io.Writer
	mu     sync.Mutex
	line   []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line = append(p.line, b...)
	for {
		i := bytes.IndexByte(p.line, '\n')
		if i < 0 {
			break
		}
		_, _ = p.w.Write(append([]byte(p.prefix), p.line[:i+1]...))
		p.line = p.line[i+1:]
	}
	return len(b), nil
}

type lockedBuffer struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
