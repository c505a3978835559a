// Package sizecheck keeps large files out of the repository. A built binary once went into a
// commit at the root (36 MB, for every clone and every later checkout); .gitignore now ignores
// the build outputs, and this check, run by `make test`, refuses any tracked file over Limit
// that is not on the Allowed list, so the next one fails the tests before it is merged.
package sizecheck

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
)

// Limit is the largest tracked file accepted without an entry in Allowed: source, docs and
// fixtures stay far below it, binaries and dumps do not.
const Limit = 1 << 20 // 1 MiB

// Allowed lists the tracked files that may be larger than Limit, each with why it has to be
// in the repository. Keep it short: a generated or downloaded file belongs in the build, not
// in git. Example entry:
//
//	"pkg/sis/testdata/big-schedule.xml": "the codec's size-bound fixture (docs/codec.md §6)",
var Allowed = map[string]string{}

// ErrNotCheckout means root is not a git checkout (or git is missing), so there is no list of
// tracked files to check: a source tarball or a Docker build context.
var ErrNotCheckout = errors.New("sizecheck: not a git checkout")

// Problem is a tracked file over the limit.
type Problem struct {
	Path string // relative to the root, slash-separated as git prints it
	Size int64
}

func (p Problem) String() string {
	return fmt.Sprintf("%s is %d bytes, over the %d-byte limit: remove it from git (git rm --cached, and ignore it in .gitignore) or, if it must be tracked, add it to sizecheck.Allowed with the reason", p.Path, p.Size, int64(Limit))
}

// Tracked lists the files git tracks under root (git ls-files), relative to root.
func Tracked(root string) ([]string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCheckout, err)
	}
	cmd := exec.Command("git", "-C", root, "rev-parse", "--is-inside-work-tree")
	if out, err := cmd.Output(); err != nil || !bytes.Equal(bytes.TrimSpace(out), []byte("true")) {
		return nil, fmt.Errorf("%w: %s", ErrNotCheckout, root)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		return nil, fmt.Errorf("sizecheck: git ls-files: %w", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files, nil
}

// Check returns the files of the list (relative to root) larger than limit and not in allowed,
// sorted by path. A listed file missing from the working tree (deleted, not yet committed) is
// skipped: what is not there cannot be committed again from here. Symbolic links are judged by
// the link, not by what they point to.
func Check(root string, files []string, limit int64, allowed map[string]string) ([]Problem, error) {
	var problems []Problem
	for _, f := range files {
		if _, ok := allowed[f]; ok {
			continue
		}
		info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sizecheck: %w", err)
		}
		if info.Mode().IsRegular() && info.Size() > limit {
			problems = append(problems, Problem{Path: f, Size: info.Size()})
		}
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Path < problems[j].Path })
	return problems, nil
}
