package redistest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvServer names the variable that overrides the redis-server binary Own starts.
const EnvServer = "MSGX_TEST_REDIS_SERVER"

// Own starts a Redis server of the test's own, listening only on a Unix socket in the test's
// temporary directory, and stops it when the test ends. A test that pauses, stops or
// restarts Redis uses it, so that the fault never reaches the shared server the other test
// packages are using at the same time. The returned URL is what a service's redis.url takes.
func Own(t testing.TB) *Redis {
	t.Helper()
	bin := serverBinary(t)
	// Socket paths are limited to about 100 bytes; t.TempDir can be longer than that.
	dir, err := os.MkdirTemp("", "msgxredis")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: start %s: %v", bin, err)
	}
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: sock, PoolSize: poolSize})
	t.Cleanup(func() {
		_ = client.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for {
		if err := client.Ping(ctx).Err(); err == nil {
			break
		} else if ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redistest: own redis-server did not answer on %s: %v\n%s", sock, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &Redis{URL: "unix://" + sock, Client: client, Prefix: keyPrefix + "own:"}
}

// serverBinary is the redis-server the harnesses start: EnvServer, else the one on PATH.
func serverBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(EnvServer); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: no redis-server on PATH (set %s): %v", EnvServer, err)
	}
	return bin
}
