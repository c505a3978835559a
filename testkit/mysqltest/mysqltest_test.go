package mysqltest_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/msgexchange/msgexchange/migrations"
	"github.com/msgexchange/msgexchange/testkit/internal/fataltest"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
)

const flop = `<?xml version="1.0" encoding="UTF-8"?>
<MSG><META><SNDR>AODB</SNDR><SEQN>1243</SEQN><DTTM>20021010090311</DTTM><TYPE>FLOP</TYPE><STYP>ESTT</STYP></META>
<FLOP><FLID>100</FLID><ESTT>15DEC031825</ESTT></FLOP></MSG>`

func openService(t *testing.T, db *mysqltest.DB) *sql.DB {
	t.Helper()
	svc, err := sql.Open("mysql", db.ServiceDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

func TestNewAppliesFixtureAndDSNs(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	if !strings.HasPrefix(db.Name, "msgxt_mysqltest_") || len(db.Name) > 64 {
		t.Fatalf("name %q: want msgxt_mysqltest_… within 64 characters", db.Name)
	}
	for _, dsn := range []string{db.ServiceDSN, db.AdminDSN} {
		if !strings.Contains(dsn, "parseTime=true") || !strings.Contains(dsn, "loc=UTC") {
			t.Errorf("dsn %q lacks parseTime=true&loc=UTC", dsn)
		}
	}
	for _, table := range []string{"cminmsgs", "coutmsgs"} {
		var n int
		if err := db.Admin.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
			t.Errorf("fixture table %s: %v", table, err)
		}
	}
}

func TestServiceAccountHasOnlyDMLOnInboxTables(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	if _, err := db.Admin.ExecContext(t.Context(), "CREATE TABLE other (x int)"); err != nil {
		t.Fatal(err)
	}
	svc := openService(t, db)
	ctx := t.Context()

	allowed := []string{
		"SELECT COUNT(*) FROM cminmsgs",
		"INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_STATUS) VALUES ('<MSG/>', 'VALID')",
		"UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = NOW()",
		"SELECT COUNT(*) FROM coutmsgs",
		"INSERT INTO coutmsgs (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID) VALUES ('<MSG/>', NOW(), 'AODB')",
		"UPDATE coutmsgs SET COUTMSGS_DATE_SENT = NOW()",
	}
	for _, q := range allowed {
		if _, err := svc.ExecContext(ctx, q); err != nil {
			t.Errorf("service account refused %q: %v", q, err)
		}
	}
	denied := []string{
		"DELETE FROM cminmsgs",
		"DELETE FROM coutmsgs",
		"SELECT * FROM other",
		"CREATE TABLE mine (x int)",
		"ALTER TABLE cminmsgs ADD COLUMN extra int",
		"DROP TABLE coutmsgs",
		"TRUNCATE TABLE cminmsgs",
		"CREATE INDEX ix ON cminmsgs (CMINMSGS_STATUS)",
	}
	for _, q := range denied {
		_, err := svc.ExecContext(ctx, q)
		var myErr *mysql.MySQLError
		if err == nil {
			t.Errorf("service account was allowed %q", q)
		} else if !asMySQLError(err, &myErr) || !strings.Contains(strings.ToLower(myErr.Message), "denied") {
			t.Errorf("%q: want an access-denied error, got %v", q, err)
		}
	}
}

func asMySQLError(err error, target **mysql.MySQLError) bool {
	e, ok := err.(*mysql.MySQLError)
	if ok {
		*target = e
	}
	return ok
}

func TestInsertInboxReadsBackInUTC(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	shanghai := time.FixedZone("CST", 8*3600)
	received := time.Date(2024, 3, 1, 20, 34, 56, 0, shanghai) // 12:34:56 UTC

	id := db.InsertInbox(t, flop, &received)
	noTime := db.InsertInbox(t, "not xml at all", nil)
	if noTime <= id {
		t.Fatalf("ids %d then %d: want increasing", id, noTime)
	}

	svc := openService(t, db)
	var (
		got, now         time.Time
		status, sndr     string
		typ, styp        string
		seq              int64
		sent             time.Time
		processed        sql.NullTime
		nullRecv         sql.NullTime
		nullSndr         sql.NullString
		text, wallString string
	)
	err := svc.QueryRowContext(t.Context(), `SELECT CMINMSGS_DATE_RECEIVED, NOW(), CMINMSGS_STATUS, CMINMSGS_SUBSYSTEM_NAME,
			CMINMSGS_SUBSYSTEM_TYPE, CMINMSGS_SUBSYSTEM_SUBTYPE, CMINMSGS_SUBSYSTEM_SEQUENCE, CMINMSGS_SUBSYSTEM_DATE_SENT,
			CMINMSGS_DATE_PROCESSED, CMINMSGS_CLOB_MSG, DATE_FORMAT(CMINMSGS_DATE_RECEIVED, '%Y-%m-%d %H:%i:%s')
		FROM cminmsgs WHERE CMINMSGS_ID = ?`, id).
		Scan(&got, &now, &status, &sndr, &typ, &styp, &seq, &sent, &processed, &text, &wallString)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(received) || got.Location() != time.UTC {
		t.Errorf("DATE_RECEIVED read back as %v, want %v in UTC", got, received.UTC())
	}
	if wallString != "2024-03-01 12:34:56" {
		t.Errorf("stored wall clock %q, want UTC 2024-03-01 12:34:56", wallString)
	}
	if d := time.Since(now); d > time.Minute || d < -time.Minute {
		t.Errorf("NOW() = %v is not UTC (now %v): session time_zone is not +00:00", now, time.Now().UTC())
	}
	if status != "VALID" || sndr != "AODB" || typ != "FLOP" || styp != "ESTT" || seq != 1243 || processed.Valid || text != flop {
		t.Errorf("row = %q %q %q %q %d processed=%v: not as upstream writes it", status, sndr, typ, styp, seq, processed)
	}
	if want := time.Date(2002, 10, 10, 9, 3, 11, 0, time.UTC); !sent.Equal(want) {
		t.Errorf("DATE_SENT = %v, want the DTTM wall clock %v", sent, want)
	}

	err = svc.QueryRowContext(t.Context(), "SELECT CMINMSGS_DATE_RECEIVED, CMINMSGS_SUBSYSTEM_NAME FROM cminmsgs WHERE CMINMSGS_ID = ?", noTime).
		Scan(&nullRecv, &nullSndr)
	if err != nil {
		t.Fatal(err)
	}
	if nullRecv.Valid || nullSndr.Valid {
		t.Errorf("row without time or META: received=%v sender=%v, want both NULL", nullRecv, nullSndr)
	}
}

func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := mysqltest.New(t), mysqltest.New(t)
	if a.Name == b.Name || a.ServiceDSN == b.ServiceDSN {
		t.Fatal("two tests share a database or an account")
	}
	a.InsertInbox(t, flop, nil)
	var n int
	if err := b.Admin.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM cminmsgs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("b sees %d rows inserted into a", n)
	}
	// a's account reaches only a's tables.
	svcA := openService(t, a)
	if _, err := svcA.ExecContext(t.Context(), "SELECT COUNT(*) FROM `"+b.Name+"`.cminmsgs"); err == nil {
		t.Error("a's service account can read b's inbox")
	}
}

func TestCleanupDropsDatabaseAndAccount(t *testing.T) {
	t.Parallel()
	observer := mysqltest.New(t)
	var name, user string
	outer := t
	t.Run("inner", func(t *testing.T) {
		db := mysqltest.New(t)
		name = db.Name
		cfg, err := mysql.ParseDSN(db.ServiceDSN)
		if err != nil {
			t.Fatal(err)
		}
		user = cfg.User
		// A connection left open inside a transaction must not stop the cleanup.
		leaked, err := sql.Open("mysql", db.ServiceDSN)
		if err != nil {
			t.Fatal(err)
		}
		// Closed only when the outer test ends, after the inner cleanup has dropped everything.
		outer.Cleanup(func() { _ = leaked.Close() })
		tx, err := leaked.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("UPDATE cminmsgs SET CMINMSGS_STATUS = 'X'"); err != nil {
			t.Fatal(err)
		}
	})
	var n int
	err := observer.Admin.QueryRowContext(t.Context(),
		"SELECT (SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?) + (SELECT COUNT(*) FROM mysql.user WHERE User = ?)",
		name, user).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s or account %s survived the test", name, user)
	}
}

func TestSplitStatements(t *testing.T) {
	t.Parallel()
	if got := mysqltest.SplitStatements(migrations.InboxFixture); len(got) != 2 ||
		!strings.HasPrefix(got[0], "CREATE TABLE IF NOT EXISTS cminmsgs") ||
		!strings.HasPrefix(got[1], "CREATE TABLE IF NOT EXISTS coutmsgs") {
		t.Errorf("fixture split into %d statements: %q", len(got), got)
	}
	got := mysqltest.SplitStatements("-- a; comment\nSELECT 'x;y', \"a;b\", `c;d`; /* e; */ SELECT 'it''s;'; # f;\n")
	want := []string{"SELECT 'x;y', \"a;b\", `c;d`", "SELECT 'it''s;'"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestUnreachableServerFailsNamingEnv(t *testing.T) {
	t.Setenv(mysqltest.EnvDSN, "root@tcp(127.0.0.1:1)/?timeout=2s")
	msg := fataltest.Message(t, func(tb testing.TB) { mysqltest.New(tb) })
	if !strings.Contains(msg, mysqltest.EnvDSN) {
		t.Fatalf("failure message %q does not name %s", msg, mysqltest.EnvDSN)
	}
}
