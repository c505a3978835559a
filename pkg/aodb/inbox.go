// Package aodb holds the SQL of the shared MySQL tables AODB owns: cminmsgs (the inbox AODB writes and
// the processed marker we write back) and coutmsgs (the requests the dispatcher writes,
// outbound.go). It sends DML only: the tables
// belong to the database team (R-FACT-5). Every call is bounded by the configured timeout,
// so an unreachable inbox is an error, never a hang and never "no new messages".
package aodb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/msgexchange/msgexchange/pkg/secret"
)

// ErrRowMissing means the inbox row does not exist (never written, or purged).
var ErrRowMissing = errors.New("inbox row missing")

// Inbox reads and writes the shared inbox table.
type Inbox struct {
	db      *sql.DB
	timeout time.Duration
}

// RouteDriverLog sends the MySQL driver's own lines ("[mysql] … broken pipe"), which it writes
// to stderr otherwise, to logger at WARN: in JSON, and masked like every other line.
func RouteDriverLog(logger *slog.Logger) {
	_ = mysql.SetLogger(driverLog{logger})
}

type driverLog struct{ l *slog.Logger }

func (d driverLog) Print(v ...any) {
	d.l.Warn("mysql driver", "detail", strings.TrimSpace(fmt.Sprint(v...)))
}

// Open connects to the shared MySQL. The DSN's loc names the zone the inbox DATETIME columns
// are written in (the airport zone in production); parseTime must be on.
func Open(dsn string, timeout time.Duration) (*Inbox, error) {
	if dsn == "" {
		return nil, errors.New("no inbox connection: set MSGX_MYSQL_DSN (or MSGX_MYSQL_DSN_FILE)")
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("MSGX_MYSQL_DSN does not parse: %w", secret.ParseError(dsn, err, func(s string) error {
			_, err := mysql.ParseDSN(s)
			return err
		}))
	}
	cfg.ParseTime = true
	if cfg.Timeout == 0 {
		cfg.Timeout = timeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 2 * timeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 2 * timeout
	}
	// The server must give up on a row lock before the client gives up on the statement:
	// otherwise a marker UPDATE the client abandoned still commits later, after the backfill
	// recorded a failure and released its per-message gate (or after it lost its role).
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["innodb_lock_wait_timeout"]; !ok {
		cfg.Params["innodb_lock_wait_timeout"] = strconv.Itoa(max(1, int(timeout/time.Second)-1))
	}
	cfg.InterpolateParams = interpolate(dsn)
	// The driver's default (64 MiB) is not the server's: a statement between the two is sent
	// and the server drops the connection, which reads as an outage. Read at connect, the
	// server's value makes the driver bind a statement it cannot send inline and split a
	// large parameter into packets the server takes (COM_STMT_SEND_LONG_DATA).
	if _, set := dsnParams(dsn)["maxAllowedPacket"]; !set {
		cfg.MaxAllowedPacket = 0
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("inbox connector: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(4)
	db.SetConnMaxLifetime(5 * time.Minute)
	return &Inbox{db: db, timeout: timeout}, nil
}

// interpolate tells whether the driver should put the arguments into the statement text
// itself (go-sql-driver's interpolateParams): one round trip per statement instead of a
// server-side prepare, execute and close for each, which on the per-message path (a marker, a
// read) is most of what MariaDB spends (docs/performance.md). Only for the UTF-8 character
// sets, where the driver's escaping is safe (the driver refuses it for the multibyte sets
// whose escaping is not, BIG5, CP932, GB2312, GBK, SJIS, by collation only, so a charset
// named in the DSN is checked here), and never against a DSN that decides it itself.
func interpolate(dsn string) bool {
	params := dsnParams(dsn)
	if params == nil {
		return false
	}
	if _, set := params["interpolateParams"]; set {
		v, _ := strconv.ParseBool(params.Get("interpolateParams"))
		return v
	}
	for _, cs := range strings.Split(params.Get("charset"), ",") {
		if cs != "" && cs != "utf8mb4" && cs != "utf8" && cs != "utf8mb3" {
			return false
		}
	}
	if c := params.Get("collation"); c != "" && !strings.HasPrefix(c, "utf8") {
		return false
	}
	return true
}

// dsnParams is the query of a DSN; nil when it does not parse.
func dsnParams(dsn string) url.Values {
	q := ""
	if i := strings.LastIndexByte(dsn, '?'); i >= 0 {
		q = dsn[i+1:]
	}
	params, err := url.ParseQuery(q)
	if err != nil {
		return nil
	}
	return params
}

// Close closes the connection pool.
func (i *Inbox) Close() error { return i.db.Close() }

// Ping checks that the inbox answers.
func (i *Inbox) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	return i.db.PingContext(ctx)
}

// Probe checks that the inbox table answers a read: a server that accepts connections while
// another session holds the table locked does not.
func (i *Inbox) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	var one int
	err := i.db.QueryRowContext(ctx, `SELECT 1 FROM cminmsgs LIMIT 1`).Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("probe inbox: %w", err)
	}
	return nil
}

// Row is one discovered inbox row.
type Row struct {
	ID         int64
	ReceivedAt *time.Time
}

// After returns up to limit rows with ID > w in ID order. It never looks at the processed
// marker (R-INGEST-2).
func (i *Inbox) After(ctx context.Context, w int64, limit int) ([]Row, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	rows, err := i.db.QueryContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_DATE_RECEIVED FROM cminmsgs
		WHERE CMINMSGS_ID > ? ORDER BY CMINMSGS_ID LIMIT ?`, w, limit)
	if err != nil {
		return nil, fmt.Errorf("read inbox after %d: %w", w, err)
	}
	return scanRows(rows)
}

// Existing returns the rows among ids that exist now (late-arrival detection).
func (i *Inbox) Existing(ctx context.Context, ids []int64) ([]Row, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	in, args := inList(ids)
	rows, err := i.db.QueryContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_DATE_RECEIVED FROM cminmsgs
		WHERE CMINMSGS_ID IN (`+in+`) ORDER BY CMINMSGS_ID`, args...)
	if err != nil {
		return nil, fmt.Errorf("look up %d inbox ids: %w", len(ids), err)
	}
	return scanRows(rows)
}

func scanRows(rows *sql.Rows) ([]Row, error) {
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var rcv sql.NullTime
		if err := rows.Scan(&r.ID, &rcv); err != nil {
			return nil, fmt.Errorf("scan inbox row: %w", err)
		}
		if rcv.Valid {
			t := rcv.Time
			r.ReceivedAt = &t
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read inbox rows: %w", err)
	}
	return out, nil
}

// MaxID returns the largest inbox ID (0 when empty), for the watermark lag.
func (i *Inbox) MaxID(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	var id sql.NullInt64
	if err := i.db.QueryRowContext(ctx, `SELECT MAX(CMINMSGS_ID) FROM cminmsgs`).Scan(&id); err != nil {
		return 0, fmt.Errorf("inbox max id: %w", err)
	}
	return id.Int64, nil
}

// MinID returns the smallest inbox ID (0 when empty), for cutover seeding.
func (i *Inbox) MinID(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	var id sql.NullInt64
	if err := i.db.QueryRowContext(ctx, `SELECT MIN(CMINMSGS_ID) FROM cminmsgs`).Scan(&id); err != nil {
		return 0, fmt.Errorf("inbox min id: %w", err)
	}
	return id.Int64, nil
}

// Raw returns the message text of one row. The column is utf8mb4, so the text is already
// characters whatever its XML declaration says.
func (i *Inbox) Raw(ctx context.Context, id int64) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	var text string
	err := i.db.QueryRowContext(ctx, `SELECT CMINMSGS_CLOB_MSG FROM cminmsgs WHERE CMINMSGS_ID = ?`, id).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("inbox row %d: %w", id, ErrRowMissing)
	}
	if err != nil {
		return "", fmt.Errorf("read inbox row %d: %w", id, err)
	}
	return text, nil
}

// RawPart returns limit characters at most of a row's text from offset (0-based), and the
// length of the whole text in characters. MySQL cuts the text, so a reader of a 16 MiB row
// holds only its part: a characters' count, unlike a bytes' one, never splits a character.
func (i *Inbox) RawPart(ctx context.Context, id, offset, limit int64) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	var (
		text  string
		chars int64
	)
	err := i.db.QueryRowContext(ctx, `SELECT SUBSTRING(CMINMSGS_CLOB_MSG, ?, ?), CHAR_LENGTH(CMINMSGS_CLOB_MSG)
		FROM cminmsgs WHERE CMINMSGS_ID = ?`, offset+1, limit, id).Scan(&text, &chars)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("inbox row %d: %w", id, ErrRowMissing)
	}
	if err != nil {
		return "", 0, fmt.Errorf("read inbox row %d: %w", id, err)
	}
	return text, chars, nil
}

// RawAfter returns the text of the rows with an ID in (after, after+span], those up to
// maxBytes long only, by ID: a read ahead of the rows the pump will ask Raw for next. A row
// that is absent or longer is simply not in the result.
func (i *Inbox) RawAfter(ctx context.Context, after int64, span int, maxBytes int) (map[int64]string, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	rows, err := i.db.QueryContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_CLOB_MSG FROM cminmsgs
		WHERE CMINMSGS_ID > ? AND CMINMSGS_ID <= ? AND LENGTH(CMINMSGS_CLOB_MSG) <= ?`, after, after+int64(span), maxBytes)
	if err != nil {
		return nil, fmt.Errorf("read inbox rows after %d: %w", after, err)
	}
	defer func() { _ = rows.Close() }()
	out := make(map[int64]string, span)
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			return nil, fmt.Errorf("read inbox rows after %d: %w", after, err)
		}
		out[id] = text
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read inbox rows after %d: %w", after, err)
	}
	return out, nil
}

// MarkResult is the outcome of writing a processed marker (R-BACKFILL-4).
type MarkResult int

// The marker outcomes that are not errors.
const (
	Marked        MarkResult = iota + 1 // the marker was empty and is now written
	AlreadyMarked                       // the row already had a marker: kept as it was
	Missing                             // the row does not exist
)

// Mark writes the processed marker on one row if it has none. It never overwrites or reverts
// a marker. It is MarkMany of one row, so a call cut off by its timeout settles the same way.
func (i *Inbox) Mark(ctx context.Context, id int64, at time.Time, status string) (MarkResult, error) {
	res, err := i.MarkMany(ctx, []int64{id}, at, status)
	if err != nil {
		return 0, err
	}
	return res[id], nil
}

// MarkMany writes the processed marker on every row of ids that has none, and returns each
// row's outcome as Mark would. It runs in one transaction: the rows are read and locked
// (their outcome decided), the empty ones marked, and the transaction committed, the three
// statements together bounded by the timeout. A call the client gives up on never commits
// later: its connection is closed, before or during COMMIT, and the server rolls the
// transaction back. On an error no row got a marker from it.
func (i *Inbox) MarkMany(ctx context.Context, ids []int64, at time.Time, status string) (map[int64]MarkResult, error) {
	out := make(map[int64]MarkResult, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	fail := func(err error) (map[int64]MarkResult, error) {
		return nil, fmt.Errorf("mark %d inbox rows from %d: %w", len(ids), ids[0], err)
	}
	tx, err := i.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback() }()
	in, args := inList(ids)
	rows, err := tx.QueryContext(ctx, `SELECT CONNECTION_ID(), CMINMSGS_ID, CMINMSGS_DATE_PROCESSED IS NOT NULL FROM cminmsgs
		WHERE CMINMSGS_ID IN (`+in+`) FOR UPDATE`, args...)
	if err != nil {
		return fail(err)
	}
	var empty []int64
	var thread int64
	for rows.Next() {
		var id int64
		var marked bool
		if err := rows.Scan(&thread, &id, &marked); err != nil {
			_ = rows.Close()
			return fail(err)
		}
		out[id] = AlreadyMarked
		if !marked {
			out[id] = Marked
			empty = append(empty, id)
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			out[id] = Missing
		}
	}
	if len(empty) > 0 {
		in, args := inList(empty)
		res, err := tx.ExecContext(ctx, `UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ?, CMINMSGS_STATUS = ?
			WHERE CMINMSGS_ID IN (`+in+`) AND CMINMSGS_DATE_PROCESSED IS NULL`, append([]any{at, status}, args...)...)
		if err != nil {
			return fail(err)
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(empty)) {
			// The rows are locked since the read: anything else is a server that did not do
			// what it said, and nothing of it is committed.
			return fail(errors.Join(err, fmt.Errorf("%d of %d empty markers written", n, len(empty))))
		}
	}
	// COMMIT as a statement, bounded like the others: database/sql's Commit stops watching the
	// context once sent, and a COMMIT held by the server (a backup's BACKUP STAGE BLOCK_COMMIT,
	// a semi-synchronous wait) could then land after the caller gave up and released its
	// gates. Cut off here, the connection closes; the deferred Rollback then finds nothing to
	// undo. A closed connection alone does not settle a COMMIT already sent (the server looks
	// for a closed client once a second while a commit is held, and finishes one under way),
	// so the thread is killed and waited for, and then the rows say whether it landed.
	if _, err := tx.ExecContext(ctx, `COMMIT`); err != nil {
		if len(empty) == 0 {
			return fail(err)
		}
		landed, serr := i.settle(thread, empty)
		switch {
		case serr != nil:
			return fail(errors.Join(err, serr))
		case landed:
			return out, nil
		}
		return fail(err)
	}
	return out, nil
}

// settleTimeout bounds settle: with inbox.timeout at most 8 s, the caller's gates stay within
// the 10 s lease of its PostgreSQL session.
const settleTimeout = time.Second

// settle ends the server thread of a transaction whose COMMIT was cut off (KILL CONNECTION,
// then waiting until it is gone from the process list) and reports whether the commit landed
// before it ended: whether every one of the rows it was to mark has a marker now (the commit
// is all or nothing, and only the backfill writes markers).
func (i *Inbox) settle(thread int64, marking []int64) (landed bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	var me *mysql.MySQLError
	_, err = i.db.ExecContext(ctx, `KILL CONNECTION `+strconv.FormatInt(thread, 10))
	if err != nil && !(errors.As(err, &me) && me.Number == 1094) { // 1094: unknown thread, already gone
		return false, fmt.Errorf("settle the cut-off commit: kill thread %d: %w", thread, err)
	}
	for {
		var n int
		if err := i.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, thread).Scan(&n); err != nil {
			return false, fmt.Errorf("settle the cut-off commit: thread %d: %w", thread, err)
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("settle the cut-off commit: thread %d still running: %w", thread, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	in, args := inList(marking)
	var marked int
	if err := i.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM cminmsgs WHERE CMINMSGS_ID IN (`+in+`)
		AND CMINMSGS_DATE_PROCESSED IS NOT NULL`, args...).Scan(&marked); err != nil {
		return false, fmt.Errorf("settle the cut-off commit: %w", err)
	}
	return marked == len(marking), nil
}

// inList is the placeholders and arguments of an IN list of ids.
func inList(ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for k, id := range ids {
		args[k] = id
	}
	return "?" + strings.Repeat(", ?", len(ids)-1), args
}

// insertOverhead is what a bound INSERT of the inbox row carries besides the text: the
// statement's packet header and the other parameters.
const insertOverhead = 1 << 10

// Insert writes one message into the inbox as upstream would (the compat HTTP entry) and
// returns its CMINMSGS_ID once committed.
//
// The text is a bound parameter of a prepared statement, never put into the statement's text:
// escaping doubles a text of backslashes or quotes, which then passes max_allowed_packet, and
// the server drops the connection instead of refusing the row (an outage to the sender, who
// retries for ever). Bound, the text travels as it is, so whether it fits is known before it
// is sent: a text the server's max_allowed_packet cannot take is refused here as too large
// (TooLarge), never attempted.
func (i *Inbox) Insert(ctx context.Context, text string, received time.Time) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	var maxPacket int
	if err := i.db.QueryRowContext(ctx, `SELECT @@max_allowed_packet`).Scan(&maxPacket); err != nil {
		return 0, fmt.Errorf("insert inbox row: read max_allowed_packet: %w", err)
	}
	if len(text)+insertOverhead > maxPacket {
		return 0, fmt.Errorf("insert inbox row: %d bytes with the statement, the inbox server's max_allowed_packet is %d: %w",
			len(text)+insertOverhead, maxPacket, mysql.ErrPktTooLarge)
	}
	stmt, err := i.db.PrepareContext(ctx, `INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
		VALUES (?, ?, 'VALID')`)
	if err != nil {
		return 0, fmt.Errorf("insert inbox row: prepare: %w", err)
	}
	defer stmt.Close()
	res, err := stmt.ExecContext(ctx, text, received)
	if err != nil {
		return 0, fmt.Errorf("insert inbox row: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert inbox row: %w", err)
	}
	return id, nil
}
