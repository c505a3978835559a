package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// restartDelay is how long the supervisor waits before restarting a process that exited on
// its own: an orchestrator's restart, short so that a crash loop during an outage keeps
// trying while the outage lasts.
const restartDelay = time.Second

// supervisor keeps the chaos stack's processes running, as an orchestrator would: a process
// that exits on its own is restarted after restartDelay and the exit is counted. A fault that
// kills a process holds it first, so its deliberate down time is not mistaken for a crash.
type supervisor struct {
	st    *stack.Stack
	names []string
	start func(name string) error

	mu      sync.Mutex
	held    map[string]bool
	exitAt  map[string]time.Time
	exits   map[string]map[int]int // name → exit code → count
	lastErr map[string]error       // the last failed restart
}

func newSupervisor(st *stack.Stack, names []string, start func(string) error) *supervisor {
	return &supervisor{st: st, names: names, start: start, held: map[string]bool{}, exitAt: map[string]time.Time{},
		exits: map[string]map[int]int{}, lastErr: map[string]error{}}
}

// run watches the processes until ctx ends.
func (s *supervisor) run(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, n := range s.names {
			s.check(n)
		}
	}
}

func (s *supervisor) check(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[name] {
		return
	}
	code, exited := s.st.Exited(name)
	if !exited {
		return
	}
	at, seen := s.exitAt[name]
	if !seen {
		s.exitAt[name] = time.Now()
		if s.exits[name] == nil {
			s.exits[name] = map[int]int{}
		}
		s.exits[name][code]++
		return
	}
	if time.Since(at) < restartDelay {
		return
	}
	delete(s.exitAt, name)
	if err := s.start(name); err != nil {
		s.lastErr[name] = err
	}
}

// hold stops the supervisor from restarting name until release. It reports false, and holds
// nothing, when another fault holds name already: two faults never take turns on one process.
func (s *supervisor) hold(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[name] {
		return false
	}
	s.held[name] = true
	delete(s.exitAt, name)
	return true
}

// holdWait is hold, retried while another fault holds name, for at most d.
func (s *supervisor) holdWait(name string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !s.hold(name) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

func (s *supervisor) release(name string) {
	s.mu.Lock()
	delete(s.held, name)
	s.mu.Unlock()
}

// selfExits summarises the exits the supervisor saw, "pump 2 (exit 1 ×2)"; refused counts those
// with service.ExitSettingsRefused.
func (s *supervisor) selfExits() (total, refused int, lines []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.names {
		codes := s.exits[n]
		if len(codes) == 0 {
			continue
		}
		sum := 0
		detail := ""
		for _, code := range slices.Sorted(maps.Keys(codes)) {
			k := codes[code]
			sum += k
			if code == service.ExitSettingsRefused {
				refused += k
			}
			if detail != "" {
				detail += ", "
			}
			detail += fmt.Sprintf("exit %d ×%d", code, k)
		}
		total += sum
		line := fmt.Sprintf("%s %d (%s)", n, sum, detail)
		if err := s.lastErr[n]; err != nil {
			line += "; last restart failed: " + err.Error()
		}
		lines = append(lines, line)
	}
	return total, refused, lines
}
