package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// TestServerCPUCountsExitedBackends: the CPU a backend burned is still in the server's figure
// after its connection closed, so a bench whose pools come and go loses none of it.
func TestServerCPUCountsExitedBackends(t *testing.T) {
	db := pgtest.New(t)
	ctx := t.Context()
	watch, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Close(context.Background()) }()
	before, ok := pgtest.ServerCPU(watch)
	if !ok {
		t.Skip("the server is not local")
	}
	work, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := work.Exec(ctx, `SELECT count(*) FROM generate_series(1, 4000000) g WHERE g % 7 = 3`); err != nil {
		t.Fatal(err)
	}
	burned, ok := pgtest.BackendCPU(work.PgConn().PID())
	if !ok || burned == 0 {
		t.Fatalf("the working backend shows %s of CPU (%v)", burned, ok)
	}
	if err := work.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The postmaster reaps its child at once; its count of reaped children's CPU follows.
	var after = before
	for range 50 {
		if after, _ = pgtest.ServerCPU(watch); after-before >= burned {
			break
		}
		if _, err := watch.Exec(ctx, `SELECT pg_sleep(0.02)`); err != nil {
			t.Fatal(err)
		}
	}
	if after-before < burned {
		t.Errorf("the server's CPU grew %s, less than the %s the closed backend burned", after-before, burned)
	}
}
