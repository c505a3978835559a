package traffic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// airportZone is the zone every SIS time is written in (docs/sis-format.md, "Times inside bodies";
// config airport.time-zone defaults to Asia/Shanghai). China has kept UTC+8 without daylight
// saving since 1991, so when the host has no zoneinfo the fixed offset gives identical output.
var airportZone = func() *time.Location {
	if loc, err := time.LoadLocation("Asia/Shanghai"); err == nil {
		return loc
	}
	return time.FixedZone("CST", 8*60*60)
}()

// Flight is one flight instance as the AODB schedules it. Field names are the SIS tags.
type Flight struct {
	FLID  string // AODB flight id, the only identity (R-FLIGHT-2)
	ALCD  string // airline code
	FLNO  string // flight number including the airline prefix, as in the samples ("YG9028")
	MVIN  string // "A" arrival at / "D" departure from the home airport
	SODT  time.Time
	FLTY  string // flight type
	FLIN  string // "D" domestic / "I" international
	ACFT  string // IATA aircraft type
	RENO  string // registration
	TRML  string // terminal at the home airport
	STND  string // planned stand
	Route []string
	// MAID makes the flight a code-share child of the flight with that FLID (schedule records
	// only; empty = not sent).
	MAID string
	// Extra is raw XML written verbatim at the end of the flight's FLTR (further schedule
	// elements: turnaround, allocations); empty = none.
	Extra string
}

// FFID is the functional flight id ALCD-FLNO-MVIN-SODT-FLIN that FLOP carries next to FLID.
func (f Flight) FFID() string {
	return strings.Join([]string{f.ALCD, f.FLNO, f.MVIN, FormatTime(f.SODT), f.FLIN}, "-")
}

// FormatTime renders a body time as ddMMMyyHHmm ("23JAN210535") in the airport zone.
func FormatTime(t time.Time) string {
	return strings.ToUpper(t.In(airportZone).Format("02Jan061504"))
}

// formatDate renders ddMMMyy, the date-only body format (SCHS season dates).
func formatDate(t time.Time) string {
	return strings.ToUpper(t.In(airportZone).Format("02Jan06"))
}

// formatDTTM renders META DTTM, yyyyMMddHHmmss in airport local time.
func formatDTTM(t time.Time) string {
	return t.In(airportZone).Format("20060102150405")
}

// plan is a flight plus what the generator decided about its day; the operational messages
// are derived from it.
type plan struct {
	Flight
	carrier *carrier
	delay   time.Duration // actual minus scheduled time at the home airport
	partner *plan         // other leg of the aircraft's rotation through CTU, nil if none
	gates   []string      // departure gates (GTNO 1..n)
	belt    string
}

// est is the expected (and finally actual) time at the home airport.
func (p *plan) est() time.Time { return p.SODT.Add(p.delay) }

func (p *plan) intl() bool { return p.FLIN == "I" }

// The day's scheduled movements lie between the first and the last wave, so that with the
// delays drawDelay allows every update of the day is sent before midnight.
const (
	firstWave = 6 * time.Hour
	lastWave  = 22*time.Hour + 30*time.Minute
)

// schedule draws n flights for the day. Most are rotations through CTU (an arrival and the
// departure back, or for a CTU-based carrier a departure that returns), so one aircraft
// carries both legs with the same registration and stand; the rest are night-stop singles.
func schedule(r *rand.Rand, day time.Time, n int) []*plan {
	used := map[string]bool{} // ALCD+number: one number serves one rotation per day
	var plans []*plan
	for len(plans) < n {
		c := pickCarrier(r)
		num := flightNumber(r, c, used)
		route := pickRoute(r, c)
		acft := c.acft[r.IntN(len(c.acft))]
		reg := registration(r, c.reg)
		stand := pickStand(r, c.trml)
		out := flightTime(route, home) // CTU → last stop
		// A home-based aircraft flies out and back: it leaves CTU and returns the same day,
		// unless the trip is too long to fit between the first and the last wave.
		back := out + out + 60*time.Minute
		latestOut := lastWave - back
		switch {
		case n-len(plans) >= 2 && r.Float64() < 0.8 && (!c.based || latestOut >= firstWave+30*time.Minute):
			var arr, dep *plan
			if c.based {
				d := slot(r, day, firstWave+30*time.Minute, latestOut)
				dep = newPlan(c, num, "D", d, route, acft, reg, stand)
				arr = newPlan(c, num+1, "A", d.Add(back), reversed(route), acft, reg, stand)
			} else {
				// Visiting aircraft: lands, turns around, leaves.
				turn := time.Duration(50+r.IntN(30)) * time.Minute
				if c.foreign || wide(acft) {
					turn = time.Duration(90+r.IntN(60)) * time.Minute
				}
				a := slot(r, day, 7*time.Hour, lastWave-turn)
				arr = newPlan(c, num, "A", a, reversed(route), acft, reg, stand)
				dep = newPlan(c, num+1, "D", a.Add(turn).Round(5*time.Minute), route, acft, reg, stand)
			}
			arr.partner, dep.partner = dep, arr
			plans = append(plans, arr, dep)
		case r.IntN(2) == 0:
			// First wave: the aircraft stayed overnight at CTU.
			plans = append(plans, newPlan(c, num, "D", slot(r, day, firstWave, 9*time.Hour), route, acft, reg, stand))
		default:
			// Last wave: the aircraft stays overnight at CTU.
			plans = append(plans, newPlan(c, num+1, "A", slot(r, day, 20*time.Hour, lastWave), reversed(route), acft, reg, stand))
		}
	}
	// FLIDs follow the schedule order, as an AODB that numbers the day's flights would, and the
	// ADFTs go out in that order.
	slices.SortStableFunc(plans, func(a, b *plan) int {
		if c := a.SODT.Compare(b.SODT); c != 0 {
			return c
		}
		return strings.Compare(a.FLNO, b.FLNO)
	})
	base := flidBase(day)
	for i, p := range plans {
		p.FLID = fmt.Sprint(base + int64(i) + 1)
		p.delay = drawDelay(r, p.SODT.Sub(day))
		p.belt = pickBelt(r, p.TRML)
		p.gates = []string{pickGate(r, p.TRML)}
		if p.MVIN == "D" && r.Float64() < 0.15 {
			// Wide-body or bussing flights board through two gates (GTNO 1 and 2).
			p.gates = append(p.gates, pickGate(r, p.TRML))
		}
	}
	return plans
}

// flidBase makes FLIDs differ between operation days, so several generated days can be loaded
// into one database without two days claiming the same FLID (which would be a Q23 conflict).
func flidBase(day time.Time) int64 {
	epoch := time.Date(2000, 1, 1, 0, 0, 0, 0, airportZone)
	days := int64(day.Sub(epoch).Hours()/24 + 0.5)
	return days * 1_000_000
}

func newPlan(c *carrier, num int, mvin string, sodt time.Time, route []string, acft, reg, stand string) *plan {
	flin := "D"
	if c.foreign {
		flin = "I"
	}
	return &plan{
		carrier: c,
		Flight: Flight{
			ALCD: c.code, FLNO: fmt.Sprintf("%s%d", c.code, num), MVIN: mvin, SODT: sodt,
			FLTY: "W", FLIN: flin, ACFT: acft, RENO: reg, TRML: c.trml, STND: stand, Route: route,
		},
	}
}

func pickCarrier(r *rand.Rand) *carrier {
	total := 0
	for i := range carriers {
		total += carriers[i].weight
	}
	n := r.IntN(total)
	for i := range carriers {
		if n < carriers[i].weight {
			return &carriers[i]
		}
		n -= carriers[i].weight
	}
	return &carriers[0]
}

// flightNumber draws an odd number N for the outbound leg; N+1 is the return, the usual
// Chinese odd-out/even-back pairing. A carrier whose range is used up reuses numbers
// deterministically rather than looping forever (only reachable with very large days).
func flightNumber(r *rand.Rand, c *carrier, used map[string]bool) int {
	span := (c.hi - c.lo + 1) / 2
	start := r.IntN(span)
	for i := range span {
		num := c.lo + 2*((start+i)%span)
		if num%2 == 0 {
			num++
		}
		key := fmt.Sprint(c.code, num)
		if !used[key] {
			used[key] = true
			return num
		}
	}
	return c.lo | 1
}

// pickRoute returns the stations after CTU for a departure: one stop mostly, sometimes two or
// three (through flights); foreign carriers fly only to their hub.
func pickRoute(r *rand.Rand, c *carrier) []string {
	if c.foreign {
		return []string{c.hub}
	}
	k := 1
	switch x := r.Float64(); {
	case x > 0.97:
		k = 3
	case x > 0.80:
		k = 2
	}
	idx := r.Perm(len(domestic))[:k]
	route := make([]string, k)
	for i, j := range idx {
		route[i] = domestic[j]
	}
	return route
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// leg is the block time between two stations.
func leg(a, b string) time.Duration {
	switch {
	case a == home:
		return time.Duration(blockFromHome[b]) * time.Minute
	case b == home:
		return time.Duration(blockFromHome[a]) * time.Minute
	}
	d := blockFromHome[a] - blockFromHome[b]
	if d < 0 {
		d = -d
	}
	return time.Duration(max(60, d+40)) * time.Minute
}

// groundStop is the scheduled time at an intermediate station.
const groundStop = 45 * time.Minute

// flightTime is the scheduled time from `from` through the route's stations to its last one.
func flightTime(route []string, from string) time.Duration {
	var d time.Duration
	prev := from
	for i, s := range route {
		if i > 0 {
			d += groundStop
		}
		d += leg(prev, s)
		prev = s
	}
	return d
}

// routePoint is one ROUT element: the station and its scheduled times (zero when absent).
type routePoint struct {
	apcd       string
	scat, scdt time.Time
}

// routeTimes derives ROUT points from the home-airport time: for a departure the stations
// after CTU (the last has no SCDT), for an arrival the stations before it (the first has no
// SCAT), matching SCHD-DNLD-SCHD-1 and R-FLOP-ROUT.
func routeTimes(mvin string, sodt time.Time, route []string) []routePoint {
	pts := make([]routePoint, len(route))
	if mvin == "D" {
		t, prev := sodt, home
		for i, s := range route {
			t = t.Add(leg(prev, s))
			pts[i] = routePoint{apcd: s, scat: t}
			if i < len(route)-1 {
				t = t.Add(groundStop)
				pts[i].scdt = t
			}
			prev = s
		}
		return pts
	}
	t, next := sodt, home
	for i := len(route) - 1; i >= 0; i-- {
		t = t.Add(-leg(route[i], next))
		pts[i] = routePoint{apcd: route[i], scdt: t}
		if i > 0 {
			t = t.Add(-groundStop)
			pts[i].scat = t
		}
		next = route[i]
	}
	return pts
}

// slot draws a scheduled time between two offsets into the day, on a five-minute grid as
// published schedules are.
func slot(r *rand.Rand, day time.Time, from, to time.Duration) time.Time {
	if to <= from {
		to = from + 5*time.Minute
	}
	steps := int((to - from) / (5 * time.Minute))
	return day.Add(from + time.Duration(r.IntN(steps+1))*5*time.Minute)
}

// drawDelay: most flights run within a few minutes of schedule, about a quarter are delayed
// and a few badly. No flight is expected after 23:00, so the day's last updates (belt
// closing, up to 46 minutes after landing) are still sent before midnight.
func drawDelay(r *rand.Rand, sinceMidnight time.Duration) time.Duration {
	var m int
	switch x := r.Float64(); {
	case x < 0.65:
		m = r.IntN(16) - 5
	case x < 0.92:
		m = 15 + r.IntN(46)
	default:
		m = 60 + r.IntN(91)
	}
	d := time.Duration(m) * time.Minute
	return min(d, 23*time.Hour-sinceMidnight)
}

func wide(acft string) bool {
	switch acft {
	case "330", "333", "359", "77W", "788", "789":
		return true
	}
	return false
}

// registration fills a carrier's pattern: '#' a digit, '@' a capital letter.
func registration(r *rand.Rand, pattern string) string {
	var b strings.Builder
	for _, c := range pattern {
		switch c {
		case '#':
			b.WriteByte(byte('0' + r.IntN(10)))
		case '@':
			b.WriteByte(byte('A' + r.IntN(26)))
		default:
			b.WriteRune(c)
		}
	}
	if pattern == "B####" && strings.HasPrefix(b.String(), "B0") {
		// Chinese civil registrations do not start with 0.
		return "B1" + b.String()[2:]
	}
	return b.String()
}

// Resource naming at CTU as generated here: T1 gates G1–G28 with contact stands 1xx, T2 gates
// G101–G160 with contact stands 2xx, remote stands 5xx; belts B21–B28 (T1) and B01–B16 (T2);
// counter rows A–D (T1) and E–K (T2).

func pickGate(r *rand.Rand, trml string) string {
	if trml == "T1" {
		return fmt.Sprintf("G%d", 1+r.IntN(28))
	}
	return fmt.Sprintf("G%d", 101+r.IntN(60))
}

func pickStand(r *rand.Rand, trml string) string {
	if r.Float64() < 0.3 {
		return fmt.Sprintf("5%02d", 1+r.IntN(60))
	}
	if trml == "T1" {
		return fmt.Sprintf("1%02d", 1+r.IntN(28))
	}
	return fmt.Sprintf("2%02d", 1+r.IntN(60))
}

func pickBelt(r *rand.Rand, trml string) string {
	if trml == "T1" {
		return fmt.Sprintf("B%02d", 21+r.IntN(8))
	}
	return fmt.Sprintf("B%02d", 1+r.IntN(16))
}

// pickCounters returns k adjacent check-in counters in one row.
func pickCounters(r *rand.Rand, trml string, k int) []string {
	rows := "EFGHJK"
	if trml == "T1" {
		rows = "ABCD"
	}
	row := rows[r.IntN(len(rows))]
	first := 1 + r.IntN(30-k)
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("%c%02d", row, first+i)
	}
	return out
}
