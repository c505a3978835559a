package aodb_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/testkit/leaktest"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// openInbox opens the inbox of my as the services do, with the given timeout, closed when the
// test ends.
func openInbox(t *testing.T, my *mysqltest.DB, timeout time.Duration) *aodb.Inbox {
	t.Helper()
	in, err := aodb.Open(my.ServiceDSN, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	return in
}
