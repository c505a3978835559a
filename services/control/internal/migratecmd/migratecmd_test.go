package migratecmd_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/migrate"
	"github.com/msgexchange/msgexchange/services/control/internal/migratecmd"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	// pgtest's databases come migrated; empty this one so the command has the whole schema to
	// apply, as on a new installation.
	db.Exec(t, `DROP SCHEMA public CASCADE`)
	db.Exec(t, `CREATE SCHEMA public`)
	cfg := func() (config.Config, error) {
		c := config.Default()
		c.PG.DSN = db.DSN
		return c, nil
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := migratecmd.Run(t.Context(), args, cfg, logger, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	_, latest, err := migrate.Status(t.Context(), db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if latest < 1 {
		t.Fatalf("latest migration = %d, want at least 1", latest)
	}

	if code, out, _ := run("status"); code != 0 || out != fmt.Sprintf("schema version 0, latest %d: %d pending\n", latest, latest) {
		t.Errorf("status before = %d %q, want 0 and every migration pending", code, out)
	}
	if code, _, errOut := run(); code != 0 {
		t.Fatalf("migrate = %d (%s), want 0", code, errOut)
	}
	var ok bool
	if err := db.Pool.QueryRow(t.Context(), `SELECT to_regclass('public.proc_state') IS NOT NULL`).Scan(&ok); err != nil || !ok {
		t.Errorf("proc_state after migrate: exists=%v err=%v", ok, err)
	}
	if code, out, _ := run("status"); code != 0 || out != fmt.Sprintf("schema version %d, latest %d: up to date\n", latest, latest) {
		t.Errorf("status after = %d %q, want 0 and up to date", code, out)
	}
	// Applying again is a no-op, so a deploy job can always run it.
	if code, _, errOut := run(); code != 0 {
		t.Errorf("second migrate = %d (%s), want 0", code, errOut)
	}
}

func TestMigrateUsage(t *testing.T) {
	t.Parallel()
	cfg := func() (config.Config, error) { return config.Default(), nil }
	for _, args := range [][]string{{"down"}, {"status", "extra"}} {
		var stdout, stderr bytes.Buffer
		code := migratecmd.Run(t.Context(), args, cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "usage") {
			t.Errorf("migrate %v = %d, stderr %q; want 2 and the usage", args, code, stderr.String())
		}
	}
}

func TestMigrateUnreachableDatabase(t *testing.T) {
	t.Parallel()
	cfg := func() (config.Config, error) {
		c := config.Default()
		// A port nothing listens on: the command must fail, not report success.
		c.PG.DSN = "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
		return c, nil
	}
	var stdout, stderr bytes.Buffer
	if code := migratecmd.Run(t.Context(), nil, cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), &stdout, &stderr); code != 1 {
		t.Errorf("migrate against an unreachable database = %d, want 1", code)
	}
}

// The migration takes the multi-host DSN a platform team hands out for a primary with standbys
// (host=a,b port=p1,p2 … target_session_attrs=read-write, or the URL form), in either form:
// a first host that does not answer is skipped and the schema lands on the one that does.
func TestMigrateMultiHostDSN(t *testing.T) {
	t.Parallel()
	for name, form := range map[string]func(testing.TB, string, ...string) string{
		"url": pgtest.MultiHostURL, "keywords": pgtest.MultiHostKeywords,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			db.Exec(t, `DROP SCHEMA public CASCADE`)
			db.Exec(t, `CREATE SCHEMA public`)
			dsn := form(t, db.DSN, "127.0.0.1:1") // nothing listens on port 1
			cfg := func() (config.Config, error) {
				c := config.Default()
				c.PG.DSN = dsn
				return c, nil
			}
			var stdout, stderr bytes.Buffer
			if code := migratecmd.Run(t.Context(), nil, cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), &stdout, &stderr); code != 0 {
				t.Fatalf("migrate with %s = %d (%s), want 0", dsn, code, stderr.String())
			}
			current, latest, err := migrate.Status(t.Context(), dsn)
			if err != nil || current != latest {
				t.Fatalf("status after migrate: version %d of %d, %v; want up to date", current, latest, err)
			}
			var ok bool
			if err := db.Pool.QueryRow(t.Context(), `SELECT to_regclass('public.proc_state') IS NOT NULL`).Scan(&ok); err != nil || !ok {
				t.Errorf("proc_state after migrate: exists=%v err=%v", ok, err)
			}
		})
	}
}
