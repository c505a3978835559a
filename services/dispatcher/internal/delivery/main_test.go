package delivery_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: a leaked worker in a
// service holds a connection, a lock or a role after its owner thinks it stopped. Ignored: the
// process-wide meter ticker of go-metrics (sarama's metrics library, started once, never
// stopped by design) and kfake's control-function goroutines, which outlive a closed test
// cluster.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).runControl.func1"))
}
