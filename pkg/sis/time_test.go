package sis

import (
	"errors"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	shanghai := DefaultZone()
	utc := time.UTC
	tests := []struct {
		in   string
		zone *time.Location
		want time.Time
	}{
		{"23JAN210535", nil, time.Date(2021, 1, 23, 5, 35, 0, 0, shanghai)},
		{"15DEC031825", utc, time.Date(2003, 12, 15, 18, 25, 0, 0, utc)},
		{"29FEB240000", utc, time.Date(2024, 2, 29, 0, 0, 0, 0, utc)},
		{"31dec992359", utc, time.Date(1999, 12, 31, 23, 59, 0, 0, utc)}, // any letter case; 99 → 1999
		{"01Jan680000", utc, time.Date(2068, 1, 1, 0, 0, 0, 0, utc)},     // 68 → 2068
		{"10SEP20", utc, time.Date(2020, 9, 10, 0, 0, 0, 0, utc)},
		{"1330", utc, time.Date(0, 1, 1, 13, 30, 0, 0, utc)},
		{"0000", utc, time.Date(0, 1, 1, 0, 0, 0, 0, utc)},
	}
	for _, tc := range tests {
		got, err := ParseTime(tc.in, tc.zone)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", tc.in, err)
			continue
		}
		if !got.Equal(tc.want) {
			t.Errorf("ParseTime(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if _, off := got.Zone(); tc.zone == nil && off != 8*3600 {
			t.Errorf("ParseTime(%q) offset %d, want the default UTC+8", tc.in, off)
		}
	}
	for _, bad := range []string{
		"", "2021-01-23", "30FEB240000", "29FEB230000", "00JAN210000", "32JAN210000", "23XYZ210535",
		"23JAN212400", "23JAN211260", "2400", "1360", "12:3", "23JAN2", "23JAN21053", "23JAN2105355",
		"+3JAN210535", "23JAN21 535", "２３JAN21",
	} {
		if got, err := ParseTime(bad, nil); err == nil {
			t.Errorf("ParseTime(%q) = %v, want an error", bad, got)
		} else if !errors.Is(err, errTimeFormat) {
			t.Errorf("ParseTime(%q) error %v does not wrap errTimeFormat", bad, err)
		}
	}
}

func TestParseDTTM(t *testing.T) {
	zone := time.FixedZone("z", 8*3600)
	got, ok := parseDTTM("20021010090311", zone)
	if !ok || !got.Equal(time.Date(2002, 10, 10, 9, 3, 11, 0, zone)) {
		t.Errorf("parseDTTM = %v, %v", got, ok)
	}
	for _, bad := range []string{"2002101009031", "200210100903111", "20021310090311", "20021032090311", "20021010240000", "20021010096000", "20021010090360", "2002-10-10T09:0"} {
		if got, ok := parseDTTM(bad, zone); ok {
			t.Errorf("parseDTTM(%q) = %v, want rejection", bad, got)
		}
	}
}
