package controlv1_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running (testkit/leaktest is the
// same check for the modules that depend on testkit; this module does not).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
