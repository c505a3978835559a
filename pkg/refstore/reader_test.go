package refstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/msgexchange/msgexchange/pkg/reference"
	"github.com/msgexchange/msgexchange/pkg/refstore"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// readerTables is what msgx_reader may read (docs/reference-data.md): the flight tables and
// the reference read model, nothing of the pipeline.
var readerTables = []string{
	"flight_abtm", "flight_chdt", "flight_chot", "flight_ckdt", "flight_cldt", "flight_dely", "flight_gtdt",
	"flight_history", "flight_psdt", "flight_raw_content", "flight_route_point", "flight_schd",
	"ref_effective", "ref_resource_availability",
}

// TestReaderRole connects as msgx_reader, the role admin-api uses: it reads the flight state
// and the read model, and is refused every write and every other table.
func TestReaderRole(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	inTx(t, d, func(tx pgx.Tx) error {
		if _, err := refstore.Replace(ctx, tx, "GLST", []refstore.Record{{RKey: "G17", Payload: map[string]any{"GCOD": "G17", "PIER": "C"}}},
			refstore.Source{MsgID: 5, Batch: "b", At: t0}); err != nil {
			return err
		}
		end := time.Now().Add(time.Hour)
		return refstore.AddEvents(ctx, tx, []reference.Event{{RTYP: "GATE", RSID: "G17", STAT: "D",
			From: time.Now().Add(-time.Hour), End: &end, MsgID: 6, Ordinal: 1}}, "b", t0)
	})
	d.Exec(t, `INSERT INTO flight_schd (flid, created_at, updated_at) VALUES ('F1', now(), now())`)

	var grants []string
	rows, err := d.Pool.Query(ctx, `SELECT table_name || ':' || privilege_type FROM information_schema.role_table_grants
		WHERE grantee = 'msgx_reader' AND table_catalog = current_database() ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if grants, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tbl := range readerTables {
		want = append(want, tbl+":SELECT")
	}
	if !slices.Equal(grants, want) {
		t.Errorf("msgx_reader grants\n got %v\nwant %v", grants, want)
	}

	cfg, err := pgx.ParseConfig(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User = "msgx_reader"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect as msgx_reader: %v", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var pier, flid string
	if err := conn.QueryRow(ctx, `SELECT payload->>'PIER' FROM ref_effective WHERE rtype = 'GLST' AND rkey = 'G17'`).Scan(&pier); err != nil || pier != "C" {
		t.Errorf("reader reads ref_effective: %q, %v", pier, err)
	}
	if err := conn.QueryRow(ctx, `SELECT flid FROM flight_schd`).Scan(&flid); err != nil || flid != "F1" {
		t.Errorf("reader reads flight_schd: %q, %v", flid, err)
	}
	var avail, availAt bool
	if err := conn.QueryRow(ctx, `SELECT available FROM ref_resource_availability WHERE rtyp = 'GATE' AND rsid = 'G17'`).Scan(&avail); err != nil || avail {
		t.Errorf("reader reads ref_resource_availability: available=%v, %v; want false inside the window", avail, err)
	}
	if err := conn.QueryRow(ctx, `SELECT available FROM ref_resource_availability_at(now() + interval '2 hours') WHERE rsid = 'G17'`).
		Scan(&availAt); err != nil || !availAt {
		t.Errorf("reader calls ref_resource_availability_at: available=%v, %v; want true after the window", availAt, err)
	}

	refused := []string{
		`INSERT INTO flight_schd (flid, created_at, updated_at) VALUES ('F2', now(), now())`,
		`UPDATE flight_schd SET state_version = 2`,
		`DELETE FROM flight_gtdt`,
		`SELECT * FROM ref_master`,
		`SELECT * FROM ref_resource_event`,
		`SELECT * FROM proc_state`,
		`SELECT * FROM msg_event`,
		`UPDATE ref_master SET payload = '{}'`,
		`CREATE TABLE reader_owned (x int)`,
		`TRUNCATE flight_schd`,
	}
	for _, sql := range refused {
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" { // insufficient_privilege
			t.Errorf("as msgx_reader %q: %v, want permission denied", sql, err)
		}
	}
	// The views are not updatable at all, whoever asks.
	if _, err := conn.Exec(ctx, `DELETE FROM ref_effective`); err == nil {
		t.Error("as msgx_reader DELETE FROM ref_effective succeeded")
	}
	var n int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM flight_schd`).Scan(&n); err != nil || n != 1 {
		t.Errorf("flight_schd rows after the refused writes = %d, %v", n, err)
	}
}
