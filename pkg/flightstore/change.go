package flightstore

import (
	"context"
	"encoding/json"
	"fmt"
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
	for _, p := range []struct {
		raw []byte
		to  any
	}{{diffs, &c.Changes}, {sups, &c.Superseded}, {events, &c.Events}} {
		if err := json.Unmarshal(p.raw, p.to); err != nil {
			return Change{}, fmt.Errorf("flight change of %s at msg %d: %w", c.FLID, c.MsgID, err)
		}
	}
	return c, nil
}

// History returns up to limit rows of flid's change history after message after, in ID order
// (the primary key serves it).
func History(ctx context.Context, q db.Executor, flid string, after int64, limit int) ([]Change, error) {
	return queryChanges(ctx, q, "history of "+flid,
		`SELECT `+changeColumns+` FROM flight_change WHERE flid = $1 AND msg_id > $2 ORDER BY msg_id LIMIT $3`, flid, after, limit)
}

// ChangesOf returns what message msgID did to each flight it wrote, by FLID (at most limit).
func ChangesOf(ctx context.Context, q db.Executor, msgID int64, limit int) ([]Change, error) {
	return queryChanges(ctx, q, fmt.Sprintf("changes of msg %d", msgID),
		`SELECT `+changeColumns+` FROM flight_change WHERE msg_id = $1 ORDER BY flid LIMIT $2`, msgID, limit)
}

func queryChanges(ctx context.Context, q db.Executor, what, sql string, args ...any) ([]Change, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scanChange)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
