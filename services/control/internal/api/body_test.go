package api

import (
	"fmt"
	"testing"
)

// The kept text is cut by characters, as the inbox cuts its own: a chunk never splits a
// multi-byte character, and the count is the whole text's.
func TestRunes(t *testing.T) {
	t.Parallel()
	const text = "<MSG>北京首都</MSG>"
	tests := []struct {
		offset, limit int64
		want          string
	}{
		{0, 100, text},
		{0, 6, "<MSG>北"},
		{5, 4, "北京首都"},
		{6, 1, "京"},
		{9, 100, "</MSG>"},
		{9, 6, "</MSG>"},
		{15, 10, ""},
		{40, 10, ""},
		{0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("offset %d limit %d", tt.offset, tt.limit), func(t *testing.T) {
			got, n := runes(text, tt.offset, tt.limit)
			if got != tt.want || n != 15 {
				t.Errorf("runes = %q, %d; want %q, 15", got, n, tt.want)
			}
		})
	}
}
