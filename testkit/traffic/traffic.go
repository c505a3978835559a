// Package traffic generates a realistic day of SIS traffic from an airport AODB (home station
// CTU) for the demo, benchmarks and end-to-end tests: the day's schedule as one SCHD ADFT per
// flight, then the operational FLOP updates of R-FLOP-1 interleaved in time order, a few
// deletions, reference-data changes, unsupported types, malformed messages and exact re-sends.
//
// Every message says what a correct pipeline ends with (Want), so a test can load the day into
// the inbox and compare terminal states without knowing how the day was made. The output is a
// pure function of Options: the same options give byte-identical messages.
package traffic

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind says what a generated message is for.
type Kind string

// The kinds of generated message.
const (
	KindSchedule    Kind = "schedule"    // SCHD STYP=ADFT, one flight
	KindSnapshot    Kind = "snapshot"    // SCHD STYP=DNLD, the whole day's schedule (Options.Snapshot)
	KindFLOP        Kind = "flop"        // FLOP with a whitelisted STYP (R-FLOP-1)
	KindFDEL        Kind = "fdel"        // FLOP STYP=FDEL
	KindReference   Kind = "reference"   // reference data ADD/UPD (R-REF-3)
	KindMalformed   Kind = "malformed"   // not a decodable SIS message
	KindDuplicate   Kind = "duplicate"   // exact re-send of an earlier FLOP
	KindUnsupported Kind = "unsupported" // legal but not handled: SCHS, DLYL, FLOP STYP=EOBT
)

// Terminal processing states a correct pipeline reaches (R-PUMP-11).
const (
	Succeeded = "SUCCEEDED"
	Skipped   = "SKIPPED"
	Dead      = "DEAD"
)

// Message is one inbox row's text and what it should come to.
type Message struct {
	Kind Kind
	XML  string // the full message text as it would sit in CMINMSGS_CLOB_MSG
	// FLID is the flight the pipeline attributes the message to, "" if none. Malformed
	// messages have none: a message that cannot be decoded concerns no flight.
	FLID string
	Want string // SUCCEEDED, SKIPPED or DEAD

	// The META values the text carries, zero where it carries none (a malformed message
	// without META or without SEQN). A loader uses them for the CMINMSGS_SUBSYSTEM_* columns
	// the legacy inbox writer fills from the envelope. A duplicate carries its original's.
	SNDR string
	SEQN int64
	DTTM time.Time
	TYPE string
	STYP string
}

// Options shape a generated day. The zero value is a usable default.
type Options struct {
	// Day is the operation day: its calendar date, read in its own location, is the airport
	// local date. Default: today in Asia/Shanghai.
	Day time.Time
	// Flights is the number of flights (arrivals plus departures). Default 300.
	Flights int
	// Seed makes the output deterministic: same options, same messages.
	Seed int64
	// Malformed is the number of malformed messages mixed in. Default 3; negative for none.
	Malformed int
	// Duplicates is the number of exact re-sends of an earlier FLOP (same text, so the same
	// SNDR/TYPE/STYP/SEQN). Default 3; negative for none.
	Duplicates int
	// Sender is META SNDR. Default "AODB".
	Sender string
	// Snapshot publishes the day's schedule as one SCHD DNLD at 00:00, the daily snapshot, instead
	// of one ADFT per flight.
	Snapshot bool
	// StartSEQN is the first SEQN. Default 1. Loading several days into one inbox needs
	// disjoint SEQN ranges, since the identity SNDR|TYPE|STYP|SEQN has no day boundary by
	// default (identity.include-day-boundary=false).
	StartSEQN int64
}

func (o Options) withDefaults() Options {
	if o.Day.IsZero() {
		o.Day = time.Now().In(airportZone)
	}
	if o.Flights <= 0 {
		o.Flights = 300
	}
	if o.Malformed == 0 {
		o.Malformed = 3
	}
	o.Malformed = max(o.Malformed, 0)
	if o.Duplicates == 0 {
		o.Duplicates = 3
	}
	o.Duplicates = max(o.Duplicates, 0)
	if o.Sender == "" {
		o.Sender = "AODB"
	}
	if o.StartSEQN <= 0 {
		o.StartSEQN = 1
	}
	return o
}

// DayFlights is the day's schedule as Day publishes it (before the day's changes): what AODB
// answers a schedule request for that day with.
func DayFlights(opts Options) []Flight {
	o := opts.withDefaults()
	r := rand.New(rand.NewPCG(uint64(o.Seed), pcgStream))
	y, m, d := o.Day.Date()
	return publishedFlights(schedule(r, time.Date(y, m, d, 0, 0, 0, 0, airportZone), o.Flights))
}

func publishedFlights(plans []*plan) []Flight {
	out := make([]Flight, len(plans))
	for i, p := range plans {
		out[i] = p.Flight
	}
	return out
}

// item is a message before it has its SEQN and DTTM.
type item struct {
	at        time.Time
	kind      Kind
	want      string
	flid      string
	typ, styp string
	noMeta    bool // the text has no META at all
	noSEQN    bool // the META has no SEQN
	render    func(sndr string, seqn int64, dttm time.Time) string
}

// pcgStream fixes the second PCG word so the seed alone decides the output.
const pcgStream = 0x5349535f54524146 // "SIS_TRAF"

// adftWindow is how long the AODB takes to push the day's schedule at the start of the day.
const adftWindow = 20 * time.Minute

// Day generates the whole operation day in inbox order.
//
// Order: one ADFT per flight first (from 00:00, in FLID order), then every other message in
// time order. DTTM never decreases, except that a duplicate repeats its original's text and
// so its DTTM. Every message has its own SEQN except the duplicates.
func Day(opts Options) []Message {
	o := opts.withDefaults()
	r := rand.New(rand.NewPCG(uint64(o.Seed), pcgStream))
	y, m, d := o.Day.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, airportZone)
	plans := schedule(r, day, o.Flights)
	n := len(plans)

	items := make([]item, 0, n*12)
	if o.Snapshot {
		published := publishedFlights(plans)
		items = append(items, item{at: day, kind: KindSnapshot, want: Succeeded, typ: "SCHD", styp: "DNLD",
			render: func(sndr string, seqn int64, dttm time.Time) string {
				return snapshot(sndr, seqn, dttm, "DNLD", published)
			}})
	} else {
		for i, p := range plans {
			f := p.Flight // the schedule as published, before the day's changes mutate the plan
			items = append(items, item{
				at: day.Add(time.Duration(i) * adftWindow / time.Duration(n)), kind: KindSchedule, want: Succeeded,
				flid: f.FLID, typ: "SCHD", styp: "ADFT",
				render: func(sndr string, seqn int64, dttm time.Time) string { return adft(sndr, seqn, dttm, f) },
			})
		}
	}
	nADFT := len(items)

	// Which flights get deleted, cancelled (some cancellations undone) or an unsupported EOBT.
	const (
		normal = iota
		deleted
		cancelled
		undone
	)
	fate := make([]int, n)
	order := r.Perm(n)
	fdelN, cnclN := 0, 0
	if n >= 10 {
		fdelN, cnclN = max(1, n/100), max(1, n/60)
	}
	undoN := (cnclN + 1) / 3
	for k, i := range order[:fdelN+cnclN] {
		switch {
		case k < fdelN:
			fate[i] = deleted
		case k < fdelN+undoN:
			fate[i] = undone
		default:
			fate[i] = cancelled
		}
	}
	unsupported := unsupportedMix(max(2, n/100))
	eobtFor := map[int]bool{} // flight index → carries an EOBT
	shortfall := 0            // EOBT slots no eligible departure could take
	for _, u := range unsupported {
		if u == "EOBT" {
			shortfall++
		}
	}
	for _, i := range order[fdelN+cnclN:] {
		if shortfall > 0 && plans[i].MVIN == "D" {
			eobtFor[i] = true
			shortfall--
		}
	}

	for i, p := range plans {
		evs := operations(r, p)
		switch fate[i] {
		case deleted:
			evs = fdel(r, p, evs)
		case cancelled:
			evs = cancel(r, p, evs, false)
		case undone:
			evs = cancel(r, p, evs, true)
		}
		if eobtFor[i] {
			evs = append(evs, eobt(p))
		}
		for _, ev := range evs {
			items = append(items, flopItem(p, ev))
		}
	}

	// Messages that concern no flight, at random moments of the working day.
	moments := func(k int) []time.Time {
		ts := make([]time.Time, k)
		for i := range ts {
			ts[i] = day.Add(time.Hour + time.Duration(r.Int64N(int64(21*time.Hour))))
		}
		slices.SortFunc(ts, time.Time.Compare) // keeps ADD before the UPD of the same record
		return ts
	}
	for i, at := range moments(max(2, n/60)) {
		items = append(items, referenceItem(at, i))
	}
	times := moments(len(unsupported))
	for i, u := range unsupported {
		switch u {
		case "EOBT":
			// The EOBTs travel with their flights' updates; a DLYL stands in for any slot
			// that found no departure.
			if shortfall > 0 {
				shortfall--
				items = append(items, dlylItem(times[i], i))
			}
		case "SCHS":
			items = append(items, schsItem(times[i], day, plans[r.IntN(n)].Flight))
		default:
			items = append(items, dlylItem(times[i], i))
		}
	}
	for i, at := range moments(o.Malformed) {
		items = append(items, malformedItem(at, i, plans[r.IntN(n)]))
	}

	// The ADFTs stay first; everything else goes out in time order. The sort is stable so a
	// flight's updates keep the order operations gave them.
	rest := items[nADFT:]
	slices.SortStableFunc(rest, func(a, b item) int { return a.at.Compare(b.at) })

	msgs := make([]Message, 0, len(items)+o.Duplicates)
	seqn := o.StartSEQN
	var prev time.Time
	for _, it := range items {
		dttm := it.at.Truncate(time.Second)
		if dttm.Before(prev) {
			dttm = prev
		}
		prev = dttm
		msg := Message{
			Kind: it.kind, FLID: it.flid, Want: it.want,
			SNDR: o.Sender, SEQN: seqn, DTTM: dttm, TYPE: it.typ, STYP: it.styp,
			XML: it.render(o.Sender, seqn, dttm),
		}
		switch {
		case it.noMeta:
			msg.SNDR, msg.SEQN, msg.DTTM, msg.TYPE, msg.STYP = "", 0, time.Time{}, "", ""
		case it.noSEQN:
			msg.SEQN = 0
		}
		msgs = append(msgs, msg)
		seqn++
	}
	return withDuplicates(r, msgs, o.Duplicates)
}

func flopItem(p *plan, ev opEvent) item {
	flid, ffid, styp, inner := p.FLID, p.FFID(), ev.styp, ev.body
	return item{
		at: ev.at, kind: ev.kind, want: ev.want, flid: flid, typ: ev.typ, styp: styp,
		render: func(sndr string, seqn int64, dttm time.Time) string {
			return flop(sndr, seqn, dttm, flid, ffid, styp, inner)
		},
	}
}

// unsupportedMix lists the unsupported messages of the day: a seasonal schedule (SCHS, legal
// but not processed, docs/sis-format.md), FLOP STYP=EOBT (outside the whitelist) and a delay-code list
// (DLYL, a category msgexchange does not process).
func unsupportedMix(k int) []string {
	cycle := []string{"SCHS", "EOBT", "DLYL", "EOBT"}
	out := make([]string, k)
	for i := range out {
		out[i] = cycle[i%len(cycle)]
	}
	return out
}

// withDuplicates re-sends k earlier FLOPs verbatim, each some way after its original, the
// way an AODB resends after a lost acknowledgement. The identity SNDR|TYPE|STYP|SEQN is then
// already bound, so the pipeline skips the copy (R-IDENT-1).
func withDuplicates(r *rand.Rand, msgs []Message, k int) []Message {
	var cands []int
	for i, m := range msgs {
		if m.Kind == KindFLOP {
			cands = append(cands, i)
		}
	}
	if k == 0 || len(cands) == 0 {
		return msgs
	}
	type dup struct{ after, orig int }
	dups := make([]dup, k)
	perm := r.Perm(len(cands))
	for j := range dups {
		orig := cands[perm[j%len(cands)]]
		dups[j] = dup{after: orig + r.IntN(min(300, len(msgs)-orig)), orig: orig}
	}
	slices.SortStableFunc(dups, func(a, b dup) int { return a.after - b.after })
	out := make([]Message, 0, len(msgs)+k)
	for i, m := range msgs {
		out = append(out, m)
		for len(dups) > 0 && dups[0].after == i {
			c := msgs[dups[0].orig]
			c.Kind, c.Want = KindDuplicate, Skipped
			out = append(out, c)
			dups = dups[1:]
		}
	}
	return out
}

// malformedItem makes the ways an inbox row fails to be a SIS message (issue 3's MALFORMED:
// not well-formed, not MSG, no META, a required META field missing), in rotation.
func malformedItem(at time.Time, i int, p *plan) item {
	flid, ffid := p.FLID, p.FFID()
	estt := scalar("ESTT", FormatTime(p.est()))
	it := item{at: at, kind: KindMalformed, want: Dead, typ: "FLOP", styp: "ESTT"}
	switch i % 4 {
	case 0: // cut off in transit: META intact, body truncated
		it.render = func(sndr string, seqn int64, dttm time.Time) string {
			full := flop(sndr, seqn, dttm, flid, ffid, "ESTT", estt)
			from := strings.Index(full, "</META>") + len("</META>")
			return full[:from+(len(full)-from)/2]
		}
	case 1: // no META
		it.noMeta = true
		it.render = func(string, int64, time.Time) string {
			var b body
			b.open(1, "FLOP")
			b.leaf(2, "FLID", flid)
			b.leaf(2, "FFID", ffid)
			b.WriteString(estt)
			b.close(1, "FLOP")
			return xmlDecl + msgOpen + b.String() + "</MSG>"
		}
	case 2: // wrong root element
		it.render = func(sndr string, seqn int64, dttm time.Time) string {
			full := flop(sndr, seqn, dttm, flid, ffid, "ESTT", estt)
			full = strings.Replace(full, "<MSG ", "<MESSAGE ", 1)
			return strings.TrimSuffix(full, "</MSG>") + "</MESSAGE>"
		}
	default: // META without SEQN
		it.noSEQN = true
		it.render = func(sndr string, seqn int64, dttm time.Time) string {
			full := flop(sndr, seqn, dttm, flid, ffid, "ESTT", estt)
			var b body
			b.leaf(2, "SEQN", strconv.FormatInt(seqn, 10))
			return strings.Replace(full, b.String(), "", 1)
		}
	}
	return it
}
