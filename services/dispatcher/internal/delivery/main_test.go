package delivery_test

import (
	"testing"

	"github.com/msgexchange/msgexchange/pkg/leaktest"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(kafkatest.Main(m)) }
