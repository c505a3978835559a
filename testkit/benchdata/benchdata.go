// Package benchdata fills a migrated schema with production-sized tables — the rows the services
// write, at the retention limits — and caches the result as a PostgreSQL template database, so a
// bench or an EXPLAIN test gets a full database in seconds instead of minutes.
//
// Scale 1 is production (docs/performance.md): 7 days of proc_state, proc_raw and proc_attempt
// at 150,000 messages a day, 200,000 flights (half live with their collections, half in
// flight_history), 2 M msg_event rows within retention, the flight change history, 30 days of
// req_track and 90 days of schd_snap_log. Tests use a fraction (Test), large enough that the
// planner prefers an index over a sequential scan wherever one exists.
//
// The template is keyed by the migrations' content, the generator's version and the scale, so a
// changed schema or generator builds a new one; the connection comes from pgtest.EnvDSN.
package benchdata

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/klauspost/compress/zstd"

	"github.com/msgexchange/msgexchange/pkg/migrate"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

const (
	// Full is production size; Test is what the EXPLAIN tests run on: tens of thousands of rows
	// per growing table, where a missing index already shows as a Seq Scan.
	Full = 1.0
	Test = 1.0 / 10

	// The prefix differs from pgtest's, whose sweep would otherwise age the templates out.
	prefix  = "msgxb_"
	lockKey = int64(0x6d73_6778_6264_6174) // "msgxbdat"

	defaultDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
)

// Sizes are the row counts a scale produces; Shape returns them so benches can print them.
type Sizes struct {
	Messages, Flights, Events, Requests, SnapLogs int64
}

// Shape gives the row counts of scale s.
func Shape(s float64) Sizes {
	n := func(full float64) int64 { return max(int64(full*s), 1) }
	return Sizes{
		Messages: n(7 * 150_000),
		Flights:  n(200_000),
		Events:   n(2_000_000),
		Requests: n(30 * 500),
		SnapLogs: n(90 * 24),
	}
}

var seq atomic.Int64

// New returns a fresh database cloned from the template of scale s, building the template first
// if no run has yet; the database is dropped when the test ends.
func New(tb testing.TB, s float64) *pgtest.DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	adminDSN := cmp.Or(os.Getenv(pgtest.EnvDSN), defaultDSN)
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		tb.Fatalf("benchdata: cannot reach PostgreSQL (set %s): %v", pgtest.EnvDSN, err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()

	tpl, err := templateName(s)
	if err != nil {
		tb.Fatal(err)
	}
	began := time.Now()
	built, err := ensure(ctx, admin, adminDSN, tpl, s)
	if err != nil {
		tb.Fatalf("benchdata: template %s: %v", tpl, err)
	}
	if built {
		tb.Logf("benchdata: built template %s (scale %g) in %s", tpl, s, time.Since(began).Round(time.Millisecond))
	}

	name := fmt.Sprintf("%s%d_%d_%d", prefix, time.Now().Unix(), os.Getpid(), seq.Add(1))
	cloned := time.Now()
	// FILE_COPY copies the template's files and checkpoints before and after, instead of
	// writing the whole copy through the WAL (WAL_LOG, the default): three times faster at full
	// scale, and the bench that runs next does not pay for the copy's gigabytes of WAL and the
	// checkpoints they set off, which the server's CPU per message would count as its own.
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tpl}.Sanitize()+" STRATEGY FILE_COPY"); err != nil {
		tb.Fatalf("benchdata: clone %s: %v", tpl, err)
	}
	tb.Logf("benchdata: cloned %s in %s", name, time.Since(cloned).Round(time.Millisecond))
	tb.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), adminDSN)
		if err != nil {
			tb.Errorf("benchdata: drop %s: %v", name, err)
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("benchdata: drop %s: %v", name, err)
		}
	})
	db := &pgtest.DB{DSN: withDatabase(adminDSN, name), Name: name}
	if db.Pool, err = pgxpool.New(ctx, db.DSN); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(db.Pool.Close)
	// Statistics are not copied with the template's files in every case; the planner must see
	// the production-sized ones the EXPLAIN tests are about.
	if _, err := db.Pool.Exec(ctx, "ANALYZE"); err != nil {
		tb.Fatal(err)
	}
	return db
}

func templateName(s float64) (string, error) {
	h := sha256.New()
	if err := pgtest.WriteSchema(h); err != nil {
		return "", err
	}
	// The generator's statements are part of the key, so a changed shape builds a new template
	// without anyone remembering to say so.
	for _, st := range statements {
		fmt.Fprintf(h, "%s\n%s\n", st.table, st.sql)
	}
	// And the day: the generated times count back from the build, so a template rebuilt daily
	// never holds more than a day of rows past the retention window it was made for.
	fmt.Fprintf(h, "scale %g day %s", s, time.Now().UTC().Format(time.DateOnly))
	return scalePrefix(s) + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// scalePrefix starts the names of every template of scale s, so that building one can drop
// those of older schemas or generators: at full size each is gigabytes.
func scalePrefix(s float64) string {
	return fmt.Sprintf("%stpl_%d_", prefix, int64(s*1_000_000))
}

// ensure builds the template unless it is ready; IS_TEMPLATE is set only once the data and the
// statistics are complete, so it means "ready", and a half-built one is rebuilt.
func ensure(ctx context.Context, admin *pgx.Conn, adminDSN, name string, s float64) (bool, error) {
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return false, fmt.Errorf("lock: %w", err)
	}
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey) }()
	var ready bool
	err := admin.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	switch {
	case err == nil && ready:
		return false, nil
	case err == nil, errors.Is(err, pgx.ErrNoRows):
	default:
		return false, fmt.Errorf("look up: %w", err)
	}
	if err := dropOlder(ctx, admin, name, s); err != nil {
		return false, err
	}
	id := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return false, fmt.Errorf("drop half-built: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return false, fmt.Errorf("create: %w", err)
	}
	dsn := withDatabase(adminDSN, name)
	if _, err := migrate.Up(ctx, dsn, slog.New(slog.DiscardHandler)); err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	if err := fill(ctx, dsn, s); err != nil {
		return false, err
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return false, fmt.Errorf("mark: %w", err)
	}
	return true, nil
}

// dropOlder drops the templates of scale s other than name; a clone still being made from one
// holds it, and the drop of that one waits for the next build.
func dropOlder(ctx context.Context, admin *pgx.Conn, name string, s float64) error {
	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database WHERE starts_with(datname, $1) AND datname <> $2`,
		scalePrefix(s), name)
	if err != nil {
		return fmt.Errorf("list older templates: %w", err)
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list older templates: %w", err)
	}
	for _, o := range old {
		id := pgx.Identifier{o}.Sanitize()
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE false"); err != nil {
			continue
		}
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+id)
	}
	return nil
}

func fill(ctx context.Context, dsn string, s float64) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	z := Shape(s)
	// The data is written without WAL-synchronous commits: it is a cache that is rebuilt if lost.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	for _, st := range statements {
		sql := st.sql
		for k, v := range map[string]int64{":messages": z.Messages, ":flights": z.Flights, ":events": z.Events,
			":requests": z.Requests, ":snaplogs": z.SnapLogs} {
			sql = strings.ReplaceAll(sql, k, strconv.FormatInt(v, 10))
		}
		var args []any
		if strings.Contains(sql, "$1") {
			args = []any{rawFrame, len(sampleMessage)}
		}
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("generate %s: %w", st.table, err)
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// sampleMessage is the size and shape of an average SIS flight update (about 1.8 kB).
var sampleMessage = `<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><RECV>MSGX</RECV>` +
	`<SEQN>1</SEQN><DDTM>20261203120000</DDTM><TYPE>DFOE</TYPE><STYP>FUPD</STYP></META><DFLT><FLID>F1234</FLID>` +
	`<FFID>LH-1234-20261203-D</FFID><ALCD>LH</ALCD><FLNO>1234</FLNO><MVIN>D</MVIN><SODT>202612031200</SODT>` +
	`<ACFT>A320</ACFT><RENO>D-AIAB</RENO><TRML>T1</TRML><STND>S12</STND><ESTT>202612031210</ESTT>` +
	strings.Repeat(`<GTLS><GTDT><GTNO>1</GTNO><GATE>A12</GATE><PGOT>202612031100</PGOT><PGCT>202612031140</PGCT></GTDT></GTLS>`, 12) +
	`</DFLT></MSG>`

var rawFrame = func() []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err)
	}
	defer func() { _ = enc.Close() }()
	return enc.EncodeAll([]byte(sampleMessage), nil)
}()

func withDatabase(dsn, name string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + name
	return u.String()
}
