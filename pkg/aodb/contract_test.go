package aodb_test

import (
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
)

// The contract reads on the real server: markers found by time within a batch's ID range (a
// marker in the same second as since counts, since DATETIME keeps no fractions), and the
// marked/unmarked state of the rows above W.
func TestContractReads(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	in := openInbox(t, my, 5*time.Second)
	var ids []int64
	for range 6 {
		ids = append(ids, my.InsertInbox(t, "<MSG/>", nil))
	}
	since := time.Date(2026, 3, 1, 12, 0, 0, 700_000_000, time.UTC)
	mark := func(id int64, at time.Time) {
		if _, err := my.Admin.ExecContext(t.Context(), `UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ? WHERE CMINMSGS_ID = ?`, at, id); err != nil {
			t.Fatal(err)
		}
	}
	mark(ids[1], since.Add(-time.Hour))       // before the watch: not ours
	mark(ids[2], since.Truncate(time.Second)) // the same second
	mark(ids[4], since.Add(time.Minute))      // after
	mark(ids[5], since.Add(2*time.Minute))    // after, outside the range asked below

	tests := []struct {
		after, through int64
		wantID         int64 // 0: none
		wantAt         time.Time
	}{
		{ids[0], ids[4], ids[2], since.Truncate(time.Second)},
		{ids[2], ids[4], ids[4], since.Add(time.Minute).Truncate(time.Second)}, // stored without fractions
		{ids[0], ids[1], 0, time.Time{}},
		{ids[2], ids[3], 0, time.Time{}},
	}
	for _, tt := range tests {
		id, at, found, err := in.FirstMarkedSince(t.Context(), tt.after, tt.through, since)
		if err != nil {
			t.Fatal(err)
		}
		if found != (tt.wantID != 0) || id != tt.wantID || (found && !at.Equal(tt.wantAt)) {
			t.Errorf("FirstMarkedSince(%d, %d] = %d at %v (found %v), want %d at %v", tt.after, tt.through, id, at, found, tt.wantID, tt.wantAt)
		}
	}

	states := func(after, through int64, limit int) []aodb.MarkState {
		t.Helper()
		got, err := in.MarkStates(t.Context(), after, through, limit)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := []aodb.MarkState{{ids[1], true}, {ids[2], true}, {ids[3], false}, {ids[4], true}, {ids[5], true}}
	if got := states(ids[0], 0, 100); !slices.Equal(got, want) {
		t.Errorf("MarkStates after %d = %v, want %v", ids[0], got, want)
	}
	if got := states(ids[0], ids[3], 100); !slices.Equal(got, want[:3]) {
		t.Errorf("MarkStates (%d, %d] = %v, want %v", ids[0], ids[3], got, want[:3])
	}
	if got := states(ids[0], 0, 2); !slices.Equal(got, want[:2]) {
		t.Errorf("MarkStates limit 2 = %v, want %v", got, want[:2])
	}
}
