package projection_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/testkit/redistest"
)

func state(flid string, v int64, estt string) flight.Flight {
	f := flight.New(flid)
	f.Version = v
	f.Scalars["ESTT"] = estt
	return f
}

// stored returns the projected document's ESTT and version, or ok=false when there is none.
func stored(t *testing.T, r *redistest.Redis, flid string) (estt string, version int64, ok bool) {
	t.Helper()
	raw, err := r.Client.Get(context.Background(), projection.FlightKey(r.Prefix, flid)).Result()
	if errors.Is(err, redis.Nil) {
		return "", 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ESTT          string
		STATE_VERSION int64
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.ESTT, doc.STATE_VERSION, true
}

// TestVersionCAS guards R-INV-16.
func TestVersionCAS(t *testing.T) {
	r := redistest.New(t)
	p := projection.New(r.Client, r.Prefix, 5*time.Second)
	ctx := context.Background()
	write := func(fs ...flight.Flight) int {
		t.Helper()
		n, err := p.Write(ctx, flight.Project(fs))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	if n := write(state("F1", 2, "A")); n != 1 {
		t.Fatalf("first write applied %d", n)
	}
	if n := write(state("F1", 1, "OLD")); n != 0 {
		t.Errorf("a stale write was applied")
	}
	if estt, v, _ := stored(t, r, "F1"); estt != "A" || v != 2 {
		t.Errorf("after stale write: %s v%d, want A v2", estt, v)
	}
	// Equal version rewrites: the re-run of a message after a crash restores a lost document.
	if err := r.Client.Del(ctx, projection.FlightKey(r.Prefix, "F1")).Err(); err != nil {
		t.Fatal(err)
	}
	if n := write(state("F1", 2, "A")); n != 1 {
		t.Errorf("equal version not rewritten")
	}
	if estt, v, ok := stored(t, r, "F1"); !ok || estt != "A" || v != 2 {
		t.Errorf("after equal rewrite: %s v%d %v", estt, v, ok)
	}
	// Deletion removes the document and keeps the version: an older write cannot resurrect it.
	del := state("F1", 3, "A")
	del.State = flight.Deleted
	if n := write(del); n != 1 {
		t.Fatalf("delete not applied")
	}
	if _, _, ok := stored(t, r, "F1"); ok {
		t.Errorf("deleted flight still projected")
	}
	if n := write(state("F1", 2, "A")); n != 0 {
		t.Errorf("an older write resurrected a deleted flight")
	}
	if _, _, ok := stored(t, r, "F1"); ok {
		t.Errorf("deleted flight came back")
	}
	if v, err := r.Client.HGet(ctx, projection.VersionKey(r.Prefix), "F1").Int64(); err != nil || v != 3 {
		t.Errorf("kept version = %d (%v), want 3", v, err)
	}
	// A newer state (a schedule re-adding the FLID) is accepted again.
	if n := write(state("F1", 4, "B")); n != 1 {
		t.Errorf("newer write after deletion not applied")
	}
	if estt, v, _ := stored(t, r, "F1"); estt != "B" || v != 4 {
		t.Errorf("after re-add: %s v%d", estt, v)
	}
	// Several flights in one call, each judged on its own version.
	if n := write(state("F2", 1, "X"), state("F1", 3, "STALE")); n != 1 {
		t.Errorf("mixed batch applied %d, want 1", n)
	}
}

func TestWriteBounded(t *testing.T) {
	r := redistest.New(t)
	p := projection.New(r.Client, r.Prefix, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Write(ctx, flight.Project([]flight.Flight{state("F1", 1, "A")})); err == nil {
		t.Errorf("a cancelled write reported success")
	}
}

// Many states in one call go in pipelines, each still judged by the CAS, and a server that
// lost its script cache (SCRIPT FLUSH, a restart) gets the script again. On a server of the
// test's own: the flush would touch every other user of the shared one.
func TestWriteManyPipelined(t *testing.T) {
	r := redistest.Own(t)
	ctx := context.Background()
	p := projection.New(r.Client, r.Prefix, 5*time.Second)
	many := make([]flight.Flight, 1200) // more than two pipelines
	for i := range many {
		many[i] = state(fmt.Sprintf("F%04d", i), 2, "A")
	}
	if n, err := p.Write(ctx, flight.Project(many)); err != nil || n != len(many) {
		t.Fatalf("applied %d of %d: %v", n, len(many), err)
	}
	if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	many[0] = state("F0000", 1, "STALE")
	many[1199] = state("F1199", 3, "B")
	many[1199].State = flight.Deleted
	if n, err := p.Write(ctx, flight.Project(many)); err != nil || n != len(many)-1 {
		t.Fatalf("after the flush applied %d of %d: %v", n, len(many)-1, err)
	}
	if estt, v, ok := stored(t, r, "F0000"); !ok || estt != "A" || v != 2 {
		t.Errorf("F0000 = %s v%d %v, want the newer A v2 kept", estt, v, ok)
	}
	if _, _, ok := stored(t, r, "F1199"); ok {
		t.Error("the deleted F1199 is still projected")
	}
	if _, v, ok := stored(t, r, "F0600"); !ok || v != 2 {
		t.Errorf("F0600 = v%d %v", v, ok)
	}
}
