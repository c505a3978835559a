// Package flightstore holds the SQL of the flight family: flight_schd (scalars), the
// collection detail tables keyed (flid, ordinal), flight_route_point and flight_raw_content
// (R-FLIGHT-3). It loads and saves whole flight.Flight values; the merge rules live in
// package flight.
package flightstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
)

// Scalars lists the scalar tags stored as flight_schd columns (column = lower-case tag); the
// domain owns the list.
var Scalars = flight.Scalars

// collection maps a collection tag to its detail table and field columns.
type collection struct {
	table  string
	seq    string // column of the sequence attribute; "" when the element has none (DELY)
	fields []string
	kind   string // route_kind for flight_route_point
}

// tableOf names the detail table of each collection of the state (and the route_kind of the
// two that share flight_route_point).
var tableOf = map[string]struct{ table, kind string }{
	"GTDT": {table: "flight_gtdt"}, "CKDT": {table: "flight_ckdt"}, "CLDT": {table: "flight_cldt"},
	"CHDT": {table: "flight_chdt"}, "PSDT": {table: "flight_psdt"}, "CHOT": {table: "flight_chot"},
	"DELY": {table: "flight_dely"}, "ABTM": {table: "flight_abtm"},
	"ROUT": {table: "flight_route_point", kind: "ROUT"}, "ERUT": {table: "flight_route_point", kind: "ERUT"},
}

// collections lists the stored collections by tag. Their sequence attribute and field columns
// are the collection's definition in package flight, the fields its merge keeps (R-FLIGHT-3):
// one list for both, so no field is merged and published that the detail table cannot hold
// (issue #57: the difference was drift after every clean apply).
var collections = func() map[string]collection {
	out := make(map[string]collection, len(flight.CollectionTags))
	for _, tag := range flight.CollectionTags {
		def, _ := flight.CollectionOf(tag)
		t, ok := tableOf[tag]
		if !ok {
			panic("flightstore: no detail table for collection " + tag)
		}
		out[tag] = collection{table: t.table, seq: strings.ToLower(def.Seq), fields: def.Fields, kind: t.kind}
	}
	return out
}()

// Load reads the full state of one flight in the caller's transaction (one consistent read
// boundary, R-FLIGHT-8). It returns nil when the FLID is unknown.
func Load(ctx context.Context, q db.Executor, flid string, forUpdate bool) (*flight.Flight, error) {
	cols := make([]string, len(Scalars))
	for i, s := range Scalars {
		cols[i] = strings.ToLower(s)
	}
	lock := ""
	if forUpdate {
		lock = " FOR UPDATE"
	}
	f := flight.New(flid)
	vals := make([]*string, len(Scalars))
	var lastMsg *int64
	var present []string
	var prov []byte
	dest := []any{&f.State, &f.Version, &f.OperationDay, &lastMsg, &f.CreatedAt, &f.UpdatedAt, &present, &prov}
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	err := q.QueryRow(ctx, `SELECT state, state_version, operation_day, last_msg_id, created_at, updated_at, `+presentColumn+`, `+
		provenanceColumn+`, `+strings.Join(cols, ", ")+` FROM flight_schd WHERE flid = $1`+lock, flid).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load flight %s: %w", flid, err)
	}
	if lastMsg != nil {
		f.LastMsgID = *lastMsg
	}
	if f.Prov, err = readProvenance(prov, f.LastMsgID, f.State); err != nil {
		return nil, fmt.Errorf("load flight %s: %w", flid, err)
	}
	for i, v := range vals {
		if v != nil {
			f.Scalars[Scalars[i]] = *v
		}
	}
	// A collection sent as "no allocation now" has no detail rows but is still present.
	for _, tag := range present {
		f.Collections[tag] = []flight.Item{}
	}
	if err := loadDetails(ctx, q, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// presentColumn records which collections a flight has been sent, so an empty allocation
// ("no allocation now") survives a reload as an empty collection, not an absent one.
const presentColumn = "collections_present"

// provenanceColumn holds flight.Provenance as JSON (R-ORDER-1), written by the row's upsert.
const provenanceColumn = "provenance"

// readProvenance decodes a row's provenance. A row without one (stored before the column
// existed) or whose last_msg_id is not the one its provenance was written with (a writer that
// does not keep it, a previous release during an upgrade, changed the row since) is read
// conservatively: every part as written by its last applied message (R-ORDER-1).
func readProvenance(raw []byte, lastMsgID int64, state string) (flight.Provenance, error) {
	if raw == nil {
		return flight.Conservative(lastMsgID, state), nil
	}
	var p flight.Provenance
	if err := json.Unmarshal(raw, &p); err != nil {
		return flight.Provenance{}, fmt.Errorf("provenance: %w", err)
	}
	if p.Last != lastMsgID {
		return flight.Conservative(max(lastMsgID, p.Last), state), nil
	}
	return p, nil
}

// Children loads, in the caller's transaction and locked, every flight whose MAID is master
// (deleted ones included), ordered by FLID: the MAFL of a master and the cascade of its
// deletion are decided on them (R-CODESHARE-2; the partial index on maid serves the lookup).
func Children(ctx context.Context, q db.Executor, master string) ([]flight.Flight, error) {
	return children(ctx, q, master, " FOR UPDATE")
}

func children(ctx context.Context, q db.Executor, master, lock string) ([]flight.Flight, error) {
	rows, err := q.Query(ctx, `SELECT flid FROM flight_schd WHERE maid = $1 AND flid <> $1 ORDER BY flid`+lock, master)
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", master, err)
	}
	flids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", master, err)
	}
	out := make([]flight.Flight, 0, len(flids))
	for _, id := range flids {
		f, err := Load(ctx, q, id, false)
		if err != nil {
			return nil, err
		}
		if f != nil {
			out = append(out, *f)
		}
	}
	return out, nil
}

// detailSQL reads every detail row of one flight in one round trip: each collection row and
// each raw entry as (tag, ordinal, sequence, fields as JSON), in stored order.
var detailSQL = detailQuery("", "flid = $1")

// detailQuery is the detail read for the FLIDs that match, each row led by lead (a column list
// ending in a comma, or nothing).
func detailQuery(lead, match string) string {
	parts := make([]string, 0, len(collections)+1)
	for _, tag := range flight.CollectionTags {
		c := collections[tag]
		seq := "NULL::text"
		if c.seq != "" {
			seq = c.seq
		}
		kv := make([]string, 0, 2*len(c.fields))
		for _, fl := range c.fields {
			kv = append(kv, "'"+fl+"'", strings.ToLower(fl))
		}
		where := match
		if c.kind != "" {
			where += " AND route_kind = '" + c.kind + "'"
		}
		parts = append(parts, `SELECT `+lead+`'`+tag+`' AS tag, ordinal, `+seq+`, jsonb_build_object(`+strings.Join(kv, ", ")+`) FROM `+
			c.table+` WHERE `+where)
	}
	parts = append(parts, `SELECT `+lead+`'RAW:' || tag, ordinal, NULL::text, jsonb_build_object('TEXT', content) FROM flight_raw_content WHERE `+match)
	order := " ORDER BY 1, 2"
	if lead != "" {
		order += ", 3"
	}
	return strings.Join(parts, " UNION ALL ") + order
}

func loadDetails(ctx context.Context, q db.Executor, f *flight.Flight) error {
	rows, err := q.Query(ctx, detailSQL, f.FLID)
	if err != nil {
		return fmt.Errorf("load details of %s: %w", f.FLID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var tag string
		var ordinal int
		var seq *string
		var fields map[string]*string
		if err := rows.Scan(&tag, &ordinal, &seq, &fields); err != nil {
			return fmt.Errorf("scan details of %s: %w", f.FLID, err)
		}
		addDetail(f, tag, seq, fields)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load details of %s: %w", f.FLID, err)
	}
	return nil
}

// AddUpdates adds to batch the writes of the states next of one message's flights, and the
// history rows of changes that describe them (R-ORDER-8), where stored holds the states the
// flights have, read with their details and locked in the same transaction (LoadLocked); a
// flight stored holds none of is new, or was not loaded whole, and is written whole as SaveMany
// writes it. The flight_schd rows and the history rows are one statement (AddRows); of the
// detail tables, only those whose rows differ from the stored ones are cleared and rewritten.
// A FLOP changes one or two collections of a flight, if any, so the other tables are left
// alone: the server skips a ten-table delete and a rewrite of rows it already holds. The
// result is the same stored state as SaveMany's. A FLID given twice is written as its last state,
// as writes in turn would leave it (one upsert cannot change a row twice).
//
// cache (nil: none) is given the details written, for the row versions the upsert returns:
// they are the flights' details once the transaction commits, and a version that never commits
// is never read back, so nothing waits for the commit (DetailCache).
func AddUpdates(batch *pgx.Batch, cache *DetailCache, stored map[string]*flight.Flight, next []flight.Flight, changes []Change) {
	last := make(map[string]int, len(next))
	for i, f := range next {
		last[f.FLID] = i
	}
	unique := make([]flight.Flight, 0, len(last))
	for i, f := range next {
		if last[f.FLID] == i {
			unique = append(unique, f)
		}
	}
	AddRows(batch, cache, unique, changes)
	var whole []flight.Flight
	for _, f := range unique {
		prev := stored[f.FLID]
		if prev == nil || prev.FLID != f.FLID {
			whole = append(whole, f)
			continue
		}
		was, is := detailRows([]flight.Flight{*prev}), detailRows([]flight.Flight{f})
		for _, table := range detailTables() {
			if reflect.DeepEqual(was[table], is[table]) {
				continue
			}
			if was[table] != nil {
				batch.Queue(deleteDetailSQL[table], f.FLID)
			}
			if a := is[table]; a != nil {
				addDetailInsert(batch, table, a)
			}
		}
	}
	if len(whole) > 0 {
		addAllDetails(batch, whole)
	}
}

// deleteDetailSQL clears one flight's rows of one detail table, by table.
var deleteDetailSQL = func() map[string]string {
	m := map[string]string{}
	for _, t := range detailTables() {
		m[t] = `DELETE FROM ` + t + ` WHERE flid = $1`
	}
	return m
}()

// addSave adds the writes of flights in a fixed number of statements, whatever their
// count and their details: one upsert of their flight_schd rows, one statement clearing every
// detail table for them, then one multi-row insert per detail table that has rows to write.
// Each statement costs the server a parse, a plan lookup and an execution, so the statement
// count, not the row count, is what a single writer waits for. The caller makes the FLIDs
// unique (an upsert cannot change a row twice).
func addSave(batch *pgx.Batch, cache *DetailCache, flights []flight.Flight) {
	AddRows(batch, cache, flights, nil)
	addAllDetails(batch, flights)
}

// addAllDetails adds the rewrite of every detail table of flights: one statement clearing them
// all for the FLIDs, then one insert per table that has rows.
func addAllDetails(batch *pgx.Batch, flights []flight.Flight) {
	flids := make([]string, len(flights))
	for i, f := range flights {
		flids[i] = f.FLID
	}
	batch.Queue(deleteDetailsSQL, flids)
	addDetails(batch, flights)
}

// rowWriteColumns are the flight_schd columns an upsert writes, in the order of its arrays.
var rowWriteColumns = func() []string {
	cols := []string{"flid", "state", "state_version", "operation_day", "last_msg_id", "created_at", "updated_at", "deleted_at", presentColumn, provenanceColumn}
	for _, s := range Scalars {
		cols = append(cols, strings.ToLower(s))
	}
	return cols
}()

// upsertRowsSQL upserts the flight_schd rows given as one array per column. collections_present
// travels as a comma-joined text (an array of arrays would be flattened by unnest); the tags
// never contain a comma.
var upsertRowsSQL = func() string {
	types := []string{"text", "text", "bigint", "date", "bigint", "timestamptz", "timestamptz", "timestamptz", "text"}
	ph := make([]string, len(rowWriteColumns))
	sel := make([]string, len(rowWriteColumns))
	set := make([]string, 0, len(rowWriteColumns))
	for i, c := range rowWriteColumns {
		typ := "text"
		if i < len(types) {
			typ = types[i]
		}
		ph[i] = fmt.Sprintf("$%d::%s[]", i+1, typ)
		sel[i] = fmt.Sprintf("c%d", i+1)
		if c == presentColumn {
			sel[i] = fmt.Sprintf("string_to_array(c%d, ',')", i+1)
		}
		if c == provenanceColumn {
			sel[i] = fmt.Sprintf("c%d::jsonb", i+1) // text on the wire: an array of jsonb would be re-parsed per element anyway
		}
		if c != "flid" && c != "created_at" {
			set = append(set, c+" = excluded."+c)
		}
	}
	alias := make([]string, len(rowWriteColumns))
	for i := range alias {
		alias[i] = fmt.Sprintf("c%d", i+1)
	}
	return `INSERT INTO flight_schd (` + strings.Join(rowWriteColumns, ", ") + `) SELECT ` + strings.Join(sel, ", ") +
		` FROM unnest(` + strings.Join(ph, ", ") + `) AS r(` + strings.Join(alias, ", ") + `)
		ON CONFLICT (flid) DO UPDATE SET ` + strings.Join(set, ", ")
}()

// upsertRowsWithChangesSQL is upsertRowsSQL with the insert of history rows ahead of it, their
// arrays numbered after the rows': the two tables are independent (flight_change has no
// foreign key), so neither part can see or change what the other writes, and a data-modifying
// WITH part runs to completion whether or not the query reads it.
var upsertRowsWithChangesSQL = `WITH chg AS (` + insertChangesAt(len(rowWriteColumns)+1) + `) ` + upsertRowsSQL

// AddRows adds the upsert of the flight_schd rows of flights, and the insert of the history
// rows of changes (R-ORDER-8), as one statement (none for neither); the FLIDs are unique. Alone
// it writes states whose details are the stored ones (a write of the provenance only,
// R-ORDER-2). One statement fewer on the wire for every message that writes a flight; the
// server's CPU per FLOP measured the same as with two (docs/performance.md, "Domain cost").
//
// With a cache, the upsert returns each row's new version and the flights are put in cache as
// that version (DetailCache): the caller writes their details in the same transaction, or
// leaves the stored ones, which are theirs.
func AddRows(batch *pgx.Batch, cache *DetailCache, flights []flight.Flight, changes []Change) {
	returning := ""
	if cache != nil {
		returning = ` RETURNING flid, xmin`
	}
	var q *pgx.QueuedQuery
	switch {
	case len(flights) == 0 && len(changes) == 0:
	case len(changes) == 0:
		q = batch.Queue(upsertRowsSQL+returning, rowArgs(flights)...)
	case len(flights) == 0:
		batch.Queue(insertChangesSQL, changeArgs(changes)...)
	default:
		q = batch.Queue(upsertRowsWithChangesSQL+returning, append(rowArgs(flights), changeArgs(changes)...)...)
	}
	if q == nil || cache == nil {
		return
	}
	written := make(map[string]flight.Flight, len(flights))
	for _, f := range flights {
		written[f.FLID] = f
	}
	q.Query(func(rows pgx.Rows) error {
		var flid string
		var xmin uint32
		_, err := pgx.ForEachRow(rows, []any{&flid, &xmin}, func() error {
			cache.put(xmin, written[flid])
			return nil
		})
		return err
	})
}

// rowArgs are upsertRowsSQL's arrays for flights.
func rowArgs(flights []flight.Flight) []any {
	n := len(flights)
	flids, states, present, prov := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, lastMsgs := make([]int64, n), make([]int64, n)
	days, deletedAt := make([]*time.Time, n), make([]*time.Time, n)
	created, updated := make([]time.Time, n), make([]time.Time, n)
	scalars := make([][]*string, len(Scalars))
	for i := range scalars {
		scalars[i] = make([]*string, n)
	}
	for i, f := range flights {
		flids[i], states[i], versions[i], days[i], lastMsgs[i] = f.FLID, f.State, f.Version, f.OperationDay, f.LastMsgID
		created[i], updated[i] = f.CreatedAt, f.UpdatedAt
		if f.State == flight.Deleted {
			t := f.UpdatedAt
			deletedAt[i] = &t
		}
		tags := make([]string, 0, len(f.Collections))
		for tag := range f.Collections {
			tags = append(tags, tag)
		}
		slices.Sort(tags)
		present[i] = strings.Join(tags, ",")
		p := f.Prov
		p.Last = f.LastMsgID // the row's own: readProvenance trusts only a provenance written with it
		b, err := json.Marshal(p)
		if err != nil {
			panic(fmt.Sprintf("provenance of %s: %v", f.FLID, err)) // ints, strings and maps of them: cannot fail
		}
		prov[i] = string(b)
		for j, sc := range Scalars {
			if v, ok := f.Scalars[sc]; ok {
				scalars[j][i] = &v
			}
		}
	}
	args := []any{flids, states, versions, days, lastMsgs, created, updated, deletedAt, present, prov}
	for _, col := range scalars {
		args = append(args, col)
	}
	return args
}

// deleteDetailsSQL clears every detail table for the FLIDs in $1 in one statement.
var deleteDetailsSQL = func() string {
	tables := detailTables()
	parts := make([]string, 0, len(tables))
	for i, t := range tables[:len(tables)-1] {
		parts = append(parts, fmt.Sprintf("d%d AS (DELETE FROM %s WHERE flid = ANY($1))", i, t))
	}
	return `WITH ` + strings.Join(parts, ", ") + ` DELETE FROM ` + tables[len(tables)-1] + ` WHERE flid = ANY($1)`
}()

// detailTable is the multi-row insert of one detail table: the statement and the columns it
// takes, one array each.
type detailTable struct {
	sql  string
	cols int
}

// detailInserts holds the insert of every detail table, by table.
var detailInserts = func() map[string]detailTable {
	out := map[string]detailTable{}
	add := func(table string, cols []string) {
		ph := make([]string, len(cols))
		for i, c := range cols {
			typ := "text"
			if c == "ordinal" {
				typ = "integer"
			}
			ph[i] = fmt.Sprintf("$%d::%s[]", i+1, typ)
		}
		out[table] = detailTable{sql: `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) SELECT * FROM unnest(` +
			strings.Join(ph, ", ") + `)`, cols: len(cols)}
	}
	for _, tag := range flight.CollectionTags {
		c := collections[tag]
		if _, done := out[c.table]; done {
			continue
		}
		add(c.table, detailColumns(c))
	}
	add("flight_raw_content", []string{"flid", "ordinal", "tag", "content"})
	return out
}()

// detailColumns lists the columns a collection's rows are written with.
func detailColumns(c collection) []string {
	cols := []string{"flid", "ordinal"}
	if c.kind != "" {
		cols = append(cols, "route_kind")
	}
	if c.seq != "" {
		cols = append(cols, c.seq)
	}
	for _, fl := range c.fields {
		cols = append(cols, strings.ToLower(fl))
	}
	return cols
}

// addDetails adds the inserts of every detail row of flights, one statement per table
// that has rows, in stored order; the caller has added the deletion of the old ones before.
func addDetails(batch *pgx.Batch, flights []flight.Flight) {
	tables := detailRows(flights)
	for _, table := range slices.Sorted(maps.Keys(tables)) {
		addDetailInsert(batch, table, tables[table])
	}
}

// detailArrays are the rows of one detail table as one array per column: the ordinal column
// holds ints, every other one *string (NULL for an empty value).
type detailArrays struct {
	ordinals []int32
	text     [][]*string
}

func addDetailInsert(batch *pgx.Batch, table string, a *detailArrays) {
	// flid first, then the ordinal, then the rest in column order
	args := []any{a.text[0], a.ordinals}
	for _, col := range a.text[1:] {
		args = append(args, col)
	}
	batch.Queue(detailInserts[table].sql, args...)
}

// detailRows are the detail rows of flights by table, in stored order; a table without rows
// is absent.
func detailRows(flights []flight.Flight) map[string]*detailArrays {
	tables := map[string]*detailArrays{}
	get := func(table string) *detailArrays {
		a := tables[table]
		if a == nil {
			a = &detailArrays{text: make([][]*string, detailInserts[table].cols-1)}
			tables[table] = a
		}
		return a
	}
	str := func(s string) *string { return &s }
	for _, f := range flights {
		for _, tag := range flight.CollectionTags {
			c := collections[tag]
			if len(f.Collections[tag]) == 0 {
				continue
			}
			a := get(c.table)
			for i, it := range f.Collections[tag] {
				a.ordinals = append(a.ordinals, int32(i+1))
				vals := []*string{str(f.FLID)}
				if c.kind != "" {
					vals = append(vals, str(c.kind))
				}
				if c.seq != "" {
					vals = append(vals, nullable(it.Seq))
				}
				for _, fl := range c.fields {
					vals = append(vals, nullable(it.Fields[fl]))
				}
				for n, v := range vals {
					a.text[n] = append(a.text[n], v)
				}
			}
		}
		for _, tag := range slices.Sorted(maps.Keys(f.Raw)) {
			if len(f.Raw[tag]) == 0 {
				continue
			}
			a := get("flight_raw_content")
			for i, content := range f.Raw[tag] {
				a.ordinals = append(a.ordinals, int32(i+1))
				a.text[0] = append(a.text[0], str(f.FLID))
				a.text[1] = append(a.text[1], str(tag))
				a.text[2] = append(a.text[2], str(content))
			}
		}
	}
	return tables
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ReadPublished reads one flight as it is published (its Kafka KAFKA:schd value and Redis
// document): a master with the MAFL of its children; nil when the FLID is unknown. It takes no
// row lock: a reader in a read-only snapshot (the control service) must neither wait for the
// pump nor make it wait.
func ReadPublished(ctx context.Context, q db.Executor, flid string) (*flight.Flight, error) {
	cur, err := Load(ctx, q, flid, false)
	if err != nil || cur == nil || flight.IsChild(*cur) {
		return cur, err
	}
	kids, err := children(ctx, q, flid, "")
	if err != nil {
		return nil, err
	}
	p := flight.Published(*cur, kids)
	return &p, nil
}

// SampleFLIDs returns, in FLID order after after, up to limit FLIDs of the current state
// (ACTIVE and DELETED), each kept with probability ratio (all of them at ratio ≥ 1): the pages
// of a consistency check.
func SampleFLIDs(ctx context.Context, q db.Executor, after string, ratio float64, limit int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT flid FROM flight_schd WHERE flid > $1 AND ($2 >= 1 OR random() < $2)
		ORDER BY flid LIMIT $3`, after, ratio, limit)
	if err != nil {
		return nil, fmt.Errorf("sample flights after %q: %w", after, err)
	}
	flids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("sample flights after %q: %w", after, err)
	}
	return flids, nil
}

// Count returns the number of flights in the current state (ACTIVE and DELETED): what a job
// of every flight walks.
func Count(ctx context.Context, q db.Executor) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM flight_schd`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the flights: %w", err)
	}
	return n, nil
}

// Unknown returns those of flids that have no row in the current state.
func Unknown(ctx context.Context, q db.Executor, flids []string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT f FROM unnest($1::text[]) AS f
		WHERE NOT EXISTS (SELECT 1 FROM flight_schd WHERE flid = f)`, flids)
	if err != nil {
		return nil, fmt.Errorf("look up %d flights: %w", len(flids), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("look up %d flights: %w", len(flids), err)
	}
	return out, nil
}

// FLIDsByNumber returns the FLIDs of the current state with flight number flno (FLNO, as sent:
// CA1501) on an operation day, in FLID order (index flight_schd_operation_day). A day is a few
// thousand flights at most, so the flight number is a filter within it.
func FLIDsByNumber(ctx context.Context, q db.Executor, flno string, day time.Time) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT flid FROM flight_schd WHERE operation_day = $2 AND flno = upper($1) ORDER BY flid`,
		flno, day.Format(time.DateOnly))
	if err != nil {
		return nil, fmt.Errorf("flights %s on %s: %w", flno, day.Format(time.DateOnly), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("flights %s on %s: %w", flno, day.Format(time.DateOnly), err)
	}
	return out, nil
}

// CodeShareViolations returns the ACTIVE code-share children, by FLID, whose master is DELETED
// or was moved to flight_history while they stayed (R-CODESHARE-4, R-CODESHARE-5: never an
// active child under a deleted master), up to limit of them, and how many there are. A MAID
// naming a flight never seen is dangling, which R-CODESHARE-1 allows: not counted.
func CodeShareViolations(ctx context.Context, q db.Executor, limit int) (int, []string, error) {
	rows, err := q.Query(ctx, `SELECT c.flid, count(*) OVER () FROM flight_schd c LEFT JOIN flight_schd m ON m.flid = c.maid
		WHERE c.state = 'ACTIVE' AND c.maid IS NOT NULL AND c.maid <> c.flid
		  AND (m.state = 'DELETED' OR (m.flid IS NULL AND EXISTS (SELECT 1 FROM flight_history h WHERE h.flid = c.maid)))
		ORDER BY c.flid LIMIT $1`, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("code-share violations: %w", err)
	}
	var flids []string
	n := 0
	var flid string
	var total int
	if _, err := pgx.ForEachRow(rows, []any{&flid, &total}, func() error { flids = append(flids, flid); n = total; return nil }); err != nil {
		return 0, nil, fmt.Errorf("code-share violations: %w", err)
	}
	return n, flids, nil
}
