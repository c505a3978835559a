package flightstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
)

// Change is one row of a flight's change history (flight_change, R-ORDER-8): what one message
// did to one flight, written in the transaction that did it.
type Change struct {
	MsgID   int64
	FLID    string
	MsgType string // FLOP, SCHD
	STYP    string
	// Cause is why the flight is in the message: "target" for the flight a FLOP or an ADFT
	// names, a snapshot's flight.Cause (record, omitted, cascade, code-share), or "cascade" and
	// "code-share" for the flights a single-flight message changed with its target.
	Cause   string
	State   string // the flight's state after the message
	Version int64  // the flight's version after the message
	// Changes are the parts that changed, old → new; Superseded the parts the message would
	// have written that a newer message had, with that message.
	Changes    map[string]flight.Change
	Superseded map[string]int64
	Events     []ChangeEvent
	At         time.Time
	// Omitted is set by the byte-bounded reads (EachHistory, EachChangeOf) for a row read past
	// their byte bound: Changes was not read (nil), the rest of the row was.
	Omitted bool
}

// ChangeEvent is an outbox event a message wrote for the flight.
type ChangeEvent struct {
	Target  string `json:"target"`
	Type    string `json:"type"`
	Version int64  `json:"version"`
}

// Causes of a single-flight message's changes.
const (
	CauseTarget    = "target"
	CauseCascade   = string(flight.CauseCascade)
	CauseCodeShare = string(flight.CauseCodeShare)
)

// insertChangesSQL writes a message's history rows in one statement whatever their count; a
// row already there (a snapshot batch committed before a crash, written again by the re-run's
// plan) is kept. AddRows sends it, alone or ahead of the rows' upsert.
var insertChangesSQL = insertChangesAt(1)

// insertChangesAt is insertChangesSQL with its arrays numbered from $first.
func insertChangesAt(first int) string {
	types := []string{"bigint", "text", "text", "text", "text", "text", "bigint", "jsonb", "jsonb", "jsonb", "timestamptz"}
	ph := make([]string, len(types))
	for i, t := range types {
		ph[i] = fmt.Sprintf("$%d::%s[]", first+i, t)
	}
	return `INSERT INTO flight_change (` + changeColumns + `)
	SELECT * FROM unnest(` + strings.Join(ph, ", ") + `)
	ON CONFLICT (flid, msg_id) DO NOTHING`
}

// changeArgs are insertChangesSQL's arrays for changes.
func changeArgs(changes []Change) []any {
	n := len(changes)
	msgs, versions := make([]int64, n), make([]int64, n)
	flids, types, styps, causes, states := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	diffs, sups, events := make([]string, n), make([]string, n), make([]string, n)
	at := make([]time.Time, n)
	for i, c := range changes {
		msgs[i], flids[i], types[i], styps[i], causes[i], states[i], versions[i], at[i] =
			c.MsgID, c.FLID, c.MsgType, c.STYP, c.Cause, c.State, c.Version, c.At
		diffs[i], sups[i], events[i] = jsonOf(c.Changes, "{}"), jsonOf(c.Superseded, "{}"), jsonOf(c.Events, "[]")
	}
	return []any{msgs, flids, types, styps, causes, states, versions, diffs, sups, events, at}
}

// jsonOf encodes maps and slices of strings and numbers, empty when v has nothing.
func jsonOf[T any](v T, empty string) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("flight change: %v", err)) // strings and numbers only: cannot fail
	}
	if s := string(b); s != "null" {
		return s
	}
	return empty
}

const changeColumns = `msg_id, flid, msg_type, styp, cause, state, version, changes, superseded, events, written_at`

func scanChange(row pgx.CollectableRow) (Change, error) {
	var c Change
	var diffs, sups, events []byte
	if err := row.Scan(&c.MsgID, &c.FLID, &c.MsgType, &c.STYP, &c.Cause, &c.State, &c.Version, &diffs, &sups, &events, &c.At); err != nil {
		return Change{}, err
	}
	// The column is NOT NULL: NULL is a byte-bounded read that left the changes out.
	c.Omitted = diffs == nil
	for _, p := range []struct {
		raw []byte
		to  any
	}{{diffs, &c.Changes}, {sups, &c.Superseded}, {events, &c.Events}} {
		if p.raw == nil {
			continue
		}
		if err := json.Unmarshal(p.raw, p.to); err != nil {
			return Change{}, fmt.Errorf("flight change of %s at msg %d: %w", c.FLID, c.MsgID, err)
		}
	}
	return c, nil
}

// RowBound is how a byte-bounded read (EachHistory, EachChangeOf) counts: it reads the changes
// of a row only while the rows before it take less than Bytes, each counted as its size as
// stored, but at most RowBytes (what the reader keeps of a row however large: control cuts
// each value to its head). The rows after come with Omitted set.
type RowBound struct {
	Bytes, RowBytes int
}

// EachHistory calls fn with flid's history rows after message after, in ID order: at most
// limit, their changes within bound. fn sees one row at a time, so a reader that keeps only
// what fits an answer (control's pages, docs/control.md) holds about one row however large the
// rows are; each row's old and new collections can be twice a message of codec.max-bytes.
func EachHistory(ctx context.Context, q db.Executor, flid string, after int64, limit int, bound RowBound, fn func(Change) error) error {
	return eachChange(ctx, q, "history of "+flid, "flid = $1 AND msg_id > $2", "msg_id", limit, bound, fn, flid, after)
}

// EachChangeOf calls fn with what message msgID did to each flight it wrote, by FLID (at most
// limit), their changes within bound (EachHistory).
func EachChangeOf(ctx context.Context, q db.Executor, msgID int64, limit int, bound RowBound, fn func(Change) error) error {
	return eachChange(ctx, q, fmt.Sprintf("changes of msg %d", msgID), "msg_id = $1", "flid", limit, bound, fn, msgID)
}

// eachChange reads up to limit rows of flight_change matching where (its arguments $1…), in
// order, and calls fn with each. The size counted is pg_column_size, the size as stored
// (compressed and out of line when large), which PostgreSQL reads without decompressing the
// value, so counting costs nothing per row; a row past the bound is sent without its changes.
func eachChange(ctx context.Context, q db.Executor, what, where, order string, limit int, bound RowBound, fn func(Change) error, args ...any) error {
	n := len(args)
	sql := `SELECT msg_id, flid, msg_type, styp, cause, state, version,
			CASE WHEN before < $` + strconv.Itoa(n+2) + ` THEN changes END, superseded, events, written_at
		FROM (SELECT *, coalesce(sum(least(pg_column_size(changes), $` + strconv.Itoa(n+3) + `)) OVER (ORDER BY ` + order + `
				ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
			FROM (SELECT ` + changeColumns + ` FROM flight_change WHERE ` + where + `
				ORDER BY ` + order + ` LIMIT $` + strconv.Itoa(n+1) + `) l) w
		ORDER BY ` + order
	rows, err := q.Query(ctx, sql, append(args, limit, bound.Bytes, bound.RowBytes)...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := scanChange(rows)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
