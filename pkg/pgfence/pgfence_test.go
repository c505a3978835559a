package pgfence_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/msgexchange/msgexchange/pkg/pgfence"
	"github.com/msgexchange/msgexchange/testkit/leaktest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// connect opens a connection to dsn through fence f (none: pgx alone) and returns the port of
// the server it reached.
func connect(t *testing.T, f *pgfence.Fence, dsn string) (int, error) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		f.Apply(cfg)
	}
	conn, err := pgconn.ConnectConfig(t.Context(), cfg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	rows, err := conn.Exec(t.Context(), `SELECT inet_server_port()`).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(string(rows[0].Rows[0][0]))
	if err != nil {
		t.Fatal(err)
	}
	return port, nil
}

func mustReach(t *testing.T, f *pgfence.Fence, dsn string, want int, what string) {
	t.Helper()
	got, err := connect(t, f, dsn)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Fatalf("%s: reached port %d, want %d", what, got, want)
	}
}

// The old primary, restarted on its data after a failover, accepts writes on its old timeline
// and target_session_attrs=read-write takes it (it is listed first). Through the fence a
// process that saw the promoted server's timeline refuses it and reaches the promoted server;
// so does a process started after the zombie came back, whose first connection asks every
// host; a DSN naming the zombie alone gets ErrOldTimeline, an outage the services wait out.
func TestFenceRefusesTheOldPrimary(t *testing.T) {
	r := pgtest.OwnReplicated(t, pgtest.Sync)
	f := &pgfence.Fence{}
	var log bytes.Buffer
	f.SetLogger(slog.New(slog.NewTextHandler(&log, nil)))
	mustReach(t, f, r.DSN(), r.Primary.Port, "before the failover")
	if f.Highest(sysid(t, r)) != 1 {
		t.Fatalf("highest timeline after the first connection = %d, want 1", f.Highest(sysid(t, r)))
	}
	r.KillPrimary()
	r.Promote()
	mustReach(t, f, r.DSN(), r.Standby.Port, "after the promotion")
	if f.Highest(sysid(t, r)) != 2 {
		t.Fatalf("highest timeline after the promotion = %d, want 2", f.Highest(sysid(t, r)))
	}
	if !strings.Contains(log.String(), "level=WARN msg=\"PostgreSQL failed over") {
		t.Errorf("the failover was not logged:\n%s", log.String())
	}

	r.RestartOld()
	mustReach(t, nil, r.DSN(), r.Primary.Port, "without the fence, with the zombie up (the split brain the fence is for)")
	mustReach(t, f, r.DSN(), r.Standby.Port, "through the fence of a process that saw the failover")
	mustReach(t, &pgfence.Fence{}, r.DSN(), r.Standby.Port, "through the fence of a process started after the zombie came back")
	if _, err := connect(t, f, r.Primary.DSN()); !errors.Is(err, pgfence.ErrOldTimeline) {
		t.Fatalf("the zombie alone through the fence: %v, want ErrOldTimeline", err)
	}
	if n := strings.Count(log.String(), "refusing a writable server on an old timeline"); n != 1 {
		t.Errorf("the zombie's refusal logged %d times, want once (per server and timeline):\n%s", n, log.String())
	}
	// A first connection whose DSN also names a host that does not answer (the dead one of an
	// earlier failover, say) skips it in its survey and still refuses the zombie.
	mustReach(t, &pgfence.Fence{}, pgtest.MultiHostURL(t, r.Standby.DSN(), "127.0.0.1:1", "127.0.0.1:"+strconv.Itoa(r.Primary.Port)), r.Standby.Port,
		"a dead host, the zombie, then the promoted server")
	// The promoted standby listed first changes nothing.
	mustReach(t, &pgfence.Fence{}, pgtest.MultiHostURL(t, r.Primary.DSN(), "127.0.0.1:"+strconv.Itoa(r.Standby.Port)), r.Standby.Port,
		"promoted server listed first")
}

// A standby is not fenced: its timeline says nothing of a write, and a DSN without
// target_session_attrs may name it for reads.
func TestFenceLetsAStandbyThrough(t *testing.T) {
	r := pgtest.OwnReplicated(t, pgtest.Async)
	f := &pgfence.Fence{}
	mustReach(t, f, r.Primary.DSN(), r.Primary.Port, "primary")
	mustReach(t, f, r.Standby.DSN(), r.Standby.Port, "standby")
}

func sysid(t *testing.T, r *pgtest.Replicated) string {
	t.Helper()
	var id string
	if err := r.Standby.Connect(t).QueryRow(t.Context(), `SELECT system_identifier::text FROM pg_control_system()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
