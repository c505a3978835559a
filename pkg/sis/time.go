package sis

import (
	"errors"
	"fmt"
	"time"
)

// DefaultZone is the airport zone used when Options.Zone (or a zone argument) is nil: China
// Standard Time, UTC+8. It is a fixed zone rather than time.LoadLocation("Asia/Shanghai")
// because Asia/Shanghai has had no offset change since 1991, and a fixed zone needs no tzdata
// on the host and no file read per decode.
func DefaultZone() *time.Location { return time.FixedZone("CST", 8*60*60) }

// errTimeFormat is wrapped by ParseTime for every value it rejects.
var errTimeFormat = errors.New("not a SIS time (ddMMMyyHHmm, ddMMMyy or HHmm)")

// ParseTime parses a body time in zone (DefaultZone when nil):
//   - ddMMMyyHHmm (11 characters, e.g. 23JAN210535),
//   - ddMMMyy (7, midnight of that day),
//   - HHmm (4, seasonal route times; the date part is year 0, January 1 — callers combine it
//     with the day they apply it to).
//
// The month is the English three-letter abbreviation in any letter case. Two-digit years follow
// the POSIX/Go pivot: 69–99 are 19xx, 00–68 are 20xx.
func ParseTime(s string, zone *time.Location) (time.Time, error) {
	if zone == nil {
		zone = DefaultZone()
	}
	switch len(s) {
	case 11, 7:
		day, ok1 := digits2(s, 0)
		mon, ok2 := month(s[2:5])
		yy, ok3 := digits2(s, 5)
		if !ok1 || !ok2 || !ok3 {
			return time.Time{}, fmt.Errorf("%q: %w", s, errTimeFormat)
		}
		year := 2000 + yy
		if yy >= 69 {
			year = 1900 + yy
		}
		// The pivot decides which century a two-digit year is: FirstBodyYear..LastBodyYear.
		if day < 1 || day > daysIn(mon, year) {
			return time.Time{}, fmt.Errorf("%q: day out of range: %w", s, errTimeFormat)
		}
		hh, mm := 0, 0
		if len(s) == 11 {
			var ok bool
			if hh, mm, ok = hhmm(s[7:]); !ok {
				return time.Time{}, fmt.Errorf("%q: %w", s, errTimeFormat)
			}
		}
		return time.Date(year, mon, day, hh, mm, 0, 0, zone), nil
	case 4:
		hh, mm, ok := hhmm(s)
		if !ok {
			return time.Time{}, fmt.Errorf("%q: %w", s, errTimeFormat)
		}
		return time.Date(0, time.January, 1, hh, mm, 0, 0, zone), nil
	default:
		return time.Time{}, fmt.Errorf("%q: %w", s, errTimeFormat)
	}
}

// parseDTTM parses META.DTTM, yyyyMMddHHmmss, in zone.
func parseDTTM(s string, zone *time.Location) (time.Time, bool) {
	if len(s) != 14 {
		return time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	n := func(i, w int) int {
		v := 0
		for _, c := range []byte(s[i : i+w]) {
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, mon, day := n(0, 4), time.Month(n(4, 2)), n(6, 2)
	hh, mm, ss := n(8, 2), n(10, 2), n(12, 2)
	if mon < time.January || mon > time.December || day < 1 || day > daysIn(mon, year) ||
		hh > 23 || mm > 59 || ss > 59 {
		return time.Time{}, false
	}
	return time.Date(year, mon, day, hh, mm, ss, 0, zone), true
}

func hhmm(s string) (int, int, bool) {
	hh, ok1 := digits2(s, 0)
	mm, ok2 := digits2(s, 2)
	if !ok1 || !ok2 || hh > 23 || mm > 59 {
		return 0, 0, false
	}
	return hh, mm, true
}

func digits2(s string, i int) (int, bool) {
	a, b := s[i], s[i+1]
	if a < '0' || a > '9' || b < '0' || b > '9' {
		return 0, false
	}
	return int(a-'0')*10 + int(b-'0'), true
}

func month(s string) (time.Month, bool) {
	// ASCII upper-casing by hand: strings.ToUpper would allocate on every body time.
	var u [3]byte
	for i := 0; i < 3; i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		u[i] = c
	}
	switch string(u[:]) {
	case "JAN":
		return time.January, true
	case "FEB":
		return time.February, true
	case "MAR":
		return time.March, true
	case "APR":
		return time.April, true
	case "MAY":
		return time.May, true
	case "JUN":
		return time.June, true
	case "JUL":
		return time.July, true
	case "AUG":
		return time.August, true
	case "SEP":
		return time.September, true
	case "OCT":
		return time.October, true
	case "NOV":
		return time.November, true
	case "DEC":
		return time.December, true
	}
	return 0, false
}

func daysIn(m time.Month, year int) int {
	// Day 0 of the next month is the last day of m; computed in UTC so no zone transition can
	// shift it.
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// FirstBodyYear and LastBodyYear bound the years a body time (ddMMMyy…) can carry: two digits,
// read as 20yy below 69 and 19yy from 69 (ParseTime). A day of another year written in that form
// would be read back in the wrong century, so nothing outside them is ever written.
const (
	FirstBodyYear = 1969
	LastBodyYear  = 2068
)
