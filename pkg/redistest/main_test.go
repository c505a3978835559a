package redistest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: a leaked worker in a
// service holds a connection, a lock or a role after its owner thinks it stopped. go-redis
// keeps redialling a refused address for a second after its client is closed (the
// unreachable-server test): the library's, and it ends by itself.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
