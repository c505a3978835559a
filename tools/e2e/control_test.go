package e2e

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/ports"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// freePort returns a loopback address nothing listens on, for a service the test starts later,
// below the kernel's ephemeral range (testkit/ports says why).
func freePort(t testing.TB) string {
	t.Helper()
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// status asks the control service for the pipeline status; it fails when control is not
// running.
func (e *env) status(ctx context.Context) (*controlv1.GetStatusResponse, error) {
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+e.token)
	return controlv1.NewControlServiceClient(conn).GetStatus(ctx, &controlv1.GetStatusRequest{})
}

// activeRoles is the sorted list of roles that control reports as actively held.
func (e *env) activeRoles(ctx context.Context) (string, error) {
	st, err := e.status(ctx)
	if err != nil {
		return "", err
	}
	var active []string
	for _, r := range st.GetRoles() {
		if r.GetActive() {
			active = append(active, r.GetRole())
		}
	}
	sort.Strings(active)
	return strings.Join(active, ","), nil
}

// waitAllRolesActive waits until control reports each of the five roles held by a live instance.
func (e *env) waitAllRolesActive(t *testing.T) { e.waitAllRolesActiveWithin(t, 30*time.Second) }

// waitAllRolesActiveWithin is waitAllRolesActive with a bound of the caller's.
func (e *env) waitAllRolesActiveWithin(t *testing.T, bound time.Duration) {
	t.Helper()
	testwait.ForState(t, bound, "control to report all five roles active", func() (bool, string) {
		got, err := e.activeRoles(context.Background())
		if err != nil {
			return false, fmt.Sprint("control: ", err)
		}
		return got == "backfill,control,dispatcher,ingest,pump", got
	})
}
