package api

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/pkg/flight"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// A cut ends on a character boundary, whatever byte the bound falls on: the answer must stay
// valid UTF-8 (proto3 strings), and a value at the bound is whole.
func TestCutKeepsCharacters(t *testing.T) {
	t.Parallel()
	v := strings.Repeat("登机口", 100) // 3 bytes a character
	for max := 1; max < 12; max++ {
		got, c := cut(v, max)
		if !utf8.ValidString(got) || len(got) > max || len(got) != max/3*3 || c == nil ||
			c.GetBytes() != int64(len(v)) || c.GetKeptBytes() != int64(len(got)) || len(c.GetSha256()) != 64 {
			t.Errorf("cut at %d: %q, %v", max, got, c)
		}
	}
	if got, c := cut(v, len(v)); got != v || c != nil {
		t.Errorf("a value of exactly the bound was cut: %v", c)
	}
}

// A row of many large parts is cut shorter until it fits a page, never below minValueBytes.
func TestFitEntryHalvesUntilTheRowFits(t *testing.T) {
	t.Parallel()
	const page = 64 << 10
	changes := map[string]flight.Change{}
	for i := range 40 {
		changes[fmt.Sprintf("P%02d", i)] = flight.Change{Old: strings.Repeat("o", 20<<10), New: strings.Repeat("n", 20<<10)}
	}
	e := &controlv1.FlightHistoryEntry{MsgId: 1}
	fitEntry(e, changes, page)
	if n := proto.Size(e); n > page {
		t.Errorf("a row of 40 parts of 2 × 20 KiB is %d bytes, over the page's %d", n, page)
	}
	for _, c := range e.GetChanges() {
		if len(c.GetOld()) < minValueBytes || c.GetOldCut().GetBytes() != 20<<10 {
			t.Fatalf("%s: kept %d bytes, cut %v", c.GetPart(), len(c.GetOld()), c.GetOldCut())
		}
	}
	// Far more parts than a page holds at minValueBytes each: the halving stops there.
	for i := range 200 {
		changes[fmt.Sprintf("Q%03d", i)] = flight.Change{New: strings.Repeat("n", 4<<10)}
	}
	fitEntry(e, changes, page)
	for _, c := range e.GetChanges() {
		if c.GetNewCut() != nil && len(c.GetNew()) < minValueBytes {
			t.Fatalf("%s: kept %d bytes, below %d", c.GetPart(), len(c.GetNew()), minValueBytes)
		}
	}
}
