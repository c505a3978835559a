package api

import (
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/outbox"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// Answers bounded in bytes (docs/control.md, docs/security.md): a page of a list or history
// answer stops at control.page-bytes, and a value that alone would take a large share of a
// page (a flight_change's old or new collection, an event's payload, each up to the codec's
// 8 MiB) is cut to its head with its length and digest kept. Row counts alone bound nothing: six
// ADFTs of 6 MB made one default GetFlightHistory page 65.6 MB (issue #57).

// valueShare is the share of control.page-bytes one value may take: a page then always has room
// for a row with an old and a new value cut to it, and the row's other fields.
const valueShare = 8

// minValueBytes is the least of a value an answer keeps when a row's many parts make it cut
// them below a page's share (fitEntry): enough to show what the value is.
const minValueBytes = 512

// pageReserve is what a page keeps for the answer's fields besides its rows: the next page's
// cursor, a FLID.
const pageReserve = 512

// pageFill counts the bytes of a page as its rows are added; used starts at pageReserve, or at
// what the answer already holds.
type pageFill struct {
	limit, used, rows int
}

func newPageFill(limit int) pageFill { return pageFill{limit: limit, used: pageReserve} }

// add reports whether a row of msg's size fits the page and counts it if so. The first row
// always fits, so paging progresses whatever a row's size; a row alone is bounded by cutting
// its values (fitEntry, cutEvent).
func (p *pageFill) add(msg proto.Message) bool {
	// The row's bytes in the repeated field: its size, its tag and its length's varint.
	n := proto.Size(msg) + 1 + protoVarintLen(proto.Size(msg))
	if p.rows > 0 && p.used+n > p.limit {
		return false
	}
	p.used += n
	p.rows++
	return true
}

func protoVarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// valueCap is the most of one value a page of limit bytes holds.
func valueCap(limit int) int { return limit / valueShare }

// cut returns v whole when it has at most max bytes, else its head of at most max bytes (ending
// on a character boundary, so the answer stays valid UTF-8) and what was cut.
func cut(v string, max int) (string, *controlv1.Truncated) {
	if len(v) <= max {
		return v, nil
	}
	head := headOf(v, max)
	sum := sha256.Sum256([]byte(v))
	return head, &controlv1.Truncated{Bytes: int64(len(v)), KeptBytes: int64(len(head)), Sha256: hex.EncodeToString(sum[:])}
}

// headOf is v's head of at most max bytes, ending on a character boundary.
func headOf(v string, max int) string {
	if len(v) <= max {
		return v
	}
	n := max
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return v[:n]
}

// rowBound is how much of flight_change a page reads: about a page, each row counted as at most
// the old and new value of a part cut to a page's share, so the rows read whole are about
// those that fit the page once cut (a 12 MB row counts 256 KiB at the default).
func (s *Service) rowBound() flightstore.RowBound {
	return flightstore.RowBound{Bytes: s.cfg.PageBytes, RowBytes: 2 * valueCap(s.cfg.PageBytes)}
}

// eventPayload is an event's payload cut to max bytes: PostgreSQL already cut a long one to
// its head and gave the whole one's length and digest (outbox.ByMessageCut, ByKey), or the
// payload is whole and cut here.
func eventPayload(r outbox.Row, max int) (string, *controlv1.Truncated) {
	p := str(r.Payload)
	if r.PayloadSHA256 == "" {
		return cut(p, max)
	}
	head := headOf(p, max)
	return head, &controlv1.Truncated{Bytes: r.PayloadBytes, KeptBytes: int64(len(head)), Sha256: r.PayloadSHA256}
}

// fitPage returns the head of rows that fits a page of limit bytes (one row at least) and
// whether rows were left out; a list then ends its page at the last row kept and hands back
// that row's cursor.
func fitPage[M proto.Message](rows []M, limit int) ([]M, bool) {
	fill := newPageFill(limit)
	for i, r := range rows {
		if !fill.add(r) {
			return rows[:i], true
		}
	}
	return rows, false
}
