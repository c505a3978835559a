package traffic

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// DNLD renders a SCHD STYP=DNLD message sent by "AODB": the whole package, RECS the number of
// flights, one FLTR per flight in the given order. A snapshot replaces (R-SCHD-1): a
// field a flight leaves empty is not sent, and the receiver clears it.
func DNLD(seqn int64, dttm time.Time, flights []Flight) string {
	return snapshot("AODB", seqn, dttm, "DNLD", flights)
}

// snapshot renders a SCHD DNLD or RESP from sndr.
func snapshot(sndr string, seqn int64, dttm time.Time, styp string, flights []Flight) string {
	var b body
	b.open(1, "SCHD")
	b.leaf(2, "RECS", strconv.Itoa(len(flights)))
	for _, f := range flights {
		fltr(&b, 2, f)
	}
	b.close(1, "SCHD")
	return envelope(sndr, seqn, dttm, "SCHD", styp, b.String())
}

// Schedule draws the n flights of one operation day (in the airport zone) as Day schedules
// them, each with the rest of its daily schedule record in Extra, as the SCHD-DNLD-SCHD-1
// sample carries it: the rotation partner (TAOP/TAFL/TAID), the seat capacity, the stand
// occupation (PSDT), the gates of a departure (GTDT) or the belt of an arrival (CLDT), the
// handling agents and the ERUT. The same seed gives the same flights.
func Schedule(seed int64, day time.Time, n int) []Flight {
	r := rand.New(rand.NewPCG(uint64(seed), pcgStream))
	y, m, d := day.Date()
	plans := schedule(r, time.Date(y, m, d, 0, 0, 0, 0, airportZone), n)
	out := make([]Flight, len(plans))
	for i, p := range plans {
		f := p.Flight
		var x body
		if q := p.partner; q != nil {
			x.leaf(3, "TAOP", p.ALCD)
			x.leaf(3, "TAFL", q.FLNO)
			x.leaf(3, "TAID", q.FLID)
		}
		seats := 180
		if wide(p.ACFT) {
			seats = 300
		}
		x.leaf(3, "MAXP", strconv.Itoa(seats))
		on, off := p.SODT.Add(-40*time.Minute), p.SODT.Add(20*time.Minute)
		if p.MVIN == "D" {
			on, off = p.SODT.Add(-3*time.Hour), p.SODT
		}
		f.Extra = x.String() + psdt(p.STND, on, off)
		if p.MVIN == "D" {
			f.Extra += gtdt(p.gates, p.SODT.Add(-45*time.Minute), p.SODT.Add(-15*time.Minute), time.Time{}, time.Time{}, "D")
		} else {
			f.Extra += cldt(p.belt, p.SODT.Add(10*time.Minute), p.SODT.Add(40*time.Minute), time.Time{}, time.Time{}, "D")
		}
		var h body
		agent := strconv.Itoa(110000 + r.IntN(20))
		for _, tag := range []string{"PHAG", "FHAG", "MHAG"} {
			h.leaf(3, tag, agent)
		}
		h.leaf(3, "FTSS", "SCHEDULED")
		// The whole route, the home airport included (ROUT leaves it out).
		pts := routeTimes(p.MVIN, p.SODT, p.Route)
		if p.MVIN == "D" {
			pts = append([]routePoint{{apcd: home, scdt: p.SODT}}, pts...)
		} else {
			pts = append(pts, routePoint{apcd: home, scat: p.SODT})
		}
		routeElements(&h, 3, "ERUT", pts)
		f.Extra += h.String()
		out[i] = f
	}
	return out
}

// RESP is the SCHD RESP answering an RQFD with these flights: the same package as DNLD, scoped
// by the request it answers.
func RESP(seqn int64, dttm time.Time, flights []Flight) string {
	return snapshot("AODB", seqn, dttm, "RESP", flights)
}
