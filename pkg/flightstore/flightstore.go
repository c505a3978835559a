// Package flightstore holds the SQL of the flight family: flight_schd (scalars), the
// collection detail tables keyed (flid, ordinal), flight_route_point and flight_raw_content
// (R-FLIGHT-3). It loads and saves whole flight.Flight values; the merge rules live in
// package flight.
package flightstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// collections lists the stored collections by tag.
var collections = map[string]collection{
	"GTDT": {table: "flight_gtdt", seq: "gtno", fields: []string{"GATE", "PGOT", "PGCT", "GOTM", "GCTM", "GTYP"}},
	"CKDT": {table: "flight_ckdt", seq: "ckno", fields: []string{"CHKC", "CCLS", "PCOT", "PCCT", "COTM", "CCTM", "CTYP"}},
	"CLDT": {table: "flight_cldt", seq: "clno", fields: []string{"BELT", "BCLS", "PCOT", "PCCT", "FBAG", "LBAG", "BTYP"}},
	"CHDT": {table: "flight_chdt", seq: "chno", fields: []string{"CHUT", "CCLS", "PCBT", "PCET", "CBTM", "CETM", "CTYP"}},
	"PSDT": {table: "flight_psdt", seq: "psno", fields: []string{"PSST", "STST", "STET"}},
	"CHOT": {table: "flight_chot", seq: "csno", fields: []string{"CHTM", "CHID", "CHST"}},
	"DELY": {table: "flight_dely", fields: []string{"CODE", "STRT", "DURA", "TEXT"}},
	"ABTM": {table: "flight_abtm", seq: "asno", fields: []string{"ABDG", "ABOP", "AOTM"}},
	"ROUT": {table: "flight_route_point", seq: "rtno", fields: []string{"APCD", "SCAT", "SCDT"}, kind: "ROUT"},
	"ERUT": {table: "flight_route_point", seq: "rtno", fields: []string{"APCD", "SCAT", "SCDT"}, kind: "ERUT"},
}

// CollectionTags lists the stored collection tags, sorted.
func CollectionTags() []string {
	tags := make([]string, 0, len(collections))
	for t := range collections {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	return tags
}

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
	dest := []any{&f.State, &f.Version, &f.OperationDay, &lastMsg, &f.CreatedAt, &f.UpdatedAt, &present}
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	err := q.QueryRow(ctx, `SELECT state, state_version, operation_day, last_msg_id, created_at, updated_at, `+presentColumn+`, `+
		strings.Join(cols, ", ")+` FROM flight_schd WHERE flid = $1`+lock, flid).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load flight %s: %w", flid, err)
	}
	if lastMsg != nil {
		f.LastMsgID = *lastMsg
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

// Children loads, in the caller's transaction and locked, every flight whose MAID is master
// (deleted ones included), ordered by FLID: the MAFL of a master and the cascade of its
// deletion are decided on them (R-CODESHARE-2; the partial index on maid serves the lookup).
func Children(ctx context.Context, q db.Executor, master string) ([]flight.Flight, error) {
	rows, err := q.Query(ctx, `SELECT flid FROM flight_schd WHERE maid = $1 AND flid <> $1 ORDER BY flid FOR UPDATE`, master)
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
	for _, tag := range CollectionTags() {
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

// Save writes the full state of one flight: the flight_schd row is upserted and every detail
// table is rewritten for the FLID from the merged result (delete, then insert in order;
// R-FLIGHT-3).
func Save(ctx context.Context, tx pgx.Tx, f flight.Flight) error {
	// The row and its details go in one batch: one round trip per saved flight.
	batch := &pgx.Batch{}
	queueRow(batch, f)
	for _, t := range detailTables() {
		batch.Queue(`DELETE FROM `+t+` WHERE flid = $1`, f.FLID)
	}
	queueDetails(batch, f)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("save flight %s: %w", f.FLID, err)
	}
	return nil
}

// queueRow queues the upsert of the flight_schd row.
func queueRow(batch *pgx.Batch, f flight.Flight) {
	cols := []string{"flid", "state", "state_version", "operation_day", "last_msg_id", "created_at", "updated_at", "deleted_at", presentColumn}
	var deletedAt *time.Time
	if f.State == flight.Deleted {
		t := f.UpdatedAt
		deletedAt = &t
	}
	present := make([]string, 0, len(f.Collections))
	for tag := range f.Collections {
		present = append(present, tag)
	}
	slices.Sort(present)
	args := []any{f.FLID, f.State, f.Version, f.OperationDay, f.LastMsgID, f.CreatedAt, f.UpdatedAt, deletedAt, present}
	for _, s := range Scalars {
		cols = append(cols, strings.ToLower(s))
		if v, ok := f.Scalars[s]; ok {
			args = append(args, v)
		} else {
			args = append(args, nil)
		}
	}
	ph := make([]string, len(cols))
	set := make([]string, 0, len(cols))
	for i, c := range cols {
		ph[i] = fmt.Sprintf("$%d", i+1)
		if c != "flid" && c != "created_at" {
			set = append(set, c+" = excluded."+c)
		}
	}
	batch.Queue(`INSERT INTO flight_schd (`+strings.Join(cols, ", ")+`) VALUES (`+strings.Join(ph, ", ")+`)
		ON CONFLICT (flid) DO UPDATE SET `+strings.Join(set, ", "), args...)
}

// queueDetails queues the inserts of every detail row, in order; the caller has queued the
// deletion of the old ones before.
func queueDetails(batch *pgx.Batch, f flight.Flight) {
	for _, tag := range CollectionTags() {
		c := collections[tag]
		for i, it := range f.Collections[tag] {
			cols := []string{"flid", "ordinal"}
			args := []any{f.FLID, i + 1}
			if c.kind != "" {
				cols = append(cols, "route_kind")
				args = append(args, c.kind)
			}
			if c.seq != "" {
				cols = append(cols, c.seq)
				args = append(args, nullable(it.Seq))
			}
			for _, fl := range c.fields {
				cols = append(cols, strings.ToLower(fl))
				args = append(args, nullable(it.Fields[fl]))
			}
			ph := make([]string, len(cols))
			for n := range cols {
				ph[n] = fmt.Sprintf("$%d", n+1)
			}
			batch.Queue(`INSERT INTO `+c.table+` (`+strings.Join(cols, ", ")+`) VALUES (`+strings.Join(ph, ", ")+`)`, args...)
		}
	}
	for _, tag := range slices.Sorted(maps.Keys(f.Raw)) {
		for i, content := range f.Raw[tag] {
			batch.Queue(`INSERT INTO flight_raw_content (flid, tag, ordinal, content) VALUES ($1, $2, $3, $4)`, f.FLID, tag, i+1, content)
		}
	}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// LoadPublished reads one flight as it is published (its Kafka KAFKA:schd value and Redis
// document): a master with the MAFL of its children. nil when the FLID is unknown.
func LoadPublished(ctx context.Context, q db.Executor, flid string) (*flight.Flight, error) {
	cur, err := Load(ctx, q, flid, false)
	if err != nil || cur == nil || flight.IsChild(*cur) {
		return cur, err
	}
	children, err := Children(ctx, q, flid)
	if err != nil {
		return nil, err
	}
	p := flight.Published(*cur, children)
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
