package sis

import "strconv"

// Identity is the business identity SNDR|TYPE|STYP|SEQN (R-IDENT-1), with the operating-day
// boundary appended (|yyyyMMdd, the date of DTTM in DTTM's own location — the airport zone when
// Meta came from Decode) when includeDayBoundary (msgx.identity.include-day-boundary). It is the
// only identity function in the system: the key must never change once live.
//
// SEQN is the parsed integer, so "001243" and "1243" are the same message number.
func Identity(m Meta, includeDayBoundary bool) string {
	b := make([]byte, 0, len(m.SNDR)+len(m.TYPE)+len(m.STYP)+32)
	b = append(b, m.SNDR...)
	b = append(b, '|')
	b = append(b, m.TYPE...)
	b = append(b, '|')
	b = append(b, m.STYP...)
	b = append(b, '|')
	b = strconv.AppendInt(b, m.SEQN, 10)
	if includeDayBoundary {
		b = append(b, '|')
		b = m.DTTM.AppendFormat(b, "20060102")
	}
	return string(b)
}
