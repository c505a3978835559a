// Package pgtest gives each test its own PostgreSQL database, cloned from a migrated template,
// so that test packages can run in parallel against one server and leave nothing behind.
//
// The admin connection comes from MSGX_TEST_PG_DSN (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable); its role must be allowed to
// create databases. A test whose server is unreachable fails, naming that variable: it is never
// skipped, so a missing server cannot turn a test run green.
//
// The search_path is left as the server sets it. River's harness empties it because each test
// there gets a schema of one database, and a query that forgot its schema would reach another
// test's tables; here each test gets a database of its own, whose public schema is where the
// migrations put every table and where the services look in production, so an unqualified name
// cannot reach anything but this test's tables.
package pgtest

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/msgexchange/msgexchange/testkit/testwait"
)

const (
	// EnvDSN names the variable that overrides the admin DSN.
	EnvDSN     = "MSGX_TEST_PG_DSN"
	defaultDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

	// maxConns keeps each test's pool small: many packages share one server with a default
	// max_connections of 100, and the elector tests open dedicated connections on top.
	maxConns       = 4
	connectTimeout = 5 * time.Second
	// setupTimeout bounds creating a database, including waiting for another process that is
	// building the template.
	setupTimeout   = 2 * time.Minute
	cleanupTimeout = 30 * time.Second
)

// DB is one test's database.
type DB struct {
	DSN  string        // connects to this database with the admin role
	Pool *pgxpool.Pool // at most 4 connections; closed at cleanup
	Name string
}

// New creates a fresh database cloned from the migrated template and drops it when the test ends.
func New(t testing.TB) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	adminDSN := cmp.Or(os.Getenv(EnvDSN), defaultDSN)
	admin, err := connect(ctx, adminDSN)
	if err != nil {
		t.Fatalf("pgtest: cannot reach PostgreSQL at %s (set %s to point at a test server): %v", redact(adminDSN), EnvDSN, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))

	tpl, err := ensureTemplate(ctx, admin, adminDSN)
	if err != nil {
		t.Fatalf("pgtest: build template database: %v", err)
	}
	run.SweepOnce(adminDSN, func(cutoff int64) { sweepStale(ctx, t, admin, cutoff, tpl) })

	name := run.Name(prefix, "_")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(tpl)); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	// Registered before the pool exists, so a failure below still drops the database; cleanups
	// run last-in first-out, so the pool (and anything the test registered later) is closed first.
	t.Cleanup(func() { dropDatabase(t, adminDSN, name) })

	db := &DB{DSN: withDatabase(adminDSN, name), Name: name}
	cfg, err := pgxpool.ParseConfig(db.DSN)
	if err != nil {
		t.Fatalf("pgtest: parse dsn: %v", err)
	}
	cfg.MaxConns = maxConns
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	db.Pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: open pool on %s: %v", name, err)
	}
	t.Cleanup(db.Pool.Close)
	return db
}

// Exec runs one statement on the pool and fails the test on error. It uses t.Context, so it is
// for the test body, not for cleanups.
func (db *DB) Exec(t testing.TB, sql string, args ...any) pgconn.CommandTag {
	t.Helper()
	tag, err := db.Pool.Exec(t.Context(), sql, args...)
	if err != nil {
		t.Fatalf("pgtest: exec %q: %v", sql, err)
	}
	return tag
}

// WaitForLockWait waits until a session of this database waits for a lock, so a test can
// release the lock knowing the other session is queued behind it rather than sleeping and
// hoping it is.
func (db *DB) WaitForLockWait(t testing.TB) {
	t.Helper()
	testwait.For(t, 30*time.Second, "a session waiting for a lock", func() bool {
		var n int
		if err := db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

func dropDatabase(t testing.TB, adminDSN, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	admin, err := connect(ctx, adminDSN)
	if err != nil {
		t.Errorf("pgtest: drop database %s: %v", name, err)
		return
	}
	defer admin.Close(ctx)
	// FORCE ends sessions the test left open (an elector's lock connection, a leaked conn):
	// leaving nothing behind matters more than being polite to them.
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest: drop database %s: %v", name, err)
	}
}

func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

// withDatabase points dsn, a URL or a keyword/value string, at database name.
func withDatabase(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + name
			u.RawPath = ""
			return u.String()
		}
	}
	// In keyword/value form the last occurrence of a keyword wins.
	return dsn + " dbname=" + name
}

func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return dsn
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
