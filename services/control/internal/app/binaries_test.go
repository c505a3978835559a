package app_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/leaktest"
)

// The tests that run the real msgxctl build it once per test process. Tests that need another
// service's binary belong in tools/e2e (docs/architecture.md, "Modules"): this module builds
// and tests on its own.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries are the packages built for those tests, relative to this module's root.
var binaries = []string{"./cmd/msgxctl"}

func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m, func(code int) {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
		os.Exit(code)
	})
}

// bin builds the binaries (once) and returns the path of the named one.
func bin(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		if binDir, buildErr = os.MkdirTemp("", "msgx-control-test-bin-"); buildErr != nil {
			return
		}
		// Generous: the machine is shared.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", binDir + string(filepath.Separator)}, binaries...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("build %v: %v", binaries, buildErr)
	}
	return filepath.Join(binDir, name)
}

// moduleRoot is the directory holding this module's go.mod, above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above " + dir)
		}
		dir = parent
	}
}
