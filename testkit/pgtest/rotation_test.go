package pgtest_test

import (
	"testing"

	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// Two synchronous failovers in a row, as a long chaos run makes them: the killed primary is
// rebuilt as the promoted one's synchronous standby, so the second kill loses nothing either,
// and the multi-host DSN reaches whichever node is the primary now, on timelines 2 then 3.
func TestReplicatedRotation(t *testing.T) {
	r := pgtest.OwnReplicated(t, pgtest.Sync)
	conn := connect(t, r.DSN())
	if _, err := conn.Exec(t.Context(), `CREATE TABLE t (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	want := 0
	for i, next := range []*pgtest.Node{r.Standby, r.Primary} {
		if _, err := r.PromoteCurrent(t.Context()); err == nil {
			t.Fatal("PromoteCurrent before KillCurrent made a second primary")
		}
		if _, err := connect(t, r.DSN()).Exec(t.Context(), `INSERT INTO t SELECT generate_series($1::int + 1, $1::int + 500)`, want); err != nil {
			t.Fatal(err)
		}
		want += 500
		if _, err := r.KillCurrent(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := r.PromoteCurrent(t.Context()); err != nil {
			t.Fatalf("failover %d: %v", i+1, err)
		}
		after := connect(t, r.DSN())
		if got := serverPort(t, after); got != next.Port {
			t.Fatalf("failover %d: the DSN reached port %d, want the promoted %s's %d", i+1, got, next.Name, next.Port)
		}
		var n int
		if err := after.QueryRow(t.Context(), `SELECT count(*) FROM t`).Scan(&n); err != nil || n != want {
			t.Fatalf("failover %d: %d rows, %v; want %d (synchronous: nothing lost)", i+1, n, err, want)
		}
		if tl := next.Timeline(t); tl != i+2 {
			t.Fatalf("failover %d: %s on timeline %d, want %d", i+1, next.Name, tl, i+2)
		}
		if err := r.Rebuild(t.Context()); err != nil {
			t.Fatalf("failover %d: rebuild: %v", i+1, err)
		}
	}
}
