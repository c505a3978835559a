package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/tools/stack"

	"github.com/msgexchange/msgexchange/pkg/clock"
)

// cleanRun is the reference: the chaos inbox's rows, with their IDs (so the same holes and
// the same ID order) and without markers, copied into the clean target's inbox and processed
// by a fault-free ingest and pump. The other services decide nothing about flight state.
func (h *harness) cleanRun(ctx context.Context, t Target) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CleanTimeout)
	defer cancel()
	mcfg, err := mysql.ParseDSN(t.MySQLAdminDSN)
	if err != nil {
		return nil, err
	}
	mcfg.ParseTime = true
	conn, err := mysql.NewConnector(mcfg)
	if err != nil {
		return nil, err
	}
	inbox := sql.OpenDB(conn)
	defer inbox.Close()
	n, err := copyInbox(ctx, h.inbox, inbox)
	if err != nil {
		return nil, fmt.Errorf("copy the inbox: %w", err)
	}

	pool, err := pgxpool.New(ctx, t.PGDSN)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	logs, err := os.Create(filepath.Join(h.cfg.LogDir, "clean.log"))
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	st := stack.New(h.cfg.Bin, []string{
		"MSGX_PG_DSN=" + t.PGDSN,
		"MSGX_MYSQL_DSN=" + t.MySQLServiceDSN,
		"MSGX_REDIS_URL=" + t.RedisURL,
		"MSGX_REDIS_PREFIX=" + t.RedisPrefix,
		"MSGX_ADMIN_ADDR=127.0.0.1:0",
		"MSGX_HTTP_ADDR=127.0.0.1:0",
		"MSGX_PIPELINE_POLL_INTERVAL=100ms",
		// Every row is committed before the run starts, so a gap is a rolled-back insert and
		// nothing is gained by waiting on it.
		"MSGX_PIPELINE_MAX_COMMIT_DELAY=300ms",
		"MSGX_SHUTDOWN_TIMEOUT=5s",
		"MSGX_LOG_LEVEL=info",
	}, logs)
	defer st.StopAll(10 * time.Second)
	for _, s := range []string{"ingest", "pump"} {
		if err := st.Start(s, nil); err != nil {
			return nil, err
		}
	}
	began := time.Now()
	last := time.Now()
	for {
		var enqueued, done int
		err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')) FROM proc_state`).Scan(&enqueued, &done)
		if err == nil && enqueued == n && done == n {
			break
		}
		for _, s := range []string{"ingest", "pump"} {
			if code, exited := st.Exited(s); exited {
				return nil, fmt.Errorf("%s exited with %d (logs: %s)", s, code, logs.Name())
			}
		}
		if time.Since(last) >= 10*time.Second {
			h.logf("clean run: %d of %d enqueued, %d terminal", enqueued, n, done)
			last = time.Now()
		}
		if !clock.Sleep(ctx, 200*time.Millisecond) {
			return nil, fmt.Errorf("not finished after %s: %d of %d enqueued, %d terminal (logs: %s)", h.cfg.CleanTimeout, enqueued, n, done, logs.Name())
		}
	}
	h.logf("clean run: %d rows terminal in %s", n, time.Since(began).Round(time.Millisecond))
	st.StopAll(10 * time.Second)
	ropts, err := redis.ParseURL(t.RedisURL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	return takeSnapshot(ctx, pool, rdb, t.RedisPrefix)
}

// copyInbox copies every row of from into to with its ID and its upstream columns, marker
// empty, in one transaction, and returns how many.
func copyInbox(ctx context.Context, from, to *sql.DB) (int, error) {
	rows, err := from.QueryContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_SUBSYSTEM_NAME,
		CMINMSGS_SUBSYSTEM_SEQUENCE, CMINMSGS_SUBSYSTEM_DATE_SENT, CMINMSGS_SUBSYSTEM_TYPE, CMINMSGS_SUBSYSTEM_SUBTYPE
		FROM cminmsgs ORDER BY CMINMSGS_ID`)
	if err != nil {
		return 0, err
	}
	type row struct {
		id                 int64
		text               string
		received, sent     sql.NullTime
		name, typ, subtype sql.NullString
		seq                sql.NullInt64
	}
	var all []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.text, &r.received, &r.name, &r.seq, &r.sent, &r.typ, &r.subtype); err != nil {
			rows.Close()
			return 0, err
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	tx, err := to.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	for _, r := range all {
		if _, err := tx.ExecContext(ctx, `INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED,
			CMINMSGS_SUBSYSTEM_NAME, CMINMSGS_SUBSYSTEM_SEQUENCE, CMINMSGS_SUBSYSTEM_DATE_SENT, CMINMSGS_SUBSYSTEM_TYPE,
			CMINMSGS_SUBSYSTEM_SUBTYPE, CMINMSGS_STATUS) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'VALID')`,
			r.id, r.text, r.received, r.name, r.seq, r.sent, r.typ, r.subtype); err != nil {
			return 0, err
		}
	}
	return len(all), tx.Commit()
}
