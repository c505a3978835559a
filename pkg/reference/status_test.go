package reference_test

import (
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/reference"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

var cst = sis.DefaultZone()

func at(day, hh int) time.Time { return time.Date(2024, 3, day, hh, 0, 0, 0, cst) }

func rsta(rtyp, rsid, stat, strt, endt string) string {
	s := "<RSTA><RTYP>" + rtyp + "</RTYP><RSID>" + rsid + "</RSID><STAT>" + stat + "</STAT>"
	if strt != "" {
		s += "<STRT>" + strt + "</STRT>"
	}
	if endt != "" {
		s += "<ENDT>" + endt + "</ENDT>"
	}
	return s + "</RSTA>"
}

func decodeRSTA(t *testing.T, styp string, recs int, body string) *sis.ResourceStatus {
	t.Helper()
	m, err := sis.Decode(message("RSTA", styp, recs, body), sis.Options{})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return m.Body.(*sis.ResourceStatus)
}

func TestEvents(t *testing.T) {
	issued := at(15, 9)
	cases := []struct {
		name, styp string
		recs       int
		body, want string // want: a part of the refusal, "" when accepted
	}{
		{"disable with a window", "DNLD", -1, rsta("GATE", "G17", "D", "15MAR241000", "15MAR241800"), ""},
		{"disable without end", "DNLD", 1, rsta("GATE", "G17", "D", "15MAR241000", ""), ""},
		{"re-enable with a start", "DNLD", -1, rsta("GATE", "G17", "E", "15MAR241200", ""), ""},
		{"RESP of several", "RESP", 2, rsta("GATE", "G17", "D", "", "") + rsta("BELT", "B1", "E", "", ""), ""},
		{"DNLD of two", "DNLD", -1, rsta("GATE", "G17", "D", "", "") + rsta("BELT", "B1", "E", "", ""), "one status update, got 2"},
		{"RECS mismatch", "RESP", 3, rsta("GATE", "G17", "D", "", ""), "declares RECS 3 but carries 1"},
		{"re-enable with an end", "DNLD", -1, rsta("GATE", "G17", "E", "15MAR241200", "15MAR241800"), "only a start"},
		{"end before start", "DNLD", -1, rsta("STND", "501", "D", "15MAR241800", "15MAR241000"), "window is empty"},
		{"end at start", "DNLD", -1, rsta("STND", "501", "D", "15MAR241000", "15MAR241000"), "window is empty"},
		{"end before the issue time", "DNLD", -1, rsta("CNTR", "C1", "D", "", "15MAR240800"), "window is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			events, why := reference.Events(decodeRSTA(t, tc.styp, tc.recs, tc.body), 42, issued, cst)
			if (tc.want == "") != (why == "") || !strings.Contains(why, tc.want) {
				t.Fatalf("Events refusal = %q, want %q", why, tc.want)
			}
			if why == "" && (events[0].MsgID != 42 || events[0].Ordinal != 1) {
				t.Errorf("event 0 = %+v", events[0])
			}
		})
	}
	t.Run("times", func(t *testing.T) {
		events, _ := reference.Events(decodeRSTA(t, "DNLD", -1, rsta("GATE", "G17", "D", "15MAR241000", "15MAR241800")), 1, issued, cst)
		e := events[0]
		if !e.From.Equal(at(15, 10)) || e.End == nil || !e.End.Equal(at(15, 18)) || e.STRT != "15MAR241000" {
			t.Errorf("event %+v", e)
		}
		events, _ = reference.Events(decodeRSTA(t, "DNLD", -1, rsta("GATE", "G17", "D", "", "")), 1, issued, cst)
		if !events[0].From.Equal(issued) || events[0].End != nil {
			t.Errorf("without STRT/ENDT: %+v, want From = the message's DTTM and no end", events[0])
		}
	})
}
