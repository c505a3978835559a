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

// The bulk reads and writes of a schedule snapshot (R-SCHD-4): a package of thousands of
// flights is loaded and written in a fixed number of round trips, not two per flight. None of
// them locks rows: the caller holds the pipeline lock, which every writer of the flight tables
// (the pump, the history sweep, the dispatcher's version floor) takes, and a snapshot's batches are separate transactions, so
// a row lock would not outlive the first of them anyway.

// rowColumns is the select list of a flight_schd row, in the order scanRow reads it.
var rowColumns = func() string {
	cols := []string{"flid", "state", "state_version", "operation_day", "last_msg_id", "created_at", "updated_at", presentColumn, provenanceColumn}
	for _, s := range Scalars {
		cols = append(cols, strings.ToLower(s))
	}
	return strings.Join(cols, ", ")
}()

// scanRow reads one row of rowColumns led by the columns of lead into a flight without its
// details.
func scanRow(row pgx.CollectableRow, lead ...any) (flight.Flight, error) {
	f := flight.New("")
	vals := make([]*string, len(Scalars))
	var lastMsg *int64
	var present []string
	var prov []byte
	dest := append(lead, &f.FLID, &f.State, &f.Version, &f.OperationDay, &lastMsg, &f.CreatedAt, &f.UpdatedAt, &present, &prov)
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	if err := row.Scan(dest...); err != nil {
		return flight.Flight{}, err
	}
	if lastMsg != nil {
		f.LastMsgID = *lastMsg
	}
	var err error
	if f.Prov, err = readProvenance(prov, f.LastMsgID, f.State); err != nil {
		return flight.Flight{}, fmt.Errorf("flight %s: %w", f.FLID, err)
	}
	for i, v := range vals {
		if v != nil {
			f.Scalars[Scalars[i]] = *v
		}
	}
	for _, tag := range present {
		f.Collections[tag] = []flight.Item{}
	}
	return f, nil
}

// loadWhere loads the full states of the flight_schd rows matching where ($1 is arg), with
// their details in one more round trip, ordered by FLID. With a cache, the details of the row
// versions it holds come from it and those read are put in it; q is then the transaction of the
// pump holding the pipeline lock (see above), so no other writer commits between the two
// statements and the details read are those of the row versions read (D-18).
func loadWhere(ctx context.Context, q db.Executor, cache *DetailCache, what, where string, arg any) ([]flight.Flight, error) {
	rows, err := q.Query(ctx, `SELECT xmin, `+rowColumns+` FROM flight_schd WHERE `+where+` ORDER BY flid`, arg)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	out, xmins, err := scanVersions(rows)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	flights := make([]*flight.Flight, len(out))
	for i := range out {
		flights[i] = &out[i]
	}
	if err := completeDetails(ctx, q, cache, flights, xmins); err != nil {
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	return out, nil
}

// scanVersions reads rows of xmin and rowColumns into flights without their details, and the
// row versions they were read as.
func scanVersions(rows pgx.Rows) ([]flight.Flight, []uint32, error) {
	var xmins []uint32
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (flight.Flight, error) {
		var xmin uint32
		f, err := scanRow(row, &xmin)
		xmins = append(xmins, xmin)
		return f, err
	})
	return out, xmins, err
}

// completeDetails adds to flights, read as the row versions xmins, their details: from cache
// where it holds the version, the others read in one statement and put in cache.
func completeDetails(ctx context.Context, q db.Executor, cache *DetailCache, flights []*flight.Flight, xmins []uint32) error {
	read := map[string]*flight.Flight{}
	for i, f := range flights {
		if !cache.fill(f, xmins[i]) {
			read[f.FLID] = f
		}
	}
	if len(read) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, detailManySQL, slices.Collect(maps.Keys(read)))
	if err != nil {
		return fmt.Errorf("details: %w", err)
	}
	if err := scanDetails(rows, read); err != nil {
		return fmt.Errorf("details: %w", err)
	}
	for i, f := range flights {
		if read[f.FLID] != nil {
			cache.put(xmins[i], *f)
		}
	}
	return nil
}

// LoadMany reads the full states of the given FLIDs (DELETED ones included), ordered by FLID;
// unknown FLIDs are absent from the result. cache is the pump's DetailCache (loadWhere), or nil.
func LoadMany(ctx context.Context, q db.Executor, cache *DetailCache, flids []string) ([]flight.Flight, error) {
	if len(flids) == 0 {
		return nil, nil
	}
	return loadWhere(ctx, q, cache, fmt.Sprintf("%d flights", len(flids)), `flid = ANY($1)`, flids)
}

// LoadDays reads the full states of every flight of the given operation days (dates; DELETED
// ones included), ordered by FLID: the flights a schedule snapshot of those days replaces.
// cache is the pump's DetailCache (loadWhere), or nil.
func LoadDays(ctx context.Context, q db.Executor, cache *DetailCache, days []time.Time) ([]flight.Flight, error) {
	if len(days) == 0 {
		return nil, nil
	}
	dates := make([]string, len(days))
	for i, d := range days {
		dates[i] = d.Format(time.DateOnly)
	}
	return loadWhere(ctx, q, cache, "the flights of "+strings.Join(dates, ","), `operation_day = ANY($1::date[])`, dates)
}

// ChildrenOfMany reads the full states of every flight whose MAID names one of masters
// (DELETED ones included, a self-reference excluded), ordered by FLID. cache is the pump's
// DetailCache (loadWhere), or nil.
func ChildrenOfMany(ctx context.Context, q db.Executor, cache *DetailCache, masters []string) ([]flight.Flight, error) {
	if len(masters) == 0 {
		return nil, nil
	}
	return loadWhere(ctx, q, cache, fmt.Sprintf("the children of %d flights", len(masters)), `maid = ANY($1) AND flid <> maid`, masters)
}

// detailManySQL is detailSQL for a set of FLIDs ($1, an array), with the FLID in front.
var detailManySQL = detailQuery("flid, ", "flid = ANY($1)")

// scanDetails adds the detail rows of detailQuery("flid, ", …) to their flights.
func scanDetails(rows pgx.Rows, byFLID map[string]*flight.Flight) error {
	defer rows.Close()
	for rows.Next() {
		var flid, tag string
		var ordinal int
		var seq *string
		var fields map[string]*string
		if err := rows.Scan(&flid, &tag, &ordinal, &seq, &fields); err != nil {
			return fmt.Errorf("scan details: %w", err)
		}
		f := byFLID[flid]
		if f == nil {
			return fmt.Errorf("details: row for %s, which was not loaded", flid)
		}
		addDetail(f, tag, seq, fields)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("details: %w", err)
	}
	return nil
}

// addDetail adds one detail row, as detailSQL and detailManySQL return it, to its flight.
func addDetail(f *flight.Flight, tag string, seq *string, fields map[string]*string) {
	if raw, ok := strings.CutPrefix(tag, "RAW:"); ok {
		if v := fields["TEXT"]; v != nil {
			f.Raw[raw] = append(f.Raw[raw], *v)
		}
		return
	}
	it := flight.Item{Fields: make(map[string]string, len(fields))}
	if seq != nil {
		it.Seq = *seq
	}
	for k, v := range fields {
		if v != nil {
			it.Fields[k] = *v
		}
	}
	f.Collections[tag] = append(f.Collections[tag], it)
}

// SaveMany writes the full states of flights: each flight_schd row is upserted and every
// detail table is rewritten for their FLIDs from the merged result (delete, then insert in
// order; R-FLIGHT-3), in one round trip and the same few statements whatever their number
// (addSave), and it puts what it writes in cache (nil: none).
func SaveMany(ctx context.Context, tx pgx.Tx, cache *DetailCache, flights []flight.Flight) error {
	if len(flights) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(flights))
	for _, f := range flights {
		if seen[f.FLID] {
			// the deletes run before every insert: a second state would add to the first's details
			return errors.New("save flights: " + f.FLID + " given twice")
		}
		seen[f.FLID] = true
	}
	batch := &pgx.Batch{}
	addSave(batch, cache, flights)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("save %d flights: %w", len(flights), err)
	}
	return nil
}

// detailTables lists every table holding a flight's details, sorted.
func detailTables() []string {
	tables := map[string]bool{"flight_raw_content": true}
	for _, c := range collections {
		tables[c.table] = true
	}
	return slices.Sorted(maps.Keys(tables))
}

// The three statements of LoadLocked, sent as one batch. Each takes its snapshot after the
// one before has its locks: the children are read once the target is held, so a child that
// the target's last holder added or moved in is seen (one statement for both, two CTEs under
// a UNION ALL, would scan the children in a snapshot taken before the target's lock wait).
// The rows come with their xmin, the version a DetailCache entry is checked against.
var (
	lockTargetSQL   = `SELECT xmin, ` + rowColumns + ` FROM flight_schd WHERE flid = $1 FOR UPDATE`
	lockChildrenSQL = `SELECT xmin, ` + rowColumns + ` FROM flight_schd WHERE maid = $1 AND flid <> $1 ORDER BY flid FOR UPDATE`
	// The FLIDs as an array, not "flid = $1 OR flid IN (…)": PostgreSQL scans every detail
	// table whole for the OR (EXPLAIN in docs/performance.md), and probes the key for ANY.
	familyDetailSQL = detailQuery("flid, ", "flid = ANY(ARRAY(SELECT $1::text UNION ALL SELECT flid FROM flight_schd WHERE maid = $1 AND flid <> $1))")
)

// LoadLocked reads, locked, the full state of one flight and of its code-share children
// (every flight whose MAID is flid, deleted ones included, ordered by FLID), as Load with
// forUpdate and Children do, in one round trip instead of two per flight plus one: the rows
// are locked by the first two statements before the third reads their details, so the
// details belong to the locked versions. cur is nil when the FLID is unknown.
//
// When cache holds the target, the third statement is left out and the details of the row
// versions read come from cache; those it does not hold (a version written elsewhere, a child
// it never saw) are read in one more round trip. What is read is put in cache.
func LoadLocked(ctx context.Context, tx pgx.Tx, cache *DetailCache, flid string) (cur *flight.Flight, children []flight.Flight, err error) {
	batch := &pgx.Batch{}
	var target []flight.Flight
	var targetXmin, childXmins []uint32
	batch.Queue(lockTargetSQL, flid).Query(func(rows pgx.Rows) error {
		target, targetXmin, err = scanVersions(rows)
		return err
	})
	batch.Queue(lockChildrenSQL, flid).Query(func(rows pgx.Rows) error {
		children, childXmins, err = scanVersions(rows)
		return err
	})
	family := func() []*flight.Flight {
		out := make([]*flight.Flight, 0, len(target)+len(children))
		for i := range target {
			out = append(out, &target[i])
		}
		for i := range children {
			out = append(out, &children[i])
		}
		return out
	}
	cached := cache.holds(flid)
	if !cached {
		batch.Queue(familyDetailSQL, flid).Query(func(rows pgx.Rows) error { return scanDetails(rows, byFLID(family())) })
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, nil, fmt.Errorf("load flight %s with its children: %w", flid, err)
	}
	xmins := append(targetXmin, childXmins...)
	if cached {
		if err := completeDetails(ctx, tx, cache, family(), xmins); err != nil {
			return nil, nil, fmt.Errorf("load flight %s with its children: %w", flid, err)
		}
	} else {
		for i, f := range family() {
			cache.put(xmins[i], *f)
		}
	}
	if len(target) == 0 {
		return nil, children, nil
	}
	return &target[0], children, nil
}

// byFLID indexes flights by FLID.
func byFLID(flights []*flight.Flight) map[string]*flight.Flight {
	m := make(map[string]*flight.Flight, len(flights))
	for _, f := range flights {
		m[f.FLID] = f
	}
	return m
}

// SameDetails reports whether a and b have the same detail rows, compared as detailRows stores
// them: the items of every stored collection in order, each by its sequence attribute (where
// the table has one) and the fields the table has columns for, an empty value as a missing one
// (both are NULL); and the raw content by tag. A state whose details are the stored ones needs
// its flight_schd row written alone (AddRows): deleting and inserting the same rows again
// leaves the tables as they were, at the price of most of a snapshot's writes (R-SCHD-4).
func SameDetails(a, b flight.Flight) bool {
	for _, tag := range flight.CollectionTags {
		c := collections[tag]
		x, y := a.Collections[tag], b.Collections[tag]
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if c.seq != "" && x[i].Seq != y[i].Seq {
				return false
			}
			for _, fl := range c.fields {
				if x[i].Fields[fl] != y[i].Fields[fl] {
					return false
				}
			}
		}
	}
	for tag, content := range a.Raw {
		if !slices.Equal(content, b.Raw[tag]) {
			return false
		}
	}
	for tag, content := range b.Raw {
		if len(content) > 0 && len(a.Raw[tag]) == 0 {
			return false
		}
	}
	return true
}

// LoadPublishedMany reads flights as ReadPublished does one at a time (a master with the MAFL
// of its children), in the order of flids, in four round trips whatever their number; unknown
// FLIDs are absent. No row is locked: the caller holds the pipeline lock (the consistency
// sentinel's pages, R-PROJ-1).
func LoadPublishedMany(ctx context.Context, q db.Executor, flids []string) ([]flight.Flight, error) {
	loaded, err := LoadMany(ctx, q, nil, flids)
	if err != nil {
		return nil, err
	}
	var masters []string
	for _, f := range loaded {
		if !flight.IsChild(f) {
			masters = append(masters, f.FLID)
		}
	}
	kids, err := ChildrenOfMany(ctx, q, nil, masters)
	if err != nil {
		return nil, err
	}
	kidsOf := map[string][]flight.Flight{}
	for _, k := range kids {
		kidsOf[k.Scalars["MAID"]] = append(kidsOf[k.Scalars["MAID"]], k)
	}
	byFLID := make(map[string]flight.Flight, len(loaded))
	for _, f := range loaded {
		if !flight.IsChild(f) {
			f = flight.Published(f, kidsOf[f.FLID])
		}
		byFLID[f.FLID] = f
	}
	out := make([]flight.Flight, 0, len(loaded))
	for _, flid := range flids {
		if f, ok := byFLID[flid]; ok {
			out = append(out, f)
		}
	}
	return out, nil
}
