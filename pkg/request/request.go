// Package request owns the req_track table: the upstream requests this system sends through
// COUTMSGS (RQFD, RQRD) and their lifecycle (the R-REQ rules):
//
//	PENDING → SENT → DONE
//	             └──→ EXPIRED
//
// Control registers a request (Register expires the older open one of the same type and scope
// in the same transaction); the dispatcher writes it to COUTMSGS and marks it SENT with the
// COUTMSGS_ID (MarkSent) and expires the unanswered ones (Expire); the pump's RESP processors
// close it (MatchOpen, Done) in the transaction that applied the answer. Each writer is the
// only writer of its transition (docs/architecture.md, "Who writes what").
//
// The pure rules (scopes, validation, the answer match) are in this file; the SQL is in
// store.go.
package request

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// The request types (req_track.req_type).
const (
	TypeRQFD = "RQFD" // flight data (a schedule) for a range of days
	TypeRQRD = "RQRD" // reference data of one category, or resource status of one type
)

// The states (req_track.state).
const (
	StatePending = "PENDING"
	StateSent    = "SENT"
	StateDone    = "DONE"
	StateExpired = "EXPIRED"
)

// The reasons an answer closes no request; the RESP processors skip the message with
// SKIPPED(<reason>) and change nothing.
const (
	// SkipNoOpenRequest: nothing of this type and scope was asked for (or it was answered
	// already).
	SkipNoOpenRequest = "no-open-request"
	// SkipRequestExpired: the request it answers went unanswered past req.timeout; a late
	// answer changes nothing.
	SkipRequestExpired = "request-expired"
	// SkipOlderThanRequest: the answer's DTTM is before the open request was sent (less the
	// clock-skew tolerance): it answers an earlier request, not this one.
	SkipOlderThanRequest = "older-than-request"
)

// ClockSkew is how far an answer's DTTM (AODB's clock, airport time) may lie before the
// request's sent_at (our clock) and still answer it. Two minutes covers NTP-kept clocks and
// the DATETIME truncation to seconds; a wider tolerance would let the answer to a superseded
// request close its successor (R-SCHD-6).
const ClockSkew = 2 * time.Minute

// MaxRangeDays bounds an RQFD: a schedule answer for more days is a large snapshot the pump
// applies in one transaction.
const MaxRangeDays = 7

// ErrTooManyOpen is wrapped by the refusal of a registration while the cap of open requests
// is reached (R-REQ-6): the system's state, not the request, must change first.
var ErrTooManyOpen = errors.New("request: too many open requests")

// Limits are the bounds of what callers may register (R-REQ-6).
type Limits struct {
	// DayWindow: an RQFD's days lie at most this many days before or after today (airport time).
	DayWindow int
	// MaxOpen: at most this many requests open (PENDING or SENT) after a registration.
	MaxOpen int
}

// CheckWindow refuses an RQFD with a day more than l.DayWindow days before or after today
// (R-REQ-6): a schedule far from today is a mistake or a flood, and each one becomes a snapshot
// AODB builds and the pump applies. today is the airport's calendar day. RQRD has no days.
func (l Limits) CheckWindow(s Spec, today time.Time) error {
	if s.Type != TypeRQFD {
		return nil
	}
	t := day(today)
	first, last := t.AddDate(0, 0, -l.DayWindow), t.AddDate(0, 0, l.DayWindow)
	for _, d := range []time.Time{s.From, s.To} {
		if d.Before(first) || d.After(last) {
			return fmt.Errorf("%w: %s is outside the request window of %d days around today %s (%s..%s, req.day-window)",
				ErrInvalid, dayString(d), l.DayWindow, dayString(t), dayString(first), dayString(last))
		}
	}
	return nil
}

// CheckOpen refuses a registration that would leave more than l.MaxOpen requests open; others
// counts the open requests except those of its own type and scope, which it expires (R-REQ-2).
func (l Limits) CheckOpen(others int) error {
	if others >= l.MaxOpen {
		return fmt.Errorf("%w: %d requests are open (PENDING or SENT), at most %d (req.max-open); wait for their answers or their expiry",
			ErrTooManyOpen, others, l.MaxOpen)
	}
	return nil
}

// RSTA is the resource-status category of an RQRD; its scope names the resource type too.
const RSTA = "RSTA"

// ResourceTypes are the RTYP values of a resource-status request (R-RSTA-1).
var ResourceTypes = []string{"BELT", "CNTR", "GATE", "STND"}

// ErrInvalid is wrapped by every refusal of a request specification.
var ErrInvalid = errors.New("request: invalid")

// Spec is a request to register.
type Spec struct {
	Type string
	// RQFD: the operation days covered, inclusive (dates; the time of day is ignored).
	From, To time.Time
	// RQRD: one of the 13 reference categories, or RSTA with RTYP one of ResourceTypes.
	Category string
	RTYP     string
}

// ScheduleSpec is the RQFD for the days from..to.
func ScheduleSpec(from, to time.Time) Spec { return Spec{Type: TypeRQFD, From: day(from), To: day(to)} }

// ReferenceSpec is the RQRD for a category (rtyp only for RSTA).
func ReferenceSpec(category, rtyp string) Spec {
	return Spec{Type: TypeRQRD, Category: category, RTYP: rtyp}
}

// Validate checks a specification: a range of 1..MaxRangeDays days for RQFD, a known category
// (and for RSTA a known resource type) for RQRD.
func (s Spec) Validate() error {
	switch s.Type {
	case TypeRQFD:
		if s.From.IsZero() || s.To.IsZero() {
			return fmt.Errorf("%w: an RQFD needs from_day and to_day", ErrInvalid)
		}
		if s.To.Before(s.From) {
			return fmt.Errorf("%w: from_day %s is after to_day %s", ErrInvalid, dayString(s.From), dayString(s.To))
		}
		if n := days(s.From, s.To); n > MaxRangeDays {
			return fmt.Errorf("%w: %d days from %s to %s, at most %d per request", ErrInvalid, n, dayString(s.From), dayString(s.To), MaxRangeDays)
		}
		for _, d := range []time.Time{s.From, s.To} {
			if y := d.Year(); y < sis.FirstBodyYear || y > sis.LastBodyYear {
				return fmt.Errorf("%w: %s cannot be written in the SIS form ddMMMyy without being read back in another century: "+
					"only %d to %d", ErrInvalid, dayString(d), sis.FirstBodyYear, sis.LastBodyYear)
			}
		}
		return nil
	case TypeRQRD:
		if s.Category == RSTA {
			if !slices.Contains(ResourceTypes, s.RTYP) {
				return fmt.Errorf("%w: RSTA needs rtyp BELT, CNTR, GATE or STND, got %q", ErrInvalid, s.RTYP)
			}
			return nil
		}
		if sis.RefKeyTag(s.Category) == "" {
			return fmt.Errorf("%w: category %q is not one of the reference categories (COUL ARPT AIRL AIRC REGN ORGN FLTL TLST GLST SLST CLST CHLT BLST) or RSTA", ErrInvalid, s.Category)
		}
		if s.RTYP != "" {
			return fmt.Errorf("%w: rtyp is only for RSTA, got %q with %s", ErrInvalid, s.RTYP, s.Category)
		}
		return nil
	}
	return fmt.Errorf("%w: type %q is not RQFD or RQRD", ErrInvalid, s.Type)
}

// Scope is the identity of a request within its type: one open request per (type, scope).
// RQFD: "2026-03-01..2026-03-02"; RQRD: the category, "RSTA:GATE" for resource status.
func (s Spec) Scope() string {
	if s.Type == TypeRQFD {
		return RangeScope(s.From, s.To)
	}
	if s.Category == RSTA {
		return RSTA + ":" + s.RTYP
	}
	return s.Category
}

// RangeScope is the scope of an RQFD for the days from..to.
func RangeScope(from, to time.Time) string { return dayString(from) + ".." + dayString(to) }

// styp is the request's STYP (req_track.req_styp): NONE for RQFD, the category for RQRD.
func (s Spec) styp() string {
	if s.Type == TypeRQFD {
		return "NONE"
	}
	return s.Category
}

// Encode writes the request's XML. STDB is the first day at 00:00 and STDE the last day at
// 23:59, both in the encoder's (airport) zone.
func (s Spec) Encode(e sis.Encoder, seqn int64, dttm time.Time) string {
	switch {
	case s.Type == TypeRQFD:
		zone := e.Zone
		if zone == nil {
			zone = sis.DefaultZone()
		}
		from := time.Date(s.From.Year(), s.From.Month(), s.From.Day(), 0, 0, 0, 0, zone)
		to := time.Date(s.To.Year(), s.To.Month(), s.To.Day(), 23, 59, 0, 0, zone)
		return e.EncodeRQFD(int(seqn), dttm, sis.FormatBodyTime(from), sis.FormatBodyTime(to))
	case s.Category == RSTA:
		return e.EncodeRQRDResource(int(seqn), dttm, s.RTYP)
	}
	return e.EncodeRQRD(int(seqn), dttm, s.Category)
}

// Answer is what a RESP processor knows of the message it applies.
type Answer struct {
	// Type is the request type the answer closes: RQFD for SCHD RESP, RQRD for reference data
	// (and RSTA) RESP.
	Type string
	// RQFD: the operation days the RESP covers, inclusive. A request matches when its range
	// covers them all; both zero (an empty RESP) match any range.
	From, To time.Time
	// RQRD: the scope, as Spec.Scope spells it (the category; "RSTA:<rtyp>").
	Scope string
	// DTTM is the answer's META DTTM.
	DTTM time.Time
}

// decide picks the request an answer closes among the open requests that cover it (in the
// order they were sent, oldest first), given the latest expired one that covers it (nil when
// none). It returns the index of the request to close, or -1 and the skip reason.
//
// The oldest fitting request wins: AODB answers requests in the order it receives them, so
// with two overlapping RQFD ranges open the first answer belongs to the first request.
func decide(open []Request, expired *Request, a Answer, now time.Time, timeout time.Duration) (int, string) {
	timedOut, tooOld := false, false
	for i, r := range open {
		switch {
		case r.State != StateSent || r.SentAt == nil:
			// Not in COUTMSGS yet: whatever answered was asked for before it.
			tooOld = true
		case !now.Before(r.SentAt.Add(timeout)):
			// Past req.timeout, not yet expired by the dispatcher's next round: expired all
			// the same, so the answer cannot depend on when that round runs.
			timedOut = true
		case a.DTTM.Before(r.SentAt.Add(-ClockSkew)):
			tooOld = true
		default:
			return i, ""
		}
	}
	answersExpired := expired != nil && expired.SentAt != nil && !a.DTTM.Before(expired.SentAt.Add(-ClockSkew))
	switch {
	case timedOut || answersExpired:
		return -1, SkipRequestExpired
	case tooOld || expired != nil:
		return -1, SkipOlderThanRequest
	}
	return -1, SkipNoOpenRequest
}

// day is t's calendar date as midnight UTC, the way PostgreSQL's date reads back.
func day(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func dayString(t time.Time) string { return t.Format(time.DateOnly) }

// days counts the days of from..to, both included.
func days(from, to time.Time) int { return int(day(to).Sub(day(from)).Hours()/24) + 1 }
