package ctl

import (
	"testing"

	"github.com/msgexchange/msgexchange/testkit/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
