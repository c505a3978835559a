package main

import (
	"testing"

	"github.com/msgexchange/msgexchange/pkg/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
