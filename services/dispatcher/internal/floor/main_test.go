package floor_test

import (
	"testing"

	"github.com/msgexchange/msgexchange/pkg/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMainSharedKafka(m) }
