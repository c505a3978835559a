// Package referencetest holds the resource-status window cases of R-RSTA-2 that the read
// model's SQL function (ref_resource_availability_at) must answer.
package referencetest

import (
	"time"

	"github.com/msgexchange/msgexchange/pkg/reference"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// WindowCase is one resource's events and the expected status at one instant.
type WindowCase struct {
	Name      string
	Events    []reference.Event
	At        time.Time
	Available bool
	// Governing is the msg_id of the event in force, 0 when none has taken effect.
	Governing int64
}

func t(day, hh int) time.Time { return time.Date(2024, 3, day, hh, 0, 0, 0, sis.DefaultZone()) }

func ev(msg int64, stat string, from time.Time, end *time.Time) reference.Event {
	return reference.Event{RTYP: "GATE", RSID: "G17", STAT: stat, From: from, End: end, MsgID: msg, Ordinal: 1}
}

func end(x time.Time) *time.Time { return &x }

// WindowCases are the cases of R-RSTA-2 on one gate, times on 15 March 2024.
func WindowCases() []WindowCase {
	window := []reference.Event{ev(1, "D", t(15, 10), end(t(15, 18)))}
	open := []reference.Event{ev(1, "D", t(15, 10), nil)}
	reenable := []reference.Event{ev(1, "D", t(15, 10), nil), ev(2, "E", t(15, 15), nil)}
	later := []reference.Event{ev(1, "D", t(15, 10), nil), ev(2, "D", t(15, 14), end(t(15, 16)))}
	cancel := []reference.Event{ev(1, "D", t(15, 14), end(t(15, 16))), ev(2, "E", t(15, 9), nil)}
	return []WindowCase{
		{"no event: available by default", nil, t(15, 12), true, 0},
		{"before a window", window, t(15, 9), true, 0},
		{"at the window's start", window, t(15, 10), false, 1},
		{"inside a window", window, t(15, 12), false, 1},
		{"at the window's end: available again", window, t(15, 18), true, 1},
		{"after a window, without a new message", window, t(16, 9), true, 1},
		{"a disable without end lasts", open, t(20, 9), false, 1},
		{"before a re-enable's start the disable stays", reenable, t(15, 13), false, 1},
		{"after a re-enable's start", reenable, t(15, 15), true, 2},
		{"an open disable before a later window", later, t(15, 13), false, 1},
		{"a later window replaces the open disable", later, t(15, 15), false, 2},
		{"after the later window the open disable is over", later, t(15, 17), true, 2},
		{"a re-enable sent after a planned window cancels it", cancel, t(15, 15), true, 2},
		{"before the cancelling re-enable takes effect", cancel, t(15, 8), true, 0},
	}
}
