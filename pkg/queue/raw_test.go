package queue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// The raw text is kept compressed, the first copy stays, it is bound with the identity, and it
// goes with its proc_state row.
func TestRawTextKeptWithTheRecord(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	if _, err := queue.Enqueue(t.Context(), d.Pool, []queue.NewMessage{{MsgID: 1}, {MsgID: 2}, {MsgID: 3}}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.StoredRaw(t.Context(), d.Pool, 1); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("StoredRaw before anything was kept = %v, want ErrNotFound", err)
	}
	text := "<MSG>" + strings.Repeat("<GTDT><GATE>G12</GATE></GTDT>", 200) + "</MSG>"
	if err := queue.KeepRaw(t.Context(), d.Pool, 1, text, now); err != nil {
		t.Fatal(err)
	}
	if err := queue.KeepRaw(t.Context(), d.Pool, 1, "<MSG>other</MSG>", now); err != nil {
		t.Fatal(err)
	}
	if got, err := queue.StoredRaw(t.Context(), d.Pool, 1); err != nil || got != text {
		t.Fatalf("StoredRaw = %d bytes %v; want the first text kept", len(got), err)
	}
	var stored, bytes int
	if err := d.Pool.QueryRow(t.Context(), `SELECT length(raw_zstd), raw_bytes FROM proc_raw WHERE msg_id = 1`).Scan(&stored, &bytes); err != nil {
		t.Fatal(err)
	}
	if bytes != len(text) || stored*5 > bytes {
		t.Errorf("kept %d bytes for a %d-byte text (raw_bytes %d): not compressed", stored, len(text), bytes)
	}

	if _, err := queue.Bind(t.Context(), d.Pool, queue.Binding{MsgID: 2, Key: "AODB|FLOP|REMC|2", Type: "FLOP", Styp: "REMC",
		Raw: "<MSG>two</MSG>", Started: now, Now: now}); err != nil {
		t.Fatal(err)
	}
	if got, err := queue.StoredRaw(t.Context(), d.Pool, 2); err != nil || got != "<MSG>two</MSG>" {
		t.Fatalf("raw text bound with the identity: %q %v", got, err)
	}

	d.Exec(t, `DELETE FROM proc_state WHERE msg_id IN (1, 2)`)
	var left int
	if err := d.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_raw`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d raw texts outlived their records (%v)", left, err)
	}
}

// The kept text is read a part at a time, counted in characters as the inbox counts its own:
// a multi-byte character is never split, and the length is the whole text's.
func TestStoredRawPart(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	if _, err := queue.Enqueue(t.Context(), d.Pool, []queue.NewMessage{{MsgID: 1}, {MsgID: 2}}, now); err != nil {
		t.Fatal(err)
	}
	const text = "<MSG>北京首都</MSG>"
	if err := queue.KeepRaw(t.Context(), d.Pool, 1, text, now); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		offset, limit int64
		want          string
	}{
		{0, 100, text},
		{0, 6, "<MSG>北"},
		{5, 4, "北京首都"},
		{6, 1, "京"},
		{9, 6, "</MSG>"},
		{15, 10, ""},
		{40, 10, ""},
		{0, 0, ""},
	}
	for _, tt := range tests {
		got, n, err := queue.StoredRawPart(t.Context(), d.Pool, 1, tt.offset, tt.limit)
		if err != nil || got != tt.want || n != 15 {
			t.Errorf("StoredRawPart(%d, %d) = %q, %d, %v; want %q, 15", tt.offset, tt.limit, got, n, err, tt.want)
		}
	}
	if _, _, err := queue.StoredRawPart(t.Context(), d.Pool, 2, 0, 10); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("nothing kept: %v, want ErrNotFound", err)
	}
}
