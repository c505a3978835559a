package request

import (
	"errors"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

func TestSpecValidateAndScope(t *testing.T) {
	d := func(s string) time.Time {
		v, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name  string
		spec  Spec
		scope string // "" = invalid
	}{
		{"one day", ScheduleSpec(d("2026-03-01"), d("2026-03-01")), "2026-03-01..2026-03-01"},
		{"seven days", ScheduleSpec(d("2026-03-01"), d("2026-03-07")), "2026-03-01..2026-03-07"},
		{"eight days", ScheduleSpec(d("2026-03-01"), d("2026-03-08")), ""},
		{"reversed", ScheduleSpec(d("2026-03-02"), d("2026-03-01")), ""},
		{"no days", Spec{Type: TypeRQFD}, ""},
		{"category", ReferenceSpec("GLST", ""), "GLST"},
		{"category with rtyp", ReferenceSpec("GLST", "GATE"), ""},
		{"unknown category", ReferenceSpec("XXXX", ""), ""},
		{"resource status", ReferenceSpec("RSTA", "GATE"), "RSTA:GATE"},
		{"resource status without type", ReferenceSpec("RSTA", ""), ""},
		{"resource status unknown type", ReferenceSpec("RSTA", "DOOR"), ""},
		{"unknown type", Spec{Type: "EROR"}, ""},
		// ddMMMyy: 9999-12-25 would go out as 25DEC99 and be read as 1999, 1900-02-28 as 2000.
		{"a year after the two-digit form's", ScheduleSpec(d("9999-12-25"), d("9999-12-25")), ""},
		{"a year before the two-digit form's", ScheduleSpec(d("1900-02-28"), d("1900-02-28")), ""},
		{"the last year of the form", ScheduleSpec(d("2068-12-31"), d("2068-12-31")), "2068-12-31..2068-12-31"},
		{"the first year of the form", ScheduleSpec(d("1969-01-01"), d("1969-01-01")), "1969-01-01..1969-01-01"},
	}
	for _, tc := range tests {
		err := tc.spec.Validate()
		switch {
		case tc.scope == "" && !errors.Is(err, ErrInvalid):
			t.Errorf("%s: Validate = %v, want ErrInvalid", tc.name, err)
		case tc.scope != "" && err != nil:
			t.Errorf("%s: Validate = %v", tc.name, err)
		case tc.scope != "" && tc.spec.Scope() != tc.scope:
			t.Errorf("%s: Scope = %q, want %q", tc.name, tc.spec.Scope(), tc.scope)
		}
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	timeout := 30 * time.Minute
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	sent := func(id int64, ago time.Duration) Request {
		return Request{ID: id, State: StateSent, SentAt: at(-ago)}
	}
	pending := Request{ID: 9, State: StatePending}
	expired := &Request{ID: 1, State: StateExpired, SentAt: at(-2 * time.Hour)}
	tests := []struct {
		name    string
		open    []Request
		expired *Request
		dttm    time.Time
		want    int64 // request ID, or 0 with skip
		skip    string
	}{
		{"nothing asked", nil, nil, now, 0, SkipNoOpenRequest},
		{"answers the sent request", []Request{sent(5, 10*time.Minute)}, nil, now.Add(-5 * time.Minute), 5, ""},
		{"DTTM within the skew before sent_at", []Request{sent(5, 10*time.Minute)}, nil, now.Add(-11 * time.Minute), 5, ""},
		{"DTTM beyond the skew before sent_at", []Request{sent(5, 10*time.Minute)}, nil, now.Add(-13 * time.Minute), 0, SkipOlderThanRequest},
		{"sent exactly timeout ago", []Request{sent(5, 30*time.Minute)}, nil, now, 0, SkipRequestExpired},
		{"sent just under timeout ago", []Request{sent(5, 30*time.Minute-time.Second)}, nil, now, 5, ""},
		{"only pending", []Request{pending}, nil, now, 0, SkipOlderThanRequest},
		{"late answer to an expired request", nil, expired, now, 0, SkipRequestExpired},
		{"answer older than the expired one too", nil, expired, now.Add(-3 * time.Hour), 0, SkipOlderThanRequest},
		{"expired one superseded by a pending one", []Request{pending}, expired, now.Add(-time.Hour), 0, SkipRequestExpired},
		{"oldest fitting of two overlapping", []Request{sent(3, 20*time.Minute), sent(4, 10*time.Minute)}, nil, now, 3, ""},
		{"the older one timed out, the newer fits", []Request{sent(3, 31*time.Minute), sent(4, 10*time.Minute)}, nil, now.Add(-5 * time.Minute), 4, ""},
		{"open one timed out, the other too old", []Request{sent(3, 40*time.Minute), sent(4, 5*time.Minute)}, nil, now.Add(-20 * time.Minute), 0, SkipRequestExpired},
	}
	for _, tc := range tests {
		i, skip := decide(tc.open, tc.expired, Answer{DTTM: tc.dttm}, now, timeout)
		var got int64
		if i >= 0 {
			got = tc.open[i].ID
		}
		if got != tc.want || skip != tc.skip {
			t.Errorf("%s: decide = request %d skip %q, want %d %q", tc.name, got, skip, tc.want, tc.skip)
		}
	}
}

// TestBodyYearsRoundTrip: every day of the years a body time can carry is read back as written
// (sis.FirstBodyYear..LastBodyYear), and the years just outside are not.
func TestBodyYearsRoundTrip(t *testing.T) {
	for y := sis.FirstBodyYear - 1; y <= sis.LastBodyYear+1; y++ {
		day := time.Date(y, 3, 1, 0, 0, 0, 0, time.UTC)
		back, err := sis.ParseTime(sis.FormatBodyTime(day), time.UTC)
		inside := y >= sis.FirstBodyYear && y <= sis.LastBodyYear
		if got := err == nil && back.Equal(day); got != inside {
			t.Errorf("%d: read back %v (%v), want a round trip %v", y, back, err, inside)
		}
	}
}

func TestLimitsCheckWindow(t *testing.T) {
	d := func(s string) time.Time {
		v, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-10 00:30 in Shanghai is still 2026-03-09 in UTC: today is the airport's day.
	today := time.Date(2026, 3, 10, 0, 30, 0, 0, shanghai)
	l := Limits{DayWindow: 31, MaxOpen: 50}
	tests := []struct {
		name string
		spec Spec
		ok   bool
	}{
		{"today", ScheduleSpec(d("2026-03-10"), d("2026-03-10")), true},
		{"the window's last day", ScheduleSpec(d("2026-04-04"), d("2026-04-10")), true},
		{"the window's first day", ScheduleSpec(d("2026-02-07"), d("2026-02-07")), true},
		{"a day after the window", ScheduleSpec(d("2026-04-05"), d("2026-04-11")), false},
		{"a day before the window", ScheduleSpec(d("2026-02-06"), d("2026-02-07")), false},
		{"years ahead", ScheduleSpec(d("2031-03-01"), d("2031-03-01")), false},
		{"a reference request has no days", ReferenceSpec("GLST", ""), true},
	}
	for _, tc := range tests {
		err := l.CheckWindow(tc.spec, today)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: CheckWindow = %v", tc.name, err)
		case !tc.ok && !errors.Is(err, ErrInvalid):
			t.Errorf("%s: CheckWindow = %v, want ErrInvalid", tc.name, err)
		}
	}
}

func TestLimitsCheckOpen(t *testing.T) {
	l := Limits{DayWindow: 31, MaxOpen: 3}
	tests := []struct {
		others int
		ok     bool
	}{{0, true}, {2, true}, {3, false}, {40, false}}
	for _, tc := range tests {
		err := l.CheckOpen(tc.others)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%d others open: CheckOpen = %v", tc.others, err)
		case !tc.ok && !errors.Is(err, ErrTooManyOpen):
			t.Errorf("%d others open: CheckOpen = %v, want ErrTooManyOpen", tc.others, err)
		}
	}
}
