// Package redistest gives each test its own key prefix on a shared Redis, so that test packages
// can run in parallel and leave no keys behind. Isolation holds only for code that puts every
// key under the prefix it is given, which is how the services take their Redis configuration.
//
// The server comes from MSGX_TEST_REDIS_URL (default redis://127.0.0.1:6379/0). A test whose
// server is unreachable fails, naming that variable; it is never skipped.
package redistest

import (
	"cmp"
	"context"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/testkit/internal/testname"
)

const (
	// EnvURL names the variable that overrides the server URL.
	EnvURL     = "MSGX_TEST_REDIS_URL"
	defaultURL = "redis://127.0.0.1:6379/0"

	keyPrefix      = "msgxt:"
	poolSize       = 4
	scanCount      = 500
	setupTimeout   = 10 * time.Second
	cleanupTimeout = 30 * time.Second
)

// Redis is one test's slice of the server.
type Redis struct {
	URL    string
	Client *redis.Client // closed at cleanup
	Prefix string        // msgxt:<pkg>:<runstamp>:<pid>:<n>: — put every key under it
}

// Key returns Prefix+name.
func (r *Redis) Key(name string) string { return r.Prefix + name }

var harness = testname.NewRun()

// New returns a client and a fresh prefix, and deletes every key under the prefix when the test
// ends.
func New(t testing.TB) *Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	rawURL := cmp.Or(os.Getenv(EnvURL), defaultURL)
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("redistest: parse %s: %v", EnvURL, err)
	}
	opts.PoolSize = poolSize
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		t.Fatalf("redistest: cannot reach Redis at %s (set %s to point at a test server): %v", redact(rawURL), EnvURL, err)
	}
	harness.SweepOnce(rawURL, func(cutoff int64) { sweepStale(ctx, t, client, cutoff) })

	r := &Redis{
		URL:    rawURL,
		Client: client,
		Prefix: harness.Name(keyPrefix, ":") + ":",
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if _, err := deleteMatching(ctx, client, r.Prefix+"*"); err != nil {
			t.Errorf("redistest: delete keys under %s: %v", r.Prefix, err)
		}
		_ = client.Close()
	})
	return r
}

// deleteMatching removes every key matching pattern with SCAN, never KEYS: the server is shared
// with other test processes and a blocking KEYS would stall them.
func deleteMatching(ctx context.Context, c *redis.Client, pattern string) (int, error) {
	deleted := 0
	iter := c.Scan(ctx, 0, pattern, scanCount).Iterator()
	batch := make([]string, 0, scanCount)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := c.Unlink(ctx, batch...).Result()
		deleted += int(n)
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return deleted, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return deleted, err
	}
	return deleted, flush()
}

// sweepStale deletes keys left under prefixes of runs that died before their cleanup.
// Failures are only logged.
func sweepStale(ctx context.Context, t testing.TB, c *redis.Client, cutoff int64) {
	t.Helper()
	stale := map[string]bool{} // prefixes, each deleted once
	iter := c.Scan(ctx, 0, keyPrefix+"*", scanCount).Iterator()
	for iter.Next(ctx) {
		// msgxt:<pkg>:<stamp>:<pid>:<n>:<key…>
		parts := strings.SplitN(iter.Val(), ":", 6)
		if len(parts) < 6 {
			continue
		}
		if ts, err := strconv.ParseInt(parts[2], 10, 64); err == nil && ts < cutoff {
			stale[strings.Join(parts[:5], ":")+":"] = true
		}
	}
	if err := iter.Err(); err != nil {
		t.Logf("redistest: scan for stale keys: %v", err)
		return
	}
	for prefix := range stale {
		if _, err := deleteMatching(ctx, c, prefix+"*"); err != nil {
			t.Logf("redistest: delete stale keys under %s: %v", prefix, err)
		}
	}
}

func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}
