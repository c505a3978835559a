package reference

import (
	"fmt"
	"time"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Event is one resource status event (RSTA, R-RSTA-2) as it is kept.
type Event struct {
	RTYP, RSID, STAT string
	// STRT and ENDT as sent ("" when absent), for audit.
	STRT, ENDT string
	// From is when the event takes effect: STRT, or the message's DTTM (the time upstream
	// issued it) when it carries no start.
	From time.Time
	// End is when a disable is over (ENDT); nil means until a later event takes effect.
	End *time.Time
	// MsgID and Ordinal (the record's position in its message, from 1) order the events as
	// upstream sent them.
	MsgID   int64
	Ordinal int
}

// Events checks an RSTA message and returns its events, or why it is refused (DEAD(PROTOCOL)):
// a DNLD is exactly one status update, a RESP's declared RECS (when given) matches its records;
// a re-enable carries only a start, and a disable's end comes after its start. Times are read
// in zone (the codec has checked their format).
func Events(rs *sis.ResourceStatus, msgID int64, issued time.Time, zone *time.Location) ([]Event, string) {
	switch {
	case rs.STYP == "DNLD" && len(rs.Records) != 1:
		return nil, fmt.Sprintf("RSTA-DNLD is one status update, got %d records", len(rs.Records))
	case rs.RECS != sis.RECSAbsent && rs.RECS != len(rs.Records):
		return nil, fmt.Sprintf("RSTA-%s declares RECS %d but carries %d records", rs.STYP, rs.RECS, len(rs.Records))
	case len(rs.Records) == 0:
		return nil, fmt.Sprintf("RSTA-%s carries no record", rs.STYP)
	}
	out := make([]Event, 0, len(rs.Records))
	for i, r := range rs.Records {
		e := Event{RTYP: r.RTYP, RSID: r.RSID, STAT: r.STAT, STRT: r.Start.Value, ENDT: r.End.Value,
			From: issued, MsgID: msgID, Ordinal: i + 1}
		where := fmt.Sprintf("RSTA record %d (%s %s)", i+1, r.RTYP, r.RSID)
		if r.Start.Value != "" {
			t, err := sis.ParseTime(r.Start.Value, zone)
			if err != nil {
				return nil, fmt.Sprintf("%s: STRT: %v", where, err)
			}
			e.From = t
		}
		if r.End.Value != "" {
			if r.STAT == "E" {
				return nil, where + ": a re-enable carries only a start, not ENDT (R-RSTA-2)"
			}
			t, err := sis.ParseTime(r.End.Value, zone)
			if err != nil {
				return nil, fmt.Sprintf("%s: ENDT: %v", where, err)
			}
			if !t.After(e.From) {
				return nil, fmt.Sprintf("%s: ENDT %s is not after the start %s: the window is empty", where, r.End.Value,
					e.From.In(zone).Format("02Jan06 15:04"))
			}
			e.End = &t
		}
		out = append(out, e)
	}
	return out, ""
}
