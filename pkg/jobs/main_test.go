package jobs_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// t0 is the clock of the rebuild and republish tests.
var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
