package repo_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

func TestRootHoldsTheWorkspace(t *testing.T) {
	root := repo.Root(t)
	for _, f := range []string{"go.work", "docs/rules.md", "tools/go.mod"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
