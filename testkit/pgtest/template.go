package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/migrate"
	"github.com/msgexchange/msgexchange/testkit/internal/testname"
)

const (
	prefix         = "msgxt_"
	templatePrefix = prefix + "tpl_"
	// templateLockKey serialises template builds across processes: go test runs each package
	// as its own process, and they all ask for the template at the same moment.
	templateLockKey int64 = 0x6d73_6778_7470_6c31 // "msgxtpl1"
	commentFormat         = "msgxt created %d"
)

// run numbers this process's databases and sweeps stale ones once per admin DSN.
var run = testname.NewRun()

// templates is built once per process and admin DSN: admin DSN → ready template name.
var templates = struct {
	mu    sync.Mutex
	byDSN map[string]string
}{byDSN: map[string]string{}}

// templateName includes a hash of the migrations, so a changed schema gets a new template
// instead of a test silently running against an old one.
func templateName() (string, error) {
	h := sha256.New()
	if err := WriteSchema(h); err != nil {
		return "", err
	}
	return templatePrefix + hex.EncodeToString(h.Sum(nil))[:16], nil
}

func ensureTemplate(ctx context.Context, admin *pgx.Conn, adminDSN string) (string, error) {
	templates.mu.Lock()
	defer templates.mu.Unlock()
	if name, ok := templates.byDSN[adminDSN]; ok {
		return name, nil
	}
	name, err := templateName()
	if err != nil {
		return "", err
	}
	if err := buildTemplate(ctx, admin, adminDSN, name); err != nil {
		return "", err
	}
	// Only success is remembered: a failure (server down) is reported again to the next test.
	templates.byDSN[adminDSN] = name
	return name, nil
}

// buildTemplate creates and migrates the template unless another process already did. The
// template is marked IS_TEMPLATE only once fully migrated, so that flag means "ready"; a
// database of that name without it was left half-built by a crashed process and is rebuilt.
func buildTemplate(ctx context.Context, admin *pgx.Conn, adminDSN, name string) error {
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return fmt.Errorf("lock template build: %w", err)
	}
	defer func() {
		// Closing the admin connection would release it too; unlocking keeps the connection
		// usable for the sweep and the CREATE DATABASE that follow.
		_, _ = admin.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", templateLockKey)
	}()

	var ready bool
	err := admin.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	switch {
	case err == nil && ready:
		return nil
	case err == nil, errors.Is(err, pgx.ErrNoRows):
	default:
		return fmt.Errorf("look up template: %w", err)
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop half-built template: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	// The comment carries the creation time, so a template of an older schema can be aged out.
	comment := fmt.Sprintf(commentFormat, time.Now().Unix())
	if _, err := admin.Exec(ctx, "COMMENT ON DATABASE "+ident(name)+" IS '"+comment+"'"); err != nil {
		return fmt.Errorf("comment template: %w", err)
	}
	// Migration logs would be attributed to whichever test happened to come first; discard them.
	if _, err := migrate.Up(ctx, withDatabase(adminDSN, name), slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	// No connections from now on: CREATE DATABASE … TEMPLATE fails while anyone is connected.
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident(name)+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("mark template: %w", err)
	}
	return nil
}

// sweepStale drops databases left behind by runs that died before their
// cleanup, and templates of older schemas. Failures are only logged: a concurrent run may be
// dropping the same database, and a leftover must not fail an unrelated test.
func sweepStale(ctx context.Context, t testing.TB, admin *pgx.Conn, cutoff int64, currentTemplate string) {
	t.Helper()

	rows, err := admin.Query(ctx, `SELECT datname, datistemplate, coalesce(shobj_description(oid, 'pg_database'), '')
		FROM pg_database WHERE datname LIKE 'msgxt\_%'`)
	if err != nil {
		t.Logf("pgtest: list stale databases: %v", err)
		return
	}
	type dbRow struct {
		name, comment string
		template      bool
	}
	var dbs []dbRow
	for rows.Next() {
		var r dbRow
		if err := rows.Scan(&r.name, &r.template, &r.comment); err != nil {
			t.Logf("pgtest: list stale databases: %v", err)
			return
		}
		dbs = append(dbs, r)
	}
	if err := rows.Err(); err != nil {
		t.Logf("pgtest: list stale databases: %v", err)
		return
	}

	for _, d := range dbs {
		created, ok := createdAt(d.name, d.comment)
		if !ok || created >= cutoff || d.name == currentTemplate {
			continue
		}
		if d.template {
			if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident(d.name)+" WITH IS_TEMPLATE false"); err != nil {
				t.Logf("pgtest: unmark stale template %s: %v", d.name, err)
				continue
			}
		}
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(d.name)+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop stale database %s: %v", d.name, err)
			continue
		}
		t.Logf("pgtest: dropped stale database %s", d.name)
	}
}

// createdAt reads the creation time from a template's comment or a test database's name.
func createdAt(name, comment string) (int64, bool) {
	if strings.HasPrefix(name, templatePrefix) {
		var ts int64
		if _, err := fmt.Sscanf(comment, commentFormat, &ts); err != nil {
			return 0, false
		}
		return ts, true
	}
	return testname.StampOf(name, "_", 10)
}
