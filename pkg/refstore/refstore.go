// Package refstore holds the SQL of the reference family (the R-REF rules, R-RSTA-4): ref_master (the 13
// categories), ref_category (per-category progress and publication), ref_resource_event (RSTA)
// and the read model views admin-api reads (ref_effective, ref_resource_availability). The
// rules deciding what is written live in package reference.
package refstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/reference"
)

// Record is one reference record to write.
type Record struct {
	RKey    string
	Payload map[string]any
}

// Source is where written records come from: every record keeps its message, batch and
// refresh time.
type Source struct {
	MsgID int64
	// Batch names the message that carried the record (its business identity).
	Batch string
	At    time.Time
}

// Entry is one stored record as the read model shows it.
type Entry struct {
	RType, RKey string
	Payload     json.RawMessage
	MsgID       int64
	Batch       string
	RefreshedAt time.Time
	// PublishedAt is the category's last full publication (DNLD/RESP); nil if none yet.
	PublishedAt *time.Time
}

// CategoryProgress locks the category's progress row and returns the newest message applied
// to the category (0 when none). The lock keeps a category's check and write in one order even
// if another writer appeared.
func CategoryProgress(ctx context.Context, tx pgx.Tx, rtype string) (int64, error) {
	var last int64
	err := tx.QueryRow(ctx, `SELECT last_msg_id FROM ref_category WHERE rtype = $1 FOR UPDATE`, rtype).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("ref category %s: %w", rtype, err)
	}
	return last, nil
}

// Advance records that src's message (styp) was applied to the category; a full publication
// (count records) also becomes the category's last publication.
func Advance(ctx context.Context, tx pgx.Tx, rtype, styp string, src Source, published bool, count int) error {
	var pubMsg *int64
	var pubBatch *string
	var pubAt *time.Time
	var pubCount *int
	if published {
		pubMsg, pubBatch, pubAt, pubCount = &src.MsgID, &src.Batch, &src.At, &count
	}
	_, err := tx.Exec(ctx, `INSERT INTO ref_category AS c (rtype, last_msg_id, last_styp, updated_at,
			published_msg_id, published_batch, published_at, published_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (rtype) DO UPDATE SET last_msg_id = excluded.last_msg_id, last_styp = excluded.last_styp,
			updated_at = excluded.updated_at,
			published_msg_id = coalesce(excluded.published_msg_id, c.published_msg_id),
			published_batch = coalesce(excluded.published_batch, c.published_batch),
			published_at = coalesce(excluded.published_at, c.published_at),
			published_count = coalesce(excluded.published_count, c.published_count)`,
		rtype, src.MsgID, styp, src.At, pubMsg, pubBatch, pubAt, pubCount)
	if err != nil {
		return fmt.Errorf("ref category %s: advance: %w", rtype, err)
	}
	return nil
}

// Replace publishes recs as the whole of rtype: they are upserted and every other record of
// rtype is removed; other categories are untouched. It returns how many records were removed.
// The caller has checked the batch (reference.CheckBatch): keys are unique.
func Replace(ctx context.Context, tx pgx.Tx, rtype string, recs []Record, src Source) (int64, error) {
	keys, payloads, err := columns(recs)
	if err != nil {
		return 0, err
	}
	// NOT IN over a subquery is a hashed anti-join; rkey <> ALL(array) would compare every
	// stored key with every batch key (an ARPT download holds thousands).
	tag, err := tx.Exec(ctx, `DELETE FROM ref_master WHERE rtype = $1 AND rkey NOT IN (SELECT unnest($2::text[]))`, rtype, keys)
	if err != nil {
		return 0, fmt.Errorf("ref %s: remove records absent from the batch: %w", rtype, err)
	}
	if err := upsert(ctx, tx, rtype, keys, payloads, src); err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// Upsert writes each record with all its fields (ADD, UPD), in order: a key given twice ends
// with its last record.
func Upsert(ctx context.Context, tx pgx.Tx, rtype string, recs []Record, src Source) error {
	for _, r := range recs {
		keys, payloads, err := columns([]Record{r})
		if err != nil {
			return err
		}
		if err := upsert(ctx, tx, rtype, keys, payloads, src); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the keys of rtype (DEL) and returns how many existed.
func Delete(ctx context.Context, tx pgx.Tx, rtype string, keys []string) (int64, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM ref_master WHERE rtype = $1 AND rkey = ANY($2::text[])`, rtype, keys)
	if err != nil {
		return 0, fmt.Errorf("ref %s: delete: %w", rtype, err)
	}
	return tag.RowsAffected(), nil
}

func columns(recs []Record) ([]string, []string, error) {
	keys := make([]string, len(recs))
	payloads := make([]string, len(recs))
	for i, r := range recs {
		b, err := json.Marshal(r.Payload)
		if err != nil {
			return nil, nil, fmt.Errorf("ref %s: payload: %w", r.RKey, err)
		}
		keys[i], payloads[i] = r.RKey, string(b)
	}
	return keys, payloads, nil
}

func upsert(ctx context.Context, tx pgx.Tx, rtype string, keys, payloads []string, src Source) error {
	_, err := tx.Exec(ctx, `INSERT INTO ref_master (rtype, rkey, payload, source_msg_id, batch, refreshed_at)
		SELECT $1, k, p::jsonb, $4, $5, $6 FROM unnest($2::text[], $3::text[]) AS r (k, p)
		ON CONFLICT (rtype, rkey) DO UPDATE SET payload = excluded.payload, source_msg_id = excluded.source_msg_id,
			batch = excluded.batch, refreshed_at = excluded.refreshed_at`,
		rtype, keys, payloads, src.MsgID, src.Batch, src.At)
	if err != nil {
		return fmt.Errorf("ref %s: upsert: %w", rtype, err)
	}
	return nil
}

const entryColumns = `rtype, rkey, payload, source_msg_id, coalesce(batch, ''), refreshed_at, category_published_at`

func scanEntry(r pgx.CollectableRow) (Entry, error) {
	var e Entry
	err := r.Scan(&e.RType, &e.RKey, &e.Payload, &e.MsgID, &e.Batch, &e.RefreshedAt, &e.PublishedAt)
	return e, err
}

// Get reads one record from the read model; db.ErrNotFound when rtype has no such key.
func Get(ctx context.Context, q db.Executor, rtype, rkey string) (Entry, error) {
	rows, err := q.Query(ctx, `SELECT `+entryColumns+` FROM ref_effective WHERE rtype = $1 AND rkey = $2`, rtype, rkey)
	if err != nil {
		return Entry{}, fmt.Errorf("ref %s %s: %w", rtype, rkey, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEntry)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Entry{}, fmt.Errorf("ref %s %s: %w", rtype, rkey, db.ErrNotFound)
	case err != nil:
		return Entry{}, fmt.Errorf("ref %s %s: %w", rtype, rkey, err)
	}
	return e, nil
}

// List reads up to limit records of rtype with a key after after, in key order (keyset
// pagination: a deep page costs what the first does).
func List(ctx context.Context, q db.Executor, rtype, after string, limit int) ([]Entry, error) {
	rows, err := q.Query(ctx, `SELECT `+entryColumns+` FROM ref_effective
		WHERE rtype = $1 AND rkey COLLATE "C" > $2 ORDER BY rkey COLLATE "C" LIMIT $3`, rtype, after, limit)
	if err != nil {
		return nil, fmt.Errorf("ref %s list: %w", rtype, err)
	}
	out, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return nil, fmt.Errorf("ref %s list: %w", rtype, err)
	}
	return out, nil
}

// AddEvents appends resource status events (RSTA) received at at, in the order sent.
func AddEvents(ctx context.Context, tx pgx.Tx, events []reference.Event, batch string, at time.Time) error {
	for _, e := range events {
		if _, err := tx.Exec(ctx, `INSERT INTO ref_resource_event (rtyp, rsid, msg_id, ordinal, stat, effective_from, ends_at,
				strt, endt, batch, received_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			e.RTYP, e.RSID, e.MsgID, e.Ordinal, e.STAT, e.From, e.End, e.STRT, e.ENDT, batch, at); err != nil {
			return fmt.Errorf("ref resource %s %s: %w", e.RTYP, e.RSID, err)
		}
	}
	return nil
}

// LastEventMsg returns the newest message that carried an event of the resource (0 when none).
func LastEventMsg(ctx context.Context, q db.Executor, rtyp, rsid string) (int64, error) {
	var last int64
	if err := q.QueryRow(ctx, `SELECT coalesce(max(msg_id), 0) FROM ref_resource_event WHERE rtyp = $1 AND rsid = $2`,
		rtyp, rsid).Scan(&last); err != nil {
		return 0, fmt.Errorf("ref resource %s %s: %w", rtyp, rsid, err)
	}
	return last, nil
}

// Status is a resource's availability at an instant as the read model answers it.
type Status struct {
	RTYP, RSID string
	Available  bool
	// Governing is the event in force; nil when none has taken effect (available by default,
	// or the resource has no event at all).
	Governing *reference.Event
	Batch     string
	// ReceivedAt is when the governing event was applied.
	ReceivedAt *time.Time
	// Known says the resource has at least one status event.
	Known bool
}

// StatusAt answers a resource's availability at t through ref_resource_availability_at, the
// function admin-api reads, so the control API and admin-api give the same answer. A
// resource without any event is available (the default) and not Known.
func StatusAt(ctx context.Context, q db.Executor, rtyp, rsid string, t time.Time) (Status, error) {
	st := Status{RTYP: rtyp, RSID: rsid, Available: true}
	var (
		stat, batch *string
		from, ends  *time.Time
		msg         *int64
	)
	err := q.QueryRow(ctx, `SELECT available, stat, effective_from, ends_at, source_msg_id, batch, received_at
		FROM ref_resource_availability_at($3) WHERE rtyp = $1 AND rsid = $2`, rtyp, rsid, t).
		Scan(&st.Available, &stat, &from, &ends, &msg, &batch, &st.ReceivedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return st, nil
	case err != nil:
		return Status{}, fmt.Errorf("ref resource %s %s at %s: %w", rtyp, rsid, t, err)
	}
	st.Known = true
	if stat != nil {
		ev := reference.Event{RTYP: rtyp, RSID: rsid, STAT: *stat, From: *from, End: ends, MsgID: *msg}
		st.Governing, st.Batch = &ev, *batch
	}
	return st, nil
}
