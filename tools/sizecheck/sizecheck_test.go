package sizecheck

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// TestTrackedFilesAreSmall runs the check on the repository: no tracked file over Limit
// unless Allowed names it. Outside a git checkout there is nothing to check.
func TestTrackedFilesAreSmall(t *testing.T) {
	t.Parallel()
	root := repo.Root(t)
	files, err := Tracked(root)
	if errors.Is(err, ErrNotCheckout) {
		t.Skipf("no tracked files to check: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("git ls-files listed nothing")
	}
	problems, err := Check(root, files, Limit, Allowed)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	for path := range Allowed {
		if !slices.Contains(files, path) {
			t.Errorf("Allowed names %s, which is not tracked: remove the entry", path)
		}
	}
}

// TestCheckRefusesLargeFiles plants files around the limit in a temporary tree: only the
// ones over it and not allowed are reported, with their size.
func TestCheckRefusesLargeFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	const limit = 1000
	write(t, root, "small.go", limit-1)
	write(t, root, "exact.txt", limit)
	write(t, root, "msgx-demo", limit+1)
	write(t, root, "pkg/sis/testdata/big.xml", 5*limit)
	write(t, root, "allowed/fixture.bin", 3*limit)
	if err := os.Symlink("msgx-demo", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	files := []string{"small.go", "exact.txt", "msgx-demo", "pkg/sis/testdata/big.xml",
		"allowed/fixture.bin", "link", "deleted-in-worktree.bin"}

	problems, err := Check(root, files, limit, map[string]string{"allowed/fixture.bin": "a fixture"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Problem{{"msgx-demo", limit + 1}, {"pkg/sis/testdata/big.xml", 5 * limit}}
	if len(problems) != len(want) {
		t.Fatalf("problems = %v, want %v", problems, want)
	}
	for i := range want {
		if problems[i] != want[i] {
			t.Errorf("problem %d = %v, want %v", i, problems[i], want[i])
		}
	}
	if s := problems[0].String(); !strings.Contains(s, "msgx-demo is 1001 bytes") || !strings.Contains(s, "sizecheck.Allowed") {
		t.Errorf("message %q does not name the file, its size and what to do", s)
	}
}

// Outside a git checkout Tracked says so with ErrNotCheckout, which the tree test skips on.
func TestTrackedOutsideACheckout(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir)) // no repository above the temp dir either
	if _, err := Tracked(dir); !errors.Is(err, ErrNotCheckout) {
		t.Fatalf("Tracked(%s) = %v, want ErrNotCheckout", dir, err)
	}
}

func write(t *testing.T, root, rel string, size int) {
	t.Helper()
	path := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}
