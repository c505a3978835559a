package pgtest_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// serverPort is the port of the server conn reached.
func serverPort(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var port int
	if err := conn.QueryRow(t.Context(), `SELECT inet_server_port()`).Scan(&port); err != nil {
		t.Fatal(err)
	}
	return port
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// The synchronous setup: the multi-host DSN reaches the primary even with the standby listed
// first; a commit is on the standby when it returns; after kill -9 and promotion the same DSN
// reaches the promoted standby on a new timeline with every commit; the old primary restarted
// on its data is a writable server of the old timeline (the zombie), which the plain
// multi-host DSN naming it first would connect to.
func TestReplicatedSyncFailover(t *testing.T) {
	r := pgtest.OwnReplicated(t, pgtest.Sync)
	standbyFirst := pgtest.MultiHostURL(t, r.Primary.DSN(), "127.0.0.1:"+itoa(r.Standby.Port))
	if got := serverPort(t, connect(t, standbyFirst)); got != r.Primary.Port {
		t.Fatalf("standby listed first: reached port %d, want the primary's %d", got, r.Primary.Port)
	}
	if _, err := pgx.Connect(t.Context(), pgtest.MultiHostURL(t, r.Standby.DSN())); err == nil {
		t.Fatal("target_session_attrs=read-write connected to the standby alone")
	}

	conn := connect(t, r.DSN())
	if _, err := conn.Exec(t.Context(), `CREATE TABLE t (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `INSERT INTO t SELECT generate_series(1, 1000)`); err != nil {
		t.Fatal(err)
	}
	if tl := r.Primary.Timeline(t); tl != 1 {
		t.Fatalf("primary on timeline %d, want 1", tl)
	}

	r.KillPrimary()
	if err := conn.Ping(t.Context()); err == nil {
		t.Fatal("a connection to the killed primary still answers")
	}
	r.Promote()
	after := connect(t, r.DSN())
	if got := serverPort(t, after); got != r.Standby.Port {
		t.Fatalf("after the failover the DSN reached port %d, want the promoted standby's %d", got, r.Standby.Port)
	}
	var n int
	if err := after.QueryRow(t.Context(), `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1000 {
		t.Fatalf("rows on the promoted standby: %d, %v; want 1000 (synchronous: nothing lost)", n, err)
	}
	if tl := r.Standby.Timeline(t); tl != 2 {
		t.Fatalf("promoted standby on timeline %d, want 2", tl)
	}

	r.RestartOld()
	zombie := r.Primary.Connect(t)
	if _, err := zombie.Exec(t.Context(), `INSERT INTO t VALUES (1001)`); err != nil {
		t.Fatalf("the restarted old primary refused a write: %v (the harness must give a writable zombie)", err)
	}
	if tl := r.Primary.Timeline(t); tl != 1 {
		t.Fatalf("zombie on timeline %d, want 1", tl)
	}
	if got := serverPort(t, connect(t, r.DSN())); got != r.Primary.Port {
		t.Fatalf("with the zombie up the multi-host DSN reached port %d; target_session_attrs alone was expected to pick the zombie (%d), listed first", got, r.Primary.Port)
	}
}

// The asynchronous setup streams without a synchronous standby; a promotion works the same.
func TestReplicatedAsyncPromote(t *testing.T) {
	r := pgtest.OwnReplicated(t, pgtest.Async)
	conn := connect(t, r.DSN())
	var sync string
	if err := conn.QueryRow(t.Context(), `SELECT sync_state FROM pg_stat_replication`).Scan(&sync); err != nil || sync != "async" {
		t.Fatalf("sync_state = %q, %v; want async", sync, err)
	}
	r.KillPrimary()
	r.Promote()
	if got := serverPort(t, connect(t, r.DSN())); got != r.Standby.Port {
		t.Fatalf("after the failover the DSN reached port %d, want %d", got, r.Standby.Port)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
