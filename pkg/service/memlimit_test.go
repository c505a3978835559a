package service

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// childEnv makes the test binary, run again by TestHeapLimitFollowsTheContainer inside a
// memory cgroup, set its limit the way a service starts and print the heap limit it got.
const childEnv = "MSGX_TEST_MEMLIMIT_CHILD"

// A service in a container with a memory limit gives its heap a soft limit of 90 % of it;
// GOMEMLIMIT set by hand wins. The container is a real memory cgroup made for the test (v1
// here, v2 where the machine has it), and the process is the test binary run again inside it,
// through setMemoryLimit as service.Main calls it.
func TestHeapLimitFollowsTheContainer(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		setMemoryLimit(slog.New(slog.NewTextHandler(io.Discard, nil)))
		fmt.Printf("heap-limit=%d\n", debug.SetMemoryLimit(-1))
		return
	}
	const limit = 256 << 20
	dir, limitFile := memoryCgroup(t)
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(extraEnv ...string) int64 {
		t.Helper()
		// The shell joins the cgroup, then becomes the test binary: the child is in it from its
		// first instruction, as a container's process is.
		cmd := exec.Command("sh", "-c", `echo $$ > "$1" && shift && exec "$@"`, "sh",
			filepath.Join(dir, "cgroup.procs"), os.Args[0], "-test.run=^TestHeapLimitFollowsTheContainer$")
		cmd.Env = append(append(os.Environ(), childEnv+"=1"), extraEnv...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the child in the cgroup: %v\n%s", err, out)
		}
		for line := range strings.Lines(string(out)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "heap-limit="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("the child printed no heap limit:\n%s", out)
		return 0
	}
	if got, want := run(), int64(limit*9/10); got != want {
		t.Errorf("heap limit %d in a container of %d bytes, want %d (90 %%)", got, limit, want)
	}
	if got := run("GOMEMLIMIT=100MiB"); got != 100<<20 {
		t.Errorf("heap limit %d with GOMEMLIMIT=100MiB, want %d", got, 100<<20)
	}
}

// memoryCgroup makes a memory cgroup for the test, removed at its end, and names the file
// that sets its limit. Without a cgroup file system the process may write (not root, or a
// container without the memory controller), the test is skipped: nothing else can give a
// process a container's memory limit.
func memoryCgroup(t *testing.T) (dir, limitFile string) {
	t.Helper()
	candidates := []struct{ parent, limitFile string }{
		{"/sys/fs/cgroup/memory", "memory.limit_in_bytes"}, // v1
		{"/sys/fs/cgroup", "memory.max"},                   // v2, unified
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c.parent, c.limitFile)); err != nil && c.limitFile == "memory.max" {
			// v2's root has no memory.max; its controllers are listed instead.
			if b, err := os.ReadFile(filepath.Join(c.parent, "cgroup.subtree_control")); err != nil || !strings.Contains(string(b), "memory") {
				continue
			}
		} else if err != nil {
			continue
		}
		dir, err := os.MkdirTemp(c.parent, "msgx-memlimit-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
		return dir, c.limitFile
	}
	t.Skip("no writable memory cgroup here (needs root and the memory controller)")
	return "", ""
}
