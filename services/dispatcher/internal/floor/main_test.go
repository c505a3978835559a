package floor_test

import (
	"testing"

	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(kafkatest.Main(m)) }
