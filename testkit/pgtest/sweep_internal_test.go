package pgtest

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/internal/testname"
)

func TestSweepDropsOnlyStaleDatabases(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	adminDSN := cmp.Or(os.Getenv(EnvDSN), defaultDSN)
	admin, err := connect(ctx, adminDSN)
	if err != nil {
		t.Fatalf("connect (set %s): %v", EnvDSN, err)
	}
	// Closed by a cleanup, not a defer: the drops below run as cleanups, after this returns.
	t.Cleanup(func() { _ = admin.Close(context.Background()) })

	old := fmt.Sprintf("%ssweeptest_%d_%d_%d", prefix, time.Now().Add(-testname.StaleAfter-time.Hour).Unix(), os.Getpid(), run.Next())
	fresh := fmt.Sprintf("%ssweeptest_%d_%d_%d", prefix, time.Now().Unix(), os.Getpid(), run.Next())
	for _, name := range []string{old, fresh} {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		})
	}
	tpl, err := templateName()
	if err != nil {
		t.Fatal(err)
	}

	sweepStale(ctx, t, admin, time.Now().Add(-testname.StaleAfter).Unix(), tpl)

	exists := func(name string) bool {
		var ok bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if exists(old) {
		t.Errorf("stale database %s survived the sweep", old)
	}
	if !exists(fresh) {
		t.Errorf("fresh database %s was swept", fresh)
	}
}

func TestCreatedAt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, comment string
		want          int64
		ok            bool
	}{
		{"msgxt_leader_1700000000_42_3", "", 1700000000, true},
		{"msgxt_a_b_c_1700000000_42_3", "", 1700000000, true},
		{"msgxt_tpl_0123456789abcdef", "msgxt created 1700000001", 1700000001, true},
		{"msgxt_tpl_0123456789abcdef", "", 0, false},
		{"msgxt_something", "", 0, false},
	} {
		got, ok := createdAt(c.name, c.comment)
		if got != c.want || ok != c.ok {
			t.Errorf("createdAt(%q, %q) = %d, %v; want %d, %v", c.name, c.comment, got, ok, c.want, c.ok)
		}
	}
}
