// Package repo finds the repository a test runs in, for the tests of the tools that read its
// files (the chart, the docs, the tracked files) or build its binaries.
package repo

import (
	"testing"

	"github.com/msgexchange/msgexchange/tools/stack"
)

// Root is the repository root, the directory holding go.work (stack.Root) above the test's
// working directory. The test fails when there is none: a check that found no repository to
// read must not pass.
func Root(tb testing.TB) string {
	tb.Helper()
	root, err := stack.Root()
	if err != nil {
		tb.Fatalf("repo: %v", err)
	}
	return root
}
