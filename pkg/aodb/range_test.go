package aodb_test

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
)

func TestInRanges(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	in := openInbox(t, my, 5*time.Second)
	for range 12 {
		my.InsertInbox(t, "<MSG/>", nil)
	}
	ids := func(rows []aodb.Row) []int64 {
		var out []int64
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	ranges := [][2]int64{{2, 3}, {6, 6}, {9, 11}, {20, 30}}
	tests := []struct {
		after int64
		limit int
		want  []int64
	}{
		{after: 0, limit: 100, want: []int64{2, 3, 6, 9, 10, 11}},
		{after: 0, limit: 3, want: []int64{2, 3, 6}},
		{after: 6, limit: 2, want: []int64{9, 10}},
		{after: 11, limit: 100, want: nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("after %d limit %d", tt.after, tt.limit), func(t *testing.T) {
			rows, err := in.InRanges(t.Context(), ranges, tt.after, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(rows); !slices.Equal(got, tt.want) {
				t.Errorf("ids = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := in.InRanges(t.Context(), make([][2]int64, aodb.MaxRanges+1), 0, 10); err == nil {
		t.Error("more than MaxRanges ranges were accepted")
	}
}

func TestRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"data too long", fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1406}), true},
		{"command denied", &mysql.MySQLError{Number: 1142}, true},
		{"lock wait timeout", &mysql.MySQLError{Number: 1205}, false},
		{"too many connections", &mysql.MySQLError{Number: 1040}, false},
		{"broken connection", mysql.ErrInvalidConn, false},
		{"read-only after a failover", &mysql.MySQLError{Number: 1290}, false},
		{"server shutdown", &mysql.MySQLError{Number: 1053}, false},
		{"query interrupted", &mysql.MySQLError{Number: 1317}, false},
		{"timeout", errors.New("context deadline exceeded"), false},
	}
	for _, tt := range tests {
		if got := aodb.Rejected(tt.err); got != tt.want {
			t.Errorf("%s: Rejected = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A marker UPDATE blocked on a row lock longer than the inbox timeout must fail on the server
// too: if only the client gave up, the server would still write the marker after the backfill
// had recorded a failure and released its gate.
func TestAbandonedMarkerWriteNeverLandsLater(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	id := my.InsertInbox(t, "<MSG/>", nil)
	in := openInbox(t, my, 2*time.Second)
	blocker, err := my.Admin.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(`SELECT CMINMSGS_ID FROM cminmsgs WHERE CMINMSGS_ID = ? FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Mark(t.Context(), id, time.Now(), "PROCESSED"); err == nil {
		t.Fatal("Mark succeeded while the row was locked")
	}
	if err := blocker.Commit(); err != nil {
		t.Fatal(err)
	}
	settled(t, my)
	var processed sql.NullTime
	if err := my.Admin.QueryRow(`SELECT CMINMSGS_DATE_PROCESSED FROM cminmsgs WHERE CMINMSGS_ID = ?`, id).Scan(&processed); err != nil {
		t.Fatal(err)
	}
	if processed.Valid {
		t.Errorf("the abandoned marker write landed after the lock was released: %v", processed.Time)
	}
}

// A row's text is read a part at a time, counted in characters: a multi-byte character is
// never split, and the length is the whole text's.
func TestRawPart(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	in := openInbox(t, my, 5*time.Second)
	id := my.InsertInbox(t, "<MSG>北京首都</MSG>", nil)
	tests := []struct {
		offset, limit int64
		want          string
	}{
		{0, 100, "<MSG>北京首都</MSG>"},
		{0, 6, "<MSG>北"},
		{5, 4, "北京首都"},
		{9, 100, "</MSG>"},
		{15, 10, ""},
		{40, 10, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("offset %d limit %d", tt.offset, tt.limit), func(t *testing.T) {
			text, chars, err := in.RawPart(t.Context(), id, tt.offset, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if text != tt.want || chars != 15 {
				t.Errorf("RawPart = %q, %d; want %q, 15", text, chars, tt.want)
			}
		})
	}
	if _, _, err := in.RawPart(t.Context(), id+1, 0, 10); !errors.Is(err, aodb.ErrRowMissing) {
		t.Errorf("a missing row: %v, want ErrRowMissing", err)
	}
}
