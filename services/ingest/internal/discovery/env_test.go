package discovery

import (
	"context"
	"database/sql"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/services/ingest/internal/netfaulttest"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

// env is one isolated PostgreSQL + inbox pair, the inbox reached through a proxy that can cut
// the network.
type env struct {
	t     *testing.T
	pg    *pgtest.DB
	my    *mysqltest.DB
	proxy *netfaulttest.Proxy
	in    *aodb.Inbox
	clk   *testclock.Clock
	logs  *testlog.Buffer
	tel   *telemetry.Telemetry
	cfg   Config
	tx    *pgtest.Session
}

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, pg: pgtest.New(t), my: mysqltest.New(t), clk: testclock.New(t0), logs: &testlog.Buffer{}}
	cfg, err := mysql.ParseDSN(e.my.ServiceDSN)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = netfaulttest.New(t, cfg.Addr)
	cfg.Addr = e.proxy.Addr()
	if e.in, err = aodb.Open(cfg.FormatDSN(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.in.Close() })
	if e.tel, err = telemetry.New(t.Context(), "msgx-ingest-test"); err != nil {
		t.Fatal(err)
	}
	e.cfg = Config{PollInterval: 100 * time.Millisecond, ClaimBatch: 500, MaxCommitDelay: 5 * time.Minute,
		LateDetectPeriod: time.Minute, LateWatchRetention: 30 * 24 * time.Hour}
	e.tx = e.pg.Session(t)
	return e
}

// poller starts a new "process": a poller with fresh metrics over the same databases.
func (e *env) poller() *Poller {
	return New(e.cfg, e.in, e.clk, slog.New(slog.NewTextHandler(e.logs, nil)), e.tel, prometheus.NewRegistry())
}

func (e *env) round(p *Poller) bool {
	e.t.Helper()
	progress, err := p.Round(e.t.Context(), e.tx)
	if err != nil {
		e.t.Fatalf("round: %v", err)
	}
	return progress.Full
}

func (e *env) cursor() cursor.Cursor {
	e.t.Helper()
	c, err := cursor.Load(e.t.Context(), e.pg.Pool)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// queued lists proc_state's msg_ids in ID order.
func (e *env) queued() []int64 {
	e.t.Helper()
	rows, err := e.pg.Pool.Query(e.t.Context(), `SELECT msg_id FROM proc_state ORDER BY msg_id`)
	if err != nil {
		e.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

func (e *env) wantQueued(want ...int64) {
	e.t.Helper()
	if got := e.queued(); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		e.t.Fatalf("proc_state = %v, want %v", got, want)
	}
}

func (e *env) wantW(want int64) {
	e.t.Helper()
	if c := e.cursor(); c.W != want {
		e.t.Fatalf("W = %d, want %d", c.W, want)
	}
}

// conn is a dedicated inbox session on the admin account: upstream's writer.
func (e *env) conn() *sql.Conn {
	e.t.Helper()
	c, err := e.my.Admin.Conn(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insert writes one inbox row on ex (a session or an open transaction) and returns its ID,
// allocated at once whether or not the row is ever committed.
func (e *env) insert(ex execer) int64 {
	e.t.Helper()
	res, err := ex.ExecContext(e.t.Context(), `INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
		VALUES ('<MSG/>', ?, 'VALID')`, e.clk.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// hold inserts a row in a transaction it leaves open on its own session.
func (e *env) hold() (*sql.Tx, int64) {
	e.t.Helper()
	tx, err := e.conn().BeginTx(e.t.Context(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = tx.Rollback() })
	return tx, e.insert(tx)
}

// gap allocates an ID that will never exist (an insert rolled back).
func (e *env) gap() int64 {
	e.t.Helper()
	tx, id := e.hold()
	if err := tx.Rollback(); err != nil {
		e.t.Fatal(err)
	}
	return id
}
