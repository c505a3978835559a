package flight

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Order-safe application (the R-ORDER rules): a message applied out of ID order, a late
// arrival or a replay, never overwrites what a newer message wrote. Each flight carries its
// provenance: which message last wrote each part of its state, and every message's word on
// whether it exists. A message writes a part only when no newer message wrote it, so the state
// after any order of application is the state in-order processing gives (the exceptions are
// listed in docs/flight-domain.md, "Order-safe application").

// PartState is the part that names a flight's existence (ACTIVE or DELETED) in a superseded
// list; the other parts are SIS tags: each scalar (an attribute as TAG_ATTR), each collection
// and each raw element is one part.
const PartState = "STATE"

// rawTags are the raw elements the state keeps (R-FLIGHT-3).
var rawTags = []string{"SRVT", "VIPF"}

// lifeKept bounds a flight's life: a message older than its oldest kept entry finds no state
// to apply to and is superseded (R-ORDER-3). A flight receives a schedule word a day or so, so
// this is weeks of a flight's life.
const lifeKept = 64

// allParts is every part a schedule snapshot writes: the stored scalars but the derived
// statuses (they follow BOTM and LACL), the collections and the raw elements.
var allParts = func() []string {
	var out []string
	for _, s := range Scalars {
		if s != BoardingStatus && s != LastCallStatus {
			out = append(out, s)
		}
	}
	out = append(out, CollectionTags...)
	out = append(out, rawTags...)
	slices.Sort(out)
	return out
}()

// Life is one message's word on a flight's existence: a schedule record (ADFT, a snapshot's
// FLTR) says ACTIVE; an FDEL, a snapshot's omission and a master's cascade say DELETED.
type Life struct {
	Msg   int64  `json:"msg"`
	State string `json:"state"`
	// Via names the master whose deletion this child's word follows (R-CODESHARE-4,
	// R-CODESHARE-5): the word stands only while the child named that master at its ID. Was
	// is the message's own word it overrode (a record of the child under a deleted master),
	// which comes back if the reason goes.
	Via string `json:"via,omitempty"`
	Was string `json:"was,omitempty"`
}

// Named is one message's MAID: the master a code-share child named from that message on
// ("" for none).
type Named struct {
	Msg  int64  `json:"msg"`
	MAID string `json:"maid"`
}

// maidKept bounds the MAID history: code-share links change rarely.
const maidKept = 16

// Provenance is which message last wrote each part of one flight (R-ORDER-1). It is stored
// with the flight's row and written by the same statement.
type Provenance struct {
	// Base is the writer of every part not in Parts: a snapshot writes them all, and a flight
	// stored before provenance existed starts with its last applied message (Conservative).
	Base int64 `json:"base,omitempty"`
	// Parts holds the writer of each part written after Base, or kept from before it.
	Parts map[string]int64 `json:"parts,omitempty"`
	// Life is every message's word on the flight's existence, in ID order, at most lifeKept.
	// Empty means nothing is known: the flight was in its current state at every message.
	Life []Life `json:"life,omitempty"`
	// MAID is every message's MAID, in ID order, at most maidKept: which master the flight
	// named at a master's deletion decides whether the deletion took it (R-ORDER-7). Empty
	// means the flight always named the master it names now.
	MAID []Named `json:"maid,omitempty"`
	// Last is the flight's last_msg_id as of the last write that knew the provenance: a row
	// whose last_msg_id differs was written without it (a previous release during an upgrade)
	// and is read as Conservative.
	Last int64 `json:"last,omitempty"`
}

// Conservative is the provenance of a flight written without one: every part and its
// existence count as written by its last applied message, so every older message is
// superseded and nothing newer is overwritten.
func Conservative(lastMsgID int64, state string) Provenance {
	return Provenance{Base: lastMsgID, Life: []Life{{Msg: lastMsgID, State: state}}, Last: lastMsgID}
}

// Of returns the message that last wrote part.
func (p Provenance) Of(part string) int64 {
	if m, ok := p.Parts[part]; ok {
		return m
	}
	return p.Base
}

// Clone returns a deep copy.
func (p Provenance) Clone() Provenance {
	c := p
	c.Parts = maps.Clone(p.Parts)
	c.Life = slices.Clone(p.Life)
	c.MAID = slices.Clone(p.MAID)
	return c
}

// Equal reports whether two provenances record the same writers.
func (p Provenance) Equal(q Provenance) bool {
	return p.Base == q.Base && p.Last == q.Last && maps.Equal(p.Parts, q.Parts) && slices.Equal(p.Life, q.Life) &&
		slices.Equal(p.MAID, q.MAID)
}

func (p *Provenance) set(part string, m int64) {
	if p.Parts == nil {
		p.Parts = map[string]int64{}
	}
	p.Parts[part] = m
}

// rebase shortens the provenance after a snapshot at m wrote every part it did not find
// newer: those parts are m, which becomes the base; a part it did not write keeps its writer.
func (p *Provenance) rebase(m int64) {
	if p.Base > m {
		return // parts without an entry are newer than m: nothing to fold
	}
	for _, part := range allParts {
		if _, ok := p.Parts[part]; !ok && p.Base != m {
			p.set(part, p.Base)
		}
	}
	p.Base = m
	for part, w := range p.Parts {
		if w == m {
			delete(p.Parts, part)
		}
	}
	if len(p.Parts) == 0 {
		p.Parts = nil
	}
}

// life is the flight's known life. A state its newest word disagrees with was set by a writer
// that did not keep the life: the state is then taken as said by the flight's last message.
func (f Flight) life() []Life {
	life := f.Prov.Life
	if n := len(life); n > 0 && life[n-1].State != f.State {
		return append(slices.Clone(life), Life{Msg: max(f.LastMsgID, life[n-1].Msg), State: f.State})
	}
	return life
}

// stateAt is the flight's existence as message m found it in ID order: the word of the last
// message before m, "" when the flight did not exist yet. Without a known life the flight was
// always as it is.
func (f Flight) stateAt(m int64) string {
	life := f.life()
	switch {
	case len(life) == 0:
		return f.State
	case len(life) >= lifeKept && m <= life[0].Msg:
		return "" // older than what the life keeps: unknown, so superseded
	}
	state := ""
	for _, l := range life {
		if l.Msg >= m {
			break
		}
		state = l.State
	}
	return state
}

// newestLife is the message whose word decides the flight's existence now.
func (f Flight) newestLife() int64 {
	if life := f.life(); len(life) > 0 {
		return life[len(life)-1].Msg
	}
	return 0
}

// say records message m's word on the flight's existence and sets the state to what the
// newest word says: a later word stands over an older message's.
func (f *Flight) say(m int64, state string) {
	life := slices.Clone(f.life())
	if len(life) == 0 && f.State != "" && f.Version > 0 {
		life = []Life{{Msg: 0, State: f.State}} // always as it was, until m
	}
	i, found := slices.BinarySearchFunc(life, m, func(l Life, m int64) int { return cmpInt(l.Msg, m) })
	if found {
		life[i].State = state
	} else {
		life = slices.Insert(life, i, Life{Msg: m, State: state})
	}
	if len(life) > lifeKept {
		life = life[len(life)-lifeKept:]
	}
	f.Prov.Life = life
	f.State = life[len(life)-1].State
}

// named records that message m named master maid ("" for none).
func (f *Flight) named(m int64, maid string) {
	h := f.Prov.MAID
	if len(h) == 0 && f.Version > 0 {
		h = []Named{{Msg: 0, MAID: f.Scalars["MAID"]}} // always as it was, until m
	}
	i, found := slices.BinarySearchFunc(h, m, func(n Named, m int64) int { return cmpInt(n.Msg, m) })
	if found {
		h[i].MAID = maid
	} else {
		h = slices.Insert(slices.Clone(h), i, Named{Msg: m, MAID: maid})
	}
	if len(h) > maidKept {
		h = h[len(h)-maidKept:]
	}
	f.Prov.MAID = h
}

// maidAt is the master the flight named at message m in ID order, m's own MAID included (a
// snapshot both names a master and deletes it at one ID).
func (f Flight) maidAt(m int64) string {
	h := f.Prov.MAID
	if len(h) == 0 || (len(h) >= maidKept && m < h[0].Msg) {
		return f.Scalars["MAID"] // unknown: taken as it is now
	}
	maid := ""
	for _, n := range h {
		if n.Msg > m {
			break
		}
		maid = n.MAID
	}
	return maid
}

// stateThrough is the flight's existence after message m in ID order, m's own word included.
func (f Flight) stateThrough(m int64) string {
	life := f.life()
	if len(life) == 0 {
		return f.State
	}
	state := ""
	for _, l := range life {
		if l.Msg > m {
			break
		}
		state = l.State
	}
	return state
}

// endedAt reports whether the flight's word at m deleted it: a DELETED word that follows an
// ACTIVE one.
func (f Flight) endedAt(m int64) bool {
	life := f.life()
	i := slices.IndexFunc(life, func(l Life) bool { return l.Msg == m })
	return i > 0 && life[i].State == Deleted && life[i-1].State == Active
}

// codeShare brings child x's life in line with its masters' (R-CODESHARE-4, R-CODESHARE-5,
// R-ORDER-7): there is never an active child under a deleted master. In ID order a master's
// deletion takes with it the children active at its ID that named it then, and a schedule
// record of a child that names a master deleted by then (earlier, or by the same package)
// leaves the child deleted with it. Out of ID order x may have missed such a deletion (it was
// not yet the master's child, or did not exist, when the deletion was applied), or hold one
// that no longer stands (a later-arriving older message changed which master it named, or
// brought the master back before it). masters are the flights x names or named, as they are
// now. It reports whether x's life changed.
func codeShare(x *Flight, masters ...Flight) bool {
	before := x.Prov.Life
	byID := map[string]Flight{}
	for _, m := range masters {
		if m.FLID != x.FLID {
			byID[m.FLID] = m
		}
	}
	// The words a master's deletion put there stand only while their reason does.
	var life []Life
	for _, l := range x.life() {
		if l.Via != "" {
			m, known := byID[l.Via]
			stands := x.maidAt(l.Msg) == l.Via
			switch {
			case !known:
			case l.Was != "":
				stands = stands && m.stateThrough(l.Msg) == Deleted
			default:
				stands = stands && m.endedAt(l.Msg)
			}
			if !stands {
				if l.Was == "" {
					continue // the cascade's word alone: gone
				}
				l = Life{Msg: l.Msg, State: l.Was} // the record's own word comes back
			}
		}
		life = append(life, l)
	}
	x.setLife(life)
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		m := byID[id]
		// A record of x naming a master deleted by then: x is deleted with it.
		for i, l := range x.Prov.Life {
			if l.State == Active && l.Via == "" && x.maidAt(l.Msg) == id && m.stateThrough(l.Msg) == Deleted {
				x.Prov.Life[i] = Life{Msg: l.Msg, State: Deleted, Via: id, Was: Active}
			}
		}
		x.setLife(x.Prov.Life)
		// A deletion of the master while x was active and named it.
		words := m.life()
		for i := 1; i < len(words); i++ {
			w := words[i]
			if w.State != Deleted || words[i-1].State != Active || x.maidAt(w.Msg) != id || x.hasWord(w.Msg) || x.stateAt(w.Msg) != Active {
				continue
			}
			x.say(w.Msg, Deleted)
			if j := slices.IndexFunc(x.Prov.Life, func(l Life) bool { return l.Msg == w.Msg }); j >= 0 {
				x.Prov.Life[j].Via = id
			}
		}
	}
	if slices.Equal(before, x.Prov.Life) {
		x.Prov.Life = before
		return false
	}
	return true
}

// viaOf is the master whose deletion took the flight's word at message m ("" for none).
func viaOf(f Flight, m int64) string {
	for _, l := range f.Prov.Life {
		if l.Msg == m {
			return l.Via
		}
	}
	return ""
}

// setLife sets the life and the state its newest word says.
func (f *Flight) setLife(life []Life) {
	f.Prov.Life = life
	if len(life) > 0 {
		f.State = life[len(life)-1].State
	}
}

// hasWord reports whether message m spoke of the flight's existence.
func (f Flight) hasWord(m int64) bool {
	return slices.ContainsFunc(f.Prov.Life, func(l Life) bool { return l.Msg == m })
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// take keeps of cand, the state message m's rule made from cur, only the parts m may write
// (R-ORDER-2): a part of parts that a newer message wrote is given back its value in cur and
// reported with that message; every other part of parts is recorded as written by m.
func take(cur Flight, cand *Flight, parts []string, m int64) map[string]int64 {
	var superseded map[string]int64
	for _, part := range parts {
		if part == "MAID" {
			cand.named(m, cand.Scalars["MAID"])
		}
		if w := cur.Prov.Of(part); w > m {
			// Reported only where the message wanted another value than the newer one's: an
			// identity re-sent with every message (FFID) is no loss.
			if !samePart(cur, *cand, part) {
				if superseded == nil {
					superseded = map[string]int64{}
				}
				superseded[part] = w
			}
			restore(cur, cand, part)
			continue
		}
		cand.Prov.set(part, m)
	}
	return superseded
}

// restore gives part in f the value it has in from.
func restore(from Flight, f *Flight, part string) {
	switch {
	case slices.Contains(CollectionTags, part):
		if items, ok := from.Collections[part]; ok {
			f.Collections[part] = items
		} else {
			delete(f.Collections, part)
		}
	case slices.Contains(rawTags, part):
		if raws, ok := from.Raw[part]; ok {
			f.Raw[part] = raws
		} else {
			delete(f.Raw, part)
		}
	default:
		if v, ok := from.Scalars[part]; ok {
			f.Scalars[part] = v
		} else {
			delete(f.Scalars, part)
		}
	}
}

// samePart reports whether part has the same value in a and b.
func samePart(a, b Flight, part string) bool {
	if slices.Contains(rawTags, part) {
		ra, oka := a.Raw[part]
		rb, okb := b.Raw[part]
		return oka == okb && slices.Equal(ra, rb)
	}
	return partValue(a, part) == partValue(b, part)
}

// SupersededReason is the reason of a message every part of which a newer message wrote
// (R-ORDER-2): the parts, then the newest message that wrote one of them.
func SupersededReason(superseded map[string]int64) string {
	parts := slices.Sorted(maps.Keys(superseded))
	newest := int64(0)
	for _, w := range superseded {
		newest = max(newest, w)
	}
	return fmt.Sprintf("superseded: %s newer at msg %d", strings.Join(parts, ","), newest)
}

// recordParts are the parts a record writes whatever its kind: FFID when sent non-empty (every
// STYP keeps it up to date, R-FLOP-EMPTY) and the raw elements it carries (keepRaw).
func recordParts(rec sis.FlightRecord) []string {
	var out []string
	if rec.FFID.Present && rec.FFID.Value != "" {
		out = append(out, "FFID")
	}
	for _, t := range rawTags {
		if _, ok := rec.Raw[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// Change is one part's value before and after a message, for the flight's history: a scalar
// as stored, a collection or the MAFL as their published JSON, the state; "" when absent.
type Change struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// Diff is what changed between two states of a flight, by part (Changed's tags). prev is
// nil for a flight the message created.
func Diff(prev *Flight, next Flight) map[string]Change {
	before := New(next.FLID)
	before.State = ""
	if prev != nil {
		before = *prev
	}
	out := map[string]Change{}
	for _, tag := range Changed(before, next) {
		out[tag] = Change{Old: partValue(before, tag), New: partValue(next, tag)}
	}
	return out
}

func partValue(f Flight, tag string) string {
	switch {
	case tag == PartState:
		return f.State
	case tag == "MAFL":
		if len(f.MAFL) == 0 {
			return ""
		}
		return string(mustJSON(f.FLID, f.MAFL))
	case slices.Contains(CollectionTags, tag):
		items, ok := f.Collections[tag]
		if !ok {
			return ""
		}
		return string(mustJSON(f.FLID, collectionDoc(tag, items)))
	}
	return f.Scalars[tag]
}
