package api

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: a leaked worker in a
// service holds a connection, a lock or a role after its owner thinks it stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
