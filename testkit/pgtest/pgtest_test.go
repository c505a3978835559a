package pgtest_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/testkit/internal/fataltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestNewCreatesMigratedDatabase(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)

	if !strings.HasPrefix(db.Name, "msgxt_pgtest_") || len(db.Name) > 63 {
		t.Fatalf("name %q: want msgxt_pgtest_… within 63 bytes", db.Name)
	}
	var current string
	if err := db.Pool.QueryRow(t.Context(), "SELECT current_database()").Scan(&current); err != nil {
		t.Fatal(err)
	}
	if current != db.Name {
		t.Fatalf("pool is on %q, want %q", current, db.Name)
	}
	// The schema came from the template: a table of each migration file is there.
	for _, table := range []string{"proc_state", "role_holder", "flight_schd"} {
		var ok bool
		if err := db.Pool.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("table %s missing: the database was not cloned from a migrated template", table)
		}
	}
	if got := db.Pool.Config().MaxConns; got > 4 {
		t.Errorf("pool max conns = %d, want at most 4", got)
	}

	// DSN is usable on its own, for code under test that opens its own connections.
	conn, err := pgx.Connect(t.Context(), db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
}

func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := pgtest.New(t), pgtest.New(t)
	if a.Name == b.Name {
		t.Fatalf("both databases are named %s", a.Name)
	}
	a.Exec(t, "CREATE TABLE only_in_a (x int)")
	a.Exec(t, "INSERT INTO role_holder (role, instance, backend_pid, since, heartbeat_at) VALUES ('r', 'a', 1, now(), now())")

	var exists bool
	if err := b.Pool.QueryRow(t.Context(), "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Error("a table created in one test database is visible in another")
	}
	var n int
	if err := b.Pool.QueryRow(t.Context(), "SELECT count(*) FROM role_holder").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("role_holder in b has %d rows written through a", n)
	}
}

func TestCleanupDropsDatabase(t *testing.T) {
	t.Parallel()
	observer := pgtest.New(t)

	var name string
	t.Run("inner", func(t *testing.T) {
		db := pgtest.New(t)
		name = db.Name
		// A connection the test forgot to close must not keep the database alive.
		conn, err := pgx.Connect(t.Context(), db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn
	})
	var exists bool
	if err := observer.Pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestTemplateIsReusedAndLocked(t *testing.T) {
	t.Parallel()
	// Many tests asking at once share one template build.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pgtest.New(t)
		}()
	}
	wg.Wait()

	db := pgtest.New(t)
	rows, err := db.Pool.Query(t.Context(),
		"SELECT datname, datallowconn FROM pg_database WHERE datistemplate AND datname LIKE 'msgxt\\_tpl\\_%'")
	if err != nil {
		t.Fatal(err)
	}
	type tpl struct {
		name  string
		allow bool
	}
	tpls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tpl, error) {
		var x tpl
		return x, r.Scan(&x.name, &x.allow)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tpls) == 0 {
		t.Fatal("no msgxt_tpl_ template database")
	}
	for _, x := range tpls {
		if x.allow {
			t.Errorf("template %s accepts connections; a connection would make clones fail", x.name)
		}
	}
}

func TestUnreachableServerFailsNamingEnv(t *testing.T) {
	// Port 1 refuses at once; t.Setenv forbids t.Parallel, which is what we want here.
	t.Setenv(pgtest.EnvDSN, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	msg := fataltest.Message(t, func(tb testing.TB) { pgtest.New(tb) })
	if !strings.Contains(msg, pgtest.EnvDSN) {
		t.Fatalf("failure message %q does not name %s", msg, pgtest.EnvDSN)
	}
}
