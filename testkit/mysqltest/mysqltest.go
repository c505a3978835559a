// Package mysqltest gives each test its own MariaDB/MySQL database holding the shared inbox
// tables (the dev fixture migrations.InboxFixture), and a dedicated account with only SELECT,
// INSERT and UPDATE on cminmsgs and coutmsgs: the services never send DDL to the shared MySQL,
// and tests run them with exactly the rights production gives them.
//
// Time zone: every DSN this package hands out has parseTime=true&loc=UTC and sets the session
// time_zone to '+00:00'. The DATETIME columns of a test database therefore hold UTC wall-clock
// time, whether written by the driver from a time.Time or by NOW() in SQL, and read back as UTC.
// (Production sets loc to the zone upstream writes in; tests pin UTC so results do not depend
// on the machine's zone.)
//
// The admin DSN comes from MSGX_TEST_MYSQL_DSN (default root@tcp(127.0.0.1:3306)/). A test whose
// server is unreachable fails, naming that variable; it is never skipped.
package mysqltest

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/msgexchange/msgexchange/migrations"
	"github.com/msgexchange/msgexchange/testkit/internal/testname"
)

const (
	// EnvDSN names the variable that overrides the admin DSN.
	EnvDSN     = "MSGX_TEST_MYSQL_DSN"
	defaultDSN = "root@tcp(127.0.0.1:3306)/"

	dbPrefix       = "msgxt_"
	userPrefix     = "msgxu_"
	maxConns       = 4
	setupTimeout   = time.Minute
	cleanupTimeout = 30 * time.Second
)

// DB is one test's database.
type DB struct {
	AdminDSN   string  // the admin account on this database (DDL, inspection, simulating upstream)
	ServiceDSN string  // the restricted service account on this database: what services get
	Admin      *sql.DB // opened on AdminDSN; closed at cleanup
	Name       string
}

var harness = testname.NewRun()

// New creates a database with the inbox fixture and a restricted account, and drops both when
// the test ends.
func New(t testing.TB) *DB {
	t.Helper()
	rawDSN := cmp.Or(os.Getenv(EnvDSN), defaultDSN)
	rootCfg, err := mysql.ParseDSN(rawDSN)
	if err != nil {
		t.Fatalf("mysqltest: parse %s: %v", EnvDSN, err)
	}
	return newOn(t, rawDSN, rootCfg)
}

// newOn is New on the server that rootCfg (spelt rawDSN) reaches as its administrator.
func newOn(t testing.TB, rawDSN string, rootCfg *mysql.Config) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if rootCfg.Timeout == 0 {
		rootCfg.Timeout = 5 * time.Second
	}
	server, err := open(ctx, serverConfig(rootCfg))
	if err != nil {
		t.Fatalf("mysqltest: cannot reach MySQL at %s (set %s to point at a test server): %v", redact(rootCfg), EnvDSN, err)
	}
	defer server.Close()
	harness.SweepOnce(rawDSN, func(cutoff int64) { sweepStale(ctx, t, server, cutoff) })

	name := harness.Name(dbPrefix, "_")
	// MySQL limits account names to 32 characters, so the stamp is in base 36 here.
	user := fmt.Sprintf("%s%s_%d_%d", userPrefix, strconv.FormatInt(harness.Stamp, 36), os.Getpid(), harness.Next())
	password := randomHex(16)

	if _, err := server.ExecContext(ctx, "CREATE DATABASE "+quoteIdent(name)+" CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("mysqltest: create database %s: %v", name, err)
	}
	db := &DB{Name: name}
	// Registered before anything else can fail, so the database and account never outlive the
	// test; last-in first-out order closes Admin (registered below) before this runs.
	t.Cleanup(func() { drop(t, rootCfg, name, user) })

	adminCfg := sessionConfig(rootCfg, name)
	db.AdminDSN = formatDSN(adminCfg)
	if db.Admin, err = open(ctx, adminCfg); err != nil {
		t.Fatalf("mysqltest: open %s: %v", name, err)
	}
	db.Admin.SetMaxOpenConns(maxConns)
	t.Cleanup(func() { _ = db.Admin.Close() })

	for _, stmt := range SplitStatements(migrations.InboxFixture) {
		if _, err := db.Admin.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("mysqltest: apply inbox fixture: %v\n%s", err, stmt)
		}
	}

	account := quoteString(user) + "@'%'"
	grants := []string{
		"CREATE USER " + account + " IDENTIFIED BY " + quoteString(password),
		"GRANT SELECT, INSERT, UPDATE ON " + quoteIdent(name) + ".`cminmsgs` TO " + account,
		"GRANT SELECT, INSERT, UPDATE ON " + quoteIdent(name) + ".`coutmsgs` TO " + account,
	}
	for _, stmt := range grants {
		if _, err := server.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("mysqltest: create service account: %v", err)
		}
	}
	svcCfg := sessionConfig(rootCfg, name)
	svcCfg.User, svcCfg.Passwd = user, password
	db.ServiceDSN = formatDSN(svcCfg)
	return db
}

// InsertInbox inserts a cminmsgs row as upstream would: status 'VALID', the subsystem columns
// taken from the message's META when it parses, and the processed marker NULL. received nil
// leaves CMINMSGS_DATE_RECEIVED NULL, which upstream also does. It returns CMINMSGS_ID. It uses
// t.Context, so it is for the test body, not for cleanups.
func (db *DB) InsertInbox(t testing.TB, xml string, received *time.Time) int64 {
	t.Helper()
	return insertInbox(t, db.Admin, xml, received)
}

// HoldInbox inserts rows as InsertInbox does, in a transaction it leaves open on a connection
// of its own, as an upstream insert that commits late: their IDs are allocated now, and the
// rows become visible only when commit is called. A test that never commits rolls back at
// cleanup.
func (db *DB) HoldInbox(t testing.TB, xmls []string, received *time.Time) (ids []int64, commit func()) {
	t.Helper()
	tx, err := db.Admin.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatalf("mysqltest: begin a held insert: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	for _, x := range xmls {
		ids = append(ids, insertInbox(t, tx, x, received))
	}
	return ids, func() {
		t.Helper()
		if err := tx.Commit(); err != nil {
			t.Fatalf("mysqltest: commit the held insert: %v", err)
		}
	}
}

func insertInbox(t testing.TB, q execer, xml string, received *time.Time) int64 {
	t.Helper()
	id, err := execInsert(t.Context(), q, xml, received)
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	return id
}

// TryInsertInbox is InsertInbox for a writer that goes on through inbox outages: it returns the
// error instead of failing the test. An error does not tell whether the row was committed (the
// server may have gone away after the commit), so such a writer finds out by reading back.
func (db *DB) TryInsertInbox(ctx context.Context, xml string, received *time.Time) (int64, error) {
	return execInsert(ctx, db.Admin, xml, received)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func execInsert(ctx context.Context, q execer, xml string, received *time.Time) (int64, error) {
	m := parseMeta(xml)
	var recv any
	if received != nil {
		recv = received.UTC()
	}
	res, err := q.ExecContext(ctx, `INSERT INTO cminmsgs
		(CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_SUBSYSTEM_NAME, CMINMSGS_SUBSYSTEM_SEQUENCE,
		 CMINMSGS_SUBSYSTEM_DATE_SENT, CMINMSGS_SUBSYSTEM_TYPE, CMINMSGS_SUBSYSTEM_SUBTYPE, CMINMSGS_STATUS)
		VALUES (?, ?, ?, ?, ?, ?, ?, 'VALID')`,
		xml, recv, m.sender, m.seq, m.sent, m.typ, m.subtype)
	if err != nil {
		return 0, fmt.Errorf("insert inbox row: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert inbox row: %w", err)
	}
	return id, nil
}

// InsertInboxRows writes many messages into cminmsgs with multi-row INSERTs (as upstream would,
// only faster: a backlog for a benchmark), all received at received, and returns their
// CMINMSGS_IDs in order. Nothing else may write the inbox meanwhile.
func (db *DB) InsertInboxRows(t testing.TB, xmls []string, received time.Time) []int64 {
	t.Helper()
	ctx := context.Background()
	var before int64
	if err := db.Admin.QueryRowContext(ctx, `SELECT coalesce(max(CMINMSGS_ID), 0) FROM cminmsgs`).Scan(&before); err != nil {
		t.Fatalf("mysqltest: insert inbox rows: %v", err)
	}
	const batch = 200
	for i := 0; i < len(xmls); i += batch {
		part := xmls[i:min(i+batch, len(xmls))]
		args := make([]any, 0, 2*len(part))
		for _, x := range part {
			args = append(args, x, received.UTC())
		}
		q := `INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, 'VALID'),", len(part)), ",")
		if _, err := db.Admin.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("mysqltest: insert inbox rows: %v", err)
		}
	}
	rows, err := db.Admin.QueryContext(ctx, `SELECT CMINMSGS_ID FROM cminmsgs WHERE CMINMSGS_ID > ? ORDER BY CMINMSGS_ID`, before)
	if err != nil {
		t.Fatalf("mysqltest: insert inbox rows: %v", err)
	}
	defer func() { _ = rows.Close() }()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("mysqltest: insert inbox rows: %v", err)
		}
		ids = append(ids, id)
	}
	if len(ids) != len(xmls) {
		t.Fatalf("mysqltest: inserted %d inbox rows, read back %d", len(xmls), len(ids))
	}
	return ids
}

// serverConfig is the admin account with no database selected, for CREATE/DROP.
func serverConfig(root *mysql.Config) *mysql.Config {
	c := root.Clone()
	c.DBName = ""
	return c
}

// sessionConfig is root's address and account on database name with the UTC convention of the
// package documentation.
func sessionConfig(root *mysql.Config, name string) *mysql.Config {
	c := root.Clone()
	c.DBName = name
	c.ParseTime = true
	c.Loc = time.UTC
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["time_zone"] = "'+00:00'"
	return c
}

// formatDSN spells out loc=UTC, which FormatDSN leaves out because it is the driver's default:
// whoever reads a DSN from a test log should not have to know that default.
func formatDSN(cfg *mysql.Config) string {
	dsn := cfg.FormatDSN()
	if cfg.Loc == time.UTC && !strings.Contains(dsn, "loc=") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + "loc=UTC"
	}
	return dsn
}

func open(ctx context.Context, cfg *mysql.Config) (*sql.DB, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("connector: %w", err)
	}
	db := sql.OpenDB(connector)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ping: %w", err)
	}
	return db, nil
}

func drop(t testing.TB, root *mysql.Config, name, user string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	server, err := open(ctx, serverConfig(root))
	if err != nil {
		t.Errorf("mysqltest: drop %s: %v", name, err)
		return
	}
	defer server.Close()
	// A session the test left open (a service it did not stop) would keep the account alive
	// and could hold a metadata lock that makes DROP DATABASE wait: end them first.
	if err := killSessions(ctx, server, name, user); err != nil {
		t.Errorf("mysqltest: end sessions on %s: %v", name, err)
	}
	if _, err := server.ExecContext(ctx, "DROP USER IF EXISTS "+quoteString(user)+"@'%'"); err != nil {
		t.Errorf("mysqltest: drop user %s: %v", user, err)
	}
	if _, err := server.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)); err != nil {
		t.Errorf("mysqltest: drop database %s: %v", name, err)
	}
}

func killSessions(ctx context.Context, server *sql.DB, name, user string) error {
	// One connection, so CONNECTION_ID() is the one issuing the KILLs.
	conn, err := server.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx,
		"SELECT ID FROM information_schema.PROCESSLIST WHERE (USER = ? OR DB = ?) AND ID <> CONNECTION_ID()", user, name)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		// The session may have ended in the meantime; that is the outcome we wanted.
		_, _ = conn.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
	}
	return nil
}

// sweepStale drops databases and accounts left by runs that died before their cleanup.
// Failures are only logged: a concurrent run may be dropping the same thing.
func sweepStale(ctx context.Context, t testing.TB, server *sql.DB, cutoff int64) {
	t.Helper()

	dbs, err := queryStrings(ctx, server, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'msgxt\\_%'")
	if err != nil {
		t.Logf("mysqltest: list stale databases: %v", err)
	}
	for _, name := range dbs {
		if ts, ok := testname.StampOf(name, "_", 10); ok && ts < cutoff {
			if _, err := server.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)); err != nil {
				t.Logf("mysqltest: drop stale database %s: %v", name, err)
			}
		}
	}
	users, err := queryStrings(ctx, server, "SELECT DISTINCT User FROM mysql.user WHERE User LIKE 'msgxu\\_%'")
	if err != nil {
		t.Logf("mysqltest: list stale accounts: %v", err)
	}
	for _, user := range users {
		if ts, ok := testname.StampOf(user, "_", 36); ok && ts < cutoff {
			if _, err := server.ExecContext(ctx, "DROP USER IF EXISTS "+quoteString(user)+"@'%'"); err != nil {
				t.Logf("mysqltest: drop stale account %s: %v", user, err)
			}
		}
	}
}

func queryStrings(ctx context.Context, db *sql.DB, query string) ([]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// SplitStatements splits a SQL script at semicolons outside quotes and comments, for drivers
// that (rightly) run one statement per Exec. Comments are dropped.
func SplitStatements(script string) []string {
	var (
		out   []string
		cur   strings.Builder
		quote rune // the open quote character, or 0
	)
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	rs := []rune(script)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			cur.WriteRune(r)
			if r == '\\' && i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
			} else if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
			cur.WriteRune(r)
		case r == '-' && i+1 < len(rs) && rs[i+1] == '-', r == '#':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			cur.WriteRune('\n')
		case r == '/' && i+1 < len(rs) && rs[i+1] == '*':
			for i += 2; i+1 < len(rs) && (rs[i] != '*' || rs[i+1] != '/'); i++ {
			}
			i++ // onto the closing '/', which the loop steps over
			cur.WriteRune(' ')
		case r == ';':
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

func redact(cfg *mysql.Config) string {
	c := cfg.Clone()
	if c.Passwd != "" {
		c.Passwd = "xxxxx"
	}
	return c.FormatDSN()
}

// Names built here contain only [a-z0-9_]; quoting still keeps a surprise from becoming SQL.
func quoteIdent(s string) string  { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
