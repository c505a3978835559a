package refstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/reference/referencetest"
	"github.com/msgexchange/msgexchange/pkg/refstore"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

var t0 = time.Date(2024, 3, 15, 1, 0, 0, 0, time.UTC)

func inTx(t *testing.T, d *pgtest.DB, fn func(tx pgx.Tx) error) {
	t.Helper()
	if err := db.WithTx(t.Context(), d.Pool, fn); err != nil {
		t.Fatal(err)
	}
}

func rec(key, name string) refstore.Record {
	return refstore.Record{RKey: key, Payload: map[string]any{"CCOD": key, "CNMC": name}}
}

func keys(t *testing.T, d *pgtest.DB, rtype string) []string {
	t.Helper()
	es, err := refstore.List(t.Context(), d.Pool, rtype, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.RKey)
	}
	return out
}

func TestReplaceIsScopedToItsRType(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	src := func(id int64) refstore.Source {
		return refstore.Source{MsgID: id, Batch: "b", At: t0.Add(time.Duration(id) * time.Minute)}
	}
	inTx(t, d, func(tx pgx.Tx) error {
		if _, err := refstore.Replace(ctx, tx, "CLST", []refstore.Record{rec("C1", "柜台1"), rec("C2", "柜台2"), rec("C3", "柜台3")}, src(1)); err != nil {
			return err
		}
		_, err := refstore.Replace(ctx, tx, "CHLT", []refstore.Record{rec("C1", "滑槽1"), rec("C2", "滑槽2")}, src(2))
		return err
	})
	// A new CLST batch without C1 and C3: they go from CLST, CHLT's C1 stays.
	var removed int64
	inTx(t, d, func(tx pgx.Tx) error {
		var err error
		removed, err = refstore.Replace(ctx, tx, "CLST", []refstore.Record{rec("C2", "柜台二"), rec("C4", "柜台4")}, src(3))
		return err
	})
	if removed != 2 {
		t.Errorf("removed %d, want 2", removed)
	}
	if got := keys(t, d, "CLST"); !slices.Equal(got, []string{"C2", "C4"}) {
		t.Errorf("CLST = %v, want [C2 C4]", got)
	}
	if got := keys(t, d, "CHLT"); !slices.Equal(got, []string{"C1", "C2"}) {
		t.Errorf("CHLT = %v, want [C1 C2] (untouched)", got)
	}
	clst, err := refstore.Get(ctx, d.Pool, "CLST", "C2")
	if err != nil {
		t.Fatal(err)
	}
	chlt, err := refstore.Get(ctx, d.Pool, "CHLT", "C2")
	if err != nil {
		t.Fatal(err)
	}
	if !jsonHas(t, clst.Payload, "CNMC", "柜台二") || clst.MsgID != 3 || !clst.RefreshedAt.Equal(src(3).At) {
		t.Errorf("CLST C2 = %s msg %d at %s", clst.Payload, clst.MsgID, clst.RefreshedAt)
	}
	if !jsonHas(t, chlt.Payload, "CNMC", "滑槽2") || chlt.MsgID != 2 {
		t.Errorf("CHLT C2 = %s msg %d, want its own record", chlt.Payload, chlt.MsgID)
	}
	// An empty batch empties its category only.
	inTx(t, d, func(tx pgx.Tx) error { _, err := refstore.Replace(ctx, tx, "CLST", nil, src(4)); return err })
	if got := keys(t, d, "CLST"); len(got) != 0 {
		t.Errorf("CLST after an empty batch = %v", got)
	}
	if got := keys(t, d, "CHLT"); len(got) != 2 {
		t.Errorf("CHLT after CLST's empty batch = %v", got)
	}
}

func jsonHas(t *testing.T, raw json.RawMessage, key, want string) bool {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m[key] == want
}

func TestUpsertDeleteAndProgress(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	src := refstore.Source{MsgID: 10, Batch: "AODB|GLST|ADD|1", At: t0}
	inTx(t, d, func(tx pgx.Tx) error {
		if last, err := refstore.CategoryProgress(ctx, tx, "GLST"); err != nil || last != 0 {
			t.Errorf("progress of a new category = %d, %v", last, err)
		}
		g := func(k, v string) refstore.Record {
			return refstore.Record{RKey: k, Payload: map[string]any{"GCOD": k, "PIER": v}}
		}
		if err := refstore.Upsert(ctx, tx, "GLST", []refstore.Record{g("G1", "A"), g("G2", ""), g("G1", "B")}, src); err != nil {
			return err
		}
		return refstore.Advance(ctx, tx, "GLST", "ADD", src, false, 0)
	})
	g1, err := refstore.Get(ctx, d.Pool, "GLST", "G1")
	if err != nil || !jsonHas(t, g1.Payload, "PIER", "B") || g1.Batch != src.Batch || g1.PublishedAt != nil {
		t.Errorf("G1 = %+v, %v: want the last record of the key, its batch, no publication yet", g1, err)
	}
	if g2, _ := refstore.Get(ctx, d.Pool, "GLST", "G2"); !jsonHas(t, g2.Payload, "PIER", "") {
		t.Errorf("G2 = %s: an empty tag is kept as empty", g2.Payload)
	}
	var n int64
	inTx(t, d, func(tx pgx.Tx) error {
		var err error
		n, err = refstore.Delete(ctx, tx, "GLST", []string{"G1", "G9"})
		if err != nil {
			return err
		}
		return refstore.Advance(ctx, tx, "GLST", "DEL", refstore.Source{MsgID: 11, At: t0}, false, 0)
	})
	if n != 1 {
		t.Errorf("deleted %d, want 1", n)
	}
	if _, err := refstore.Get(ctx, d.Pool, "GLST", "G1"); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("G1 after DEL: %v, want not found", err)
	}
	inTx(t, d, func(tx pgx.Tx) error {
		last, err := refstore.CategoryProgress(ctx, tx, "GLST")
		if err == nil && last != 11 {
			t.Errorf("progress = %d, want 11", last)
		}
		if err != nil {
			return err
		}
		return refstore.Advance(ctx, tx, "GLST", "DNLD", refstore.Source{MsgID: 12, Batch: "p", At: t0.Add(time.Hour)}, true, 1)
	})
	if g2, _ := refstore.Get(ctx, d.Pool, "GLST", "G2"); g2.PublishedAt == nil || !g2.PublishedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("publication = %v, want the DNLD's time", g2.PublishedAt)
	}
}

func TestListPages(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	var recs []refstore.Record
	for _, k := range []string{"b", "B", "a", "A1", "c"} {
		recs = append(recs, refstore.Record{RKey: k, Payload: map[string]any{}})
	}
	inTx(t, d, func(tx pgx.Tx) error {
		_, err := refstore.Replace(ctx, tx, "TLST", recs, refstore.Source{MsgID: 1, At: t0})
		return err
	})
	var got []string
	after := ""
	for range 10 {
		page, err := refstore.List(ctx, d.Pool, "TLST", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			got = append(got, e.RKey)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].RKey
	}
	if !slices.Equal(got, []string{"A1", "B", "a", "b", "c"}) {
		t.Errorf("pages = %v, want every key once in byte order", got)
	}
}

// TestAvailabilityFunctionMatchesTheRule runs the window cases of pkg/reference against the
// read model's SQL function: admin-api and the pump's rule must agree.
func TestAvailabilityFunctionMatchesTheRule(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := context.Background()
	for i, tc := range referencetest.WindowCases() {
		t.Run(tc.Name, func(t *testing.T) {
			rsid := "G" + string(rune('A'+i))
			events := slices.Clone(tc.Events)
			for j := range events {
				events[j].RSID = rsid
			}
			if len(events) > 0 {
				inTx(t, d, func(tx pgx.Tx) error { return refstore.AddEvents(ctx, tx, events, "b", t0) })
			}
			st, err := refstore.StatusAt(ctx, d.Pool, "GATE", rsid, tc.At)
			if err != nil {
				t.Fatal(err)
			}
			if st.Available != tc.Available {
				t.Errorf("available = %v, want %v", st.Available, tc.Available)
			}
			var gov int64
			if st.Governing != nil {
				gov = st.Governing.MsgID
			}
			if gov != tc.Governing {
				t.Errorf("governing msg %d, want %d", gov, tc.Governing)
			}
			if st.Known != (len(events) > 0) {
				t.Errorf("known = %v with %d events", st.Known, len(events))
			}
		})
	}
}
