package traffic

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// opEvent is one message about one flight, before it gets its place, SEQN and DTTM.
type opEvent struct {
	at   time.Time
	typ  string // META TYPE
	styp string // META STYP
	body string // FLOP content after FLID/FFID, indented for depth 2
	kind Kind
	want string
}

// Body fragments, each at FLOP depth 2. Collections always carry every element the flight has
// at that moment, because a collection is replaced whole (R-FLIGHT-3).

func scalar(name, value string) string {
	var b body
	b.leaf(2, name, value)
	return b.String()
}

func gtdt(gates []string, pgot, pgct, gotm, gctm time.Time, gtyp string) string {
	var b body
	for i, g := range gates {
		b.open(2, "GTDT", "GTNO", strconv.Itoa(i+1))
		b.leaf(3, "GATE", g)
		b.timeLeaf(3, "PGOT", pgot)
		b.timeLeaf(3, "PGCT", pgct)
		b.timeLeaf(3, "GOTM", gotm)
		b.timeLeaf(3, "GCTM", gctm)
		b.leaf(3, "GTYP", gtyp)
		b.close(2, "GTDT")
	}
	return b.String()
}

func ckdt(counters []string, pcot, pcct, cotm, cctm time.Time, ctyp string) string {
	var b body
	for i, c := range counters {
		b.open(2, "CKDT", "CKNO", strconv.Itoa(i+1))
		b.leaf(3, "CHKC", c)
		// The first counter of a longer row serves premium cabins, as at real airports.
		ccls := "Y"
		if i == 0 && len(counters) >= 3 {
			ccls = "F"
		}
		b.leaf(3, "CCLS", ccls)
		b.timeLeaf(3, "PCOT", pcot)
		b.timeLeaf(3, "PCCT", pcct)
		b.timeLeaf(3, "COTM", cotm)
		b.timeLeaf(3, "CCTM", cctm)
		b.leaf(3, "CTYP", ctyp)
		b.close(2, "CKDT")
	}
	return b.String()
}

func cldt(belt string, pcot, pcct, fbag, lbag time.Time, btyp string) string {
	var b body
	b.open(2, "CLDT", "CLNO", "1")
	b.leaf(3, "BELT", belt)
	b.leaf(3, "BCLS", "Y")
	b.timeLeaf(3, "PCOT", pcot)
	b.timeLeaf(3, "PCCT", pcct)
	b.timeLeaf(3, "FBAG", fbag)
	b.timeLeaf(3, "LBAG", lbag)
	b.leaf(3, "BTYP", btyp)
	b.close(2, "CLDT")
	return b.String()
}

func psdt(stand string, stst, stet time.Time) string {
	var b body
	b.open(2, "PSDT", "PSNO", "1")
	b.leaf(3, "PSST", stand)
	b.timeLeaf(3, "STST", stst)
	b.timeLeaf(3, "STET", stet)
	b.close(2, "PSDT")
	return b.String()
}

// noAllocation is a collection sent as its single …NO="0" element: "no allocation now"
// (R-FLOP-GTDT; AODB really sends it).
func noAllocation(coll, attr string) string {
	var b body
	b.indent(2)
	b.WriteString("<" + coll + " " + attr + `="0"></` + coll + ">\n")
	return b.String()
}

func hnag(agent string, withMHAG bool) string {
	var b body
	b.leaf(2, "FHAG", agent)
	b.leaf(2, "PHAG", agent)
	if withMHAG {
		b.leaf(2, "MHAG", "510009") // the airport's own maintenance organisation
	}
	return b.String()
}

func routBody(mvin string, sodt time.Time, route []string) string {
	var b body
	rout(&b, 2, routeTimes(mvin, sodt, route))
	return b.String()
}

func pick(r *rand.Rand, s []string) string { return s[r.IntN(len(s))] }

func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }

// jitter is a uniform offset in [-n, n] minutes.
func jitter(r *rand.Rand, n int) time.Duration { return minutes(r.IntN(2*n+1) - n) }

// operations derives one flight's operational updates, in time order, from what the plan says
// will happen to it. The lead times are those of a Chinese hub: stands planned hours ahead,
// domestic check-in 2 h to 45 min before departure (international 3 h to 60 min), boarding
// 35–50 min before, belts allocated just before landing.
func operations(r *rand.Rand, p *plan) []opEvent {
	var evs []opEvent
	add := func(at time.Time, styp, body string) {
		evs = append(evs, opEvent{at: at, typ: "FLOP", styp: styp, body: body, kind: KindFLOP, want: Succeeded})
	}
	s, e := p.SODT, p.est()
	dom := p.FLIN // GTYP/CTYP/BTYP follow the flight's domestic/international status
	late := p.delay >= 15*time.Minute

	// Estimates: a delayed flight's first estimate is usually too optimistic and is revised.
	estimates := func(first time.Time) {
		if late {
			add(first, "ESTT", scalar("ESTT", FormatTime(s.Add(p.delay/2).Round(5*time.Minute))))
			if r.Float64() < 0.8 {
				add(first.Add(minutes(2)), "REMC", scalar("REMC", pick(r, delayRemarks)))
			}
			add(first.Add(minutes(50+r.IntN(20))), "ESTT", scalar("ESTT", FormatTime(e)))
		} else if r.Float64() < 0.9 {
			add(first, "ESTT", scalar("ESTT", FormatTime(e)))
		}
	}

	if p.MVIN == "D" {
		intl := p.intl()
		ckOpen, ckClose := s.Add(-2*time.Hour), s.Add(-45*time.Minute)
		pgot, pgct, board, last := s.Add(-45*time.Minute), s.Add(-15*time.Minute), minutes(35), minutes(15)
		k := 2 + r.IntN(3)
		if intl {
			ckOpen, ckClose = s.Add(-3*time.Hour), s.Add(-60*time.Minute)
			pgot, pgct, board, last = s.Add(-60*time.Minute), s.Add(-20*time.Minute), minutes(50), minutes(25)
			k = 4 + r.IntN(3)
		}
		stst := s.Add(-70 * time.Minute)
		if p.partner != nil && p.partner.MVIN == "A" {
			stst = p.partner.SODT // the aircraft occupies the stand from its arrival
		}
		if r.Float64() < 0.9 {
			add(s.Add(-5*time.Hour+jitter(r, 30)), "PSDT", psdt(p.STND, stst, s.Add(5*time.Minute)))
		}
		counters := pickCounters(r, p.TRML, k)
		if r.Float64() < 0.95 {
			add(ckOpen.Add(-2*time.Hour+jitter(r, 20)), "CKDT", ckdt(counters, ckOpen, ckClose, time.Time{}, time.Time{}, dom))
		}
		if r.Float64() < 0.95 {
			add(s.Add(-3*time.Hour-30*time.Minute+jitter(r, 20)), "GTDT", gtdt(p.gates, pgot, pgct, time.Time{}, time.Time{}, dom))
		}
		estimates(s.Add(-2*time.Hour + jitter(r, 15)))
		if r.Float64() < 0.1 {
			// Gate change, sometimes withdrawn first ("no allocation now") and then reassigned.
			at := s.Add(-100 * time.Minute)
			if r.Float64() < 0.3 {
				add(at, "GTDT", noAllocation("GTDT", "GTNO"))
			}
			p.gates = slices.Clone(p.gates)
			p.gates[0] = pickGate(r, p.TRML)
			add(at.Add(minutes(8)), "GTDT", gtdt(p.gates, pgot, pgct, time.Time{}, time.Time{}, dom))
			if r.Float64() < 0.5 {
				add(at.Add(minutes(9)), "REMC", scalar("REMC", "请旅客留意登机口变更"))
			}
		}
		if r.Float64() < 0.5 {
			add(s.Add(-60*time.Minute), "STND", scalar("STND", p.STND))
		}
		if r.Float64() < 0.5 {
			add(ckClose.Add(minutes(1)), "CKDT", ckdt(counters, ckOpen, ckClose, ckOpen.Add(minutes(r.IntN(10))), ckClose, dom))
		}
		gotm := e.Add(-board - 5*time.Minute)
		if r.Float64() < 0.6 {
			add(gotm, "GTDT", gtdt(p.gates, pgot, pgct, gotm, time.Time{}, dom))
		}
		if r.Float64() < 0.9 {
			bt := e.Add(-board)
			add(bt, "BOTM", scalar("BOTM", FormatTime(bt)))
			if r.Float64() < 0.03 {
				// Boarding suspended and resumed: the empty tag clears the boarding time.
				add(bt.Add(minutes(4)), "BOTM", scalar("BOTM", ""))
				add(bt.Add(minutes(9)), "BOTM", scalar("BOTM", FormatTime(bt.Add(minutes(9)))))
			}
			if r.Float64() < 0.1 {
				add(bt.Add(minutes(2)), "REMC", scalar("REMC", "旅客正在登机"))
			}
		}
		if r.Float64() < 0.7 {
			lt := e.Add(-last)
			add(lt, "LACL", scalar("LACL", FormatTime(lt)))
			if r.Float64() < 0.02 {
				add(lt.Add(minutes(2)), "LACL", scalar("LACL", ""))
				add(lt.Add(minutes(5)), "LACL", scalar("LACL", FormatTime(lt.Add(minutes(5)))))
			}
		}
		if r.Float64() < 0.4 {
			gctm := e.Add(-10 * time.Minute)
			add(gctm, "GTDT", gtdt(p.gates, pgot, pgct, gotm, gctm, dom))
		}
		if r.Float64() < 0.97 {
			at := e.Add(minutes(r.IntN(5)))
			add(at.Add(minutes(1)), "ACTT", scalar("ACTT", FormatTime(at)))
		}
	} else {
		stet := s.Add(60 * time.Minute)
		if p.partner != nil && p.partner.MVIN == "D" {
			stet = p.partner.SODT // the aircraft stays on the stand until its departure
		}
		if r.Float64() < 0.9 {
			add(s.Add(-4*time.Hour+jitter(r, 30)), "PSDT", psdt(p.STND, s, stet))
		}
		estimates(s.Add(-2*time.Hour + jitter(r, 15)))
		if r.Float64() < 0.6 {
			add(e.Add(-40*time.Minute), "STND", scalar("STND", p.STND))
		}
		pcot, pcct := e.Add(10*time.Minute), e.Add(45*time.Minute)
		if p.intl() {
			pcct = e.Add(60 * time.Minute)
		}
		if r.Float64() < 0.9 {
			add(e.Add(-20*time.Minute), "CLDT", cldt(p.belt, pcot, pcct, time.Time{}, time.Time{}, dom))
			if r.Float64() < 0.04 {
				// Belt withdrawn ("no allocation now") and a different one given.
				add(e.Add(-15*time.Minute), "CLDT", noAllocation("CLDT", "CLNO"))
				p.belt = pickBelt(r, p.TRML)
				add(e.Add(-10*time.Minute), "CLDT", cldt(p.belt, pcot, pcct, time.Time{}, time.Time{}, dom))
			}
		}
		if r.Float64() < 0.97 {
			add(e.Add(minutes(1)), "ACTT", scalar("ACTT", FormatTime(e)))
		}
		if r.Float64() < 0.5 {
			fbag, lbag := e.Add(minutes(12+r.IntN(8))), e.Add(minutes(30+r.IntN(15)))
			add(lbag.Add(minutes(1)), "CLDT", cldt(p.belt, pcot, pcct, fbag, lbag, dom))
			if r.Float64() < 0.05 {
				add(lbag.Add(minutes(2)), "REMC", scalar("REMC", "行李延迟到达"))
			}
		}
	}

	// Less frequent changes that either direction can get.
	if r.Float64() < 0.3 {
		add(s.Add(-3*time.Hour+jitter(r, 20)), "HNAG", hnag(p.carrier.agent, r.IntN(2) == 0))
	}
	if r.Float64() < 0.05 {
		p.RENO = registration(r, p.carrier.reg) // aircraft swap
		add(s.Add(-150*time.Minute+jitter(r, 20)), "RENO", scalar("RENO", p.RENO))
	}
	if !p.carrier.foreign && r.Float64() < 0.02 {
		if p.TRML == "T1" {
			p.TRML = "T2"
		} else {
			p.TRML = "T1"
		}
		add(s.Add(-195*time.Minute), "TRML", scalar("TRML", p.TRML))
	}
	if !p.carrier.foreign && r.Float64() < 0.02 {
		p.Route = reroute(r, p.MVIN, p.Route)
		add(s.Add(-165*time.Minute), "ROUT", routBody(p.MVIN, p.SODT, p.Route))
	}
	if r.Float64() < 0.03 {
		add(s.Add(-80*time.Minute), "REMC", scalar("REMC", pick(r, infoRemarks)))
	}

	slices.SortStableFunc(evs, func(a, b opEvent) int { return a.at.Compare(b.at) })
	return evs
}

// reroute changes a route the way airlines do on the day: a through flight drops its
// intermediate stop, a direct flight gains one before reaching (or after leaving) the far end.
func reroute(r *rand.Rand, mvin string, route []string) []string {
	if len(route) > 1 {
		if mvin == "D" {
			return slices.Clone(route[len(route)-1:]) // keep the destination
		}
		return slices.Clone(route[:1]) // keep the origin
	}
	var stop string
	for stop == "" || stop == route[0] {
		stop = pick(r, domestic)
	}
	if mvin == "D" {
		return []string{stop, route[0]}
	}
	return []string{route[0], stop}
}

// cancel cuts a flight's updates at a cancellation. With undo, the AODB withdraws the
// cancellation a little later (empty <CNCL></CNCL>, R-FLOP-CNCL) and the flight operates.
func cancel(r *rand.Rand, p *plan, evs []opEvent, undo bool) []opEvent {
	c := p.SODT.Add(-minutes(120 + r.IntN(121)))
	if undo {
		c = p.SODT.Add(-minutes(180 + r.IntN(61)))
	}
	var out []opEvent
	for _, ev := range evs {
		if ev.at.Before(c) {
			out = append(out, ev)
		}
	}
	out = append(out,
		opEvent{at: c, typ: "FLOP", styp: "CNCL", body: scalar("CNCL", FormatTime(c)), kind: KindFLOP, want: Succeeded},
		opEvent{at: c.Add(minutes(1)), typ: "FLOP", styp: "REMC", body: scalar("REMC", pick(r, cancelRemarks)), kind: KindFLOP, want: Succeeded},
	)
	if !undo {
		return out
	}
	u := c.Add(minutes(20 + r.IntN(31)))
	out = append(out,
		opEvent{at: u, typ: "FLOP", styp: "CNCL", body: scalar("CNCL", ""), kind: KindFLOP, want: Succeeded},
		opEvent{at: u.Add(minutes(1)), typ: "FLOP", styp: "REMC", body: scalar("REMC", pick(r, undoRemarks)), kind: KindFLOP, want: Succeeded},
	)
	for _, ev := range evs {
		if ev.at.After(u.Add(minutes(1))) {
			out = append(out, ev)
		}
	}
	return out
}

// fdel ends a flight's updates with its deletion (TYPE=FLOP STYP=FDEL, always an empty FDEL
// tag, as in FLOP-FDEL-FDEL-1). Nothing follows it: what a FLOP for a deleted flight should do
// is open upstream (R-FLOP-TARGET), so a "correct pipeline" has no single expected state.
func fdel(r *rand.Rand, p *plan, evs []opEvent) []opEvent {
	f := p.SODT.Add(-minutes(60 + r.IntN(181)))
	var out []opEvent
	for _, ev := range evs {
		if ev.at.Before(f) {
			out = append(out, ev)
		}
	}
	return append(out, opEvent{at: f, typ: "FLOP", styp: "FDEL", body: scalar("FDEL", ""), kind: KindFDEL, want: Succeeded})
}

// eobt is a FLOP whose STYP is outside the FLOP whitelist (R-FLOP-1): a legal message the
// pipeline skips as unsupported.
func eobt(p *plan) opEvent {
	return opEvent{
		at: p.SODT.Add(-100 * time.Minute), typ: "FLOP", styp: "EOBT",
		body: scalar("EOBT", FormatTime(p.est().Add(-5*time.Minute))),
		kind: KindUnsupported, want: Skipped,
	}
}
