package mysqltest

import (
	"encoding/xml"
	"strconv"
	"strings"
	"time"
)

// meta is what upstream copies from a message's META into the cminmsgs subsystem columns. A
// field that does not fit its column is left NULL rather than failing the insert: malformed
// messages must still reach the inbox, since handling them is what the tests are about.
type meta struct {
	sender, typ, subtype any // string or nil
	seq                  any // int64 or nil
	sent                 any // time.Time or nil
}

func parseMeta(doc string) meta {
	var m meta
	var env struct {
		Meta struct {
			SNDR, SEQN, DTTM, TYPE, STYP string
		} `xml:"META"`
	}
	// A message in another encoding (GB18030) or not XML at all simply gets no META columns.
	if err := xml.Unmarshal([]byte(doc), &env); err != nil {
		return m
	}
	m.sender = varchar4(env.Meta.SNDR)
	m.typ = varchar4(env.Meta.TYPE)
	m.subtype = varchar4(env.Meta.STYP)
	// MEDIUMINT is signed 24-bit.
	if n, err := strconv.ParseInt(strings.TrimSpace(env.Meta.SEQN), 10, 64); err == nil && n >= -1<<23 && n < 1<<23 {
		m.seq = n
	}
	// DTTM is the sender's airport-local wall clock. It is stored as that wall clock, unshifted,
	// which is what upstream does; unlike CMINMSGS_DATE_RECEIVED it does not follow this
	// package's UTC convention, and nothing in the system reads it as an instant.
	if ts, err := time.Parse("20060102150405", strings.TrimSpace(env.Meta.DTTM)); err == nil {
		m.sent = ts
	}
	return m
}

func varchar4(s string) any {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 4 {
		return nil
	}
	return s
}
