package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Check is one verdict of the run.
type Check struct {
	Name   string
	Pass   bool
	Detail string
}

// The checks, in the order the summary prints them.
const (
	CheckEnqueued   = "every inbox row enqueued once"
	CheckTerminal   = "every row terminal and marked"
	CheckExhausted  = "0 DEAD(EXHAUSTED) with an outage reason"
	CheckDouble     = "0 double-applied identities"
	CheckKafkaOrder = "per-FLID Kafka order intact, every event delivered"
	CheckClean      = "final state identical to a clean run in the same ID order"
	CheckCodeShare  = "0 active code-share children under a deleted master"
	CheckFaults     = "every planned fault injected"
	CheckStayedUp   = "no service exited on its own"
)

// evidence is everything the checks judge.
type evidence struct {
	chaos, clean *snapshot
	inbox        inboxState
	load         *loadResult
	msg, schd    map[string][]received
	foreign      int
	// broken counts the records that break the event contract; brokenFirst quotes the first.
	broken      int
	brokenFirst []string
	kafkaState  []string // partitions whose consumer position or stable offset does not add up
	faults      map[Kind]*tally
	// selfExits and selfExitLines are the processes that exited without being killed, which the
	// supervisor restarted.
	selfExits, settingsRefused int
	selfExitLines              []string
	long                       []longSlot
	kinds                      []Kind // the run's short fault kinds (nil: ShortKinds)
}

func runChecks(ev evidence) []Check {
	return []Check{
		checkEnqueued(ev), checkTerminal(ev), checkExhausted(ev), checkDouble(ev),
		checkKafkaOrder(ev), checkClean(ev), checkCodeShare(ev), checkFaults(ev), checkStayedUp(ev),
	}
}

// checkStayedUp: a service never exits because a dependency is down; it stays up, not ready,
// and waits (R-START-1). A process the supervisor had to restart is a crash loop on a cluster.
// The one exception is R-START-2's: the long Redis outage switches the services' Redis user
// off, and a service killed and restarted meanwhile is refused its credentials at start-up,
// which stops it with service.ExitSettingsRefused until the user is back.
func checkStayedUp(ev evidence) Check {
	c := Check{Name: CheckStayedUp, Pass: ev.selfExits == ev.settingsRefused}
	switch {
	case ev.selfExits == 0:
		c.Detail = "every process ran until the harness killed or stopped it"
	case c.Pass:
		c.Detail = fmt.Sprintf("only exits for settings a dependency refused at start-up (R-START-2, the Redis user switched off): %s",
			strings.Join(ev.selfExitLines, "; "))
	default:
		c.Detail = fmt.Sprintf("%d exits the supervisor restarted, %d of them not for refused settings: %s",
			ev.selfExits, ev.selfExits-ev.settingsRefused, strings.Join(ev.selfExitLines, "; "))
	}
	return c
}

// examples formats at most five items.
func examples[T any](items []T, f func(T) string) string {
	var parts []string
	for i, it := range items {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("… %d more", len(items)-5))
			break
		}
		parts = append(parts, f(it))
	}
	return strings.Join(parts, "; ")
}

func ids(v []int64) string { return examples(v, func(id int64) string { return fmt.Sprint(id) }) }

func checkEnqueued(ev evidence) Check {
	c := Check{Name: CheckEnqueued}
	var problems []string
	inInbox := map[int64]bool{}
	for _, id := range ev.inbox.ids {
		inInbox[id] = true
	}
	var notEnqueued, extra []int64
	for _, id := range ev.inbox.ids {
		if _, ok := ev.chaos.outcomes[id]; !ok {
			notEnqueued = append(notEnqueued, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ev.chaos.outcomes)) {
		if !inInbox[id] {
			extra = append(extra, id)
		}
	}
	if len(notEnqueued) > 0 {
		problems = append(problems, fmt.Sprintf("%d inbox rows never enqueued: %s", len(notEnqueued), ids(notEnqueued)))
	}
	if len(extra) > 0 {
		problems = append(problems, fmt.Sprintf("%d enqueued IDs not in the inbox: %s", len(extra), ids(extra)))
	}
	// The loader's view: every committed row is in the inbox and nothing else is.
	committed := map[int64]bool{}
	for _, id := range ev.load.ids {
		committed[id] = true
	}
	var expectHole []int64
	expectHole = append(expectHole, ev.load.rolledBack...)
	var lateHeld time.Duration
	for _, l := range ev.load.late {
		if l.err != nil {
			delete(committed, l.id)
			expectHole = append(expectHole, l.id)
		}
		lateHeld = max(lateHeld, l.held)
	}
	// A late arrival's ID was released while its insert was open: a released hole, and then
	// (committed) a late arrival, enqueued once (R-INGEST-8, R-INV-20).
	planned := map[int64]bool{}
	for _, a := range ev.load.arrivals {
		switch {
		case a.err != nil:
			delete(committed, a.id)
			expectHole = append(expectHole, a.id)
			if a.released {
				problems = append(problems, fmt.Sprintf("late arrival %d: its commit failed: %v", a.id, a.err))
			}
		case a.released:
			expectHole = append(expectHole, a.id)
			planned[a.id] = true
		default:
			problems = append(problems, fmt.Sprintf("late arrival %d: ingest did not release its ID within %s while its insert was open", a.id, releaseWait))
		}
	}
	var lost, foreign []int64
	for id := range committed {
		if !inInbox[id] {
			lost = append(lost, id)
		}
	}
	for _, id := range ev.inbox.ids {
		if !committed[id] {
			foreign = append(foreign, id)
		}
	}
	slices.Sort(lost)
	if len(lost) > 0 {
		problems = append(problems, fmt.Sprintf("%d committed rows missing from the inbox: %s", len(lost), ids(lost)))
	}
	if len(foreign) > 0 {
		problems = append(problems, fmt.Sprintf("%d inbox rows the loader did not commit: %s", len(foreign), ids(foreign)))
	}
	// Holes: ingest must have released exactly the IDs that never committed, each once.
	released := map[int64]bool{}
	for _, h := range ev.chaos.holes {
		for id := h[0]; id <= h[1]; id++ {
			released[id] = true
		}
	}
	want := map[int64]bool{}
	for _, id := range expectHole {
		want[id] = true
	}
	var unreleased, wrong []int64
	for id := range want {
		if !released[id] {
			unreleased = append(unreleased, id)
		}
	}
	for id := range released {
		if !want[id] {
			wrong = append(wrong, id)
		}
	}
	slices.Sort(unreleased)
	slices.Sort(wrong)
	if len(unreleased) > 0 {
		problems = append(problems, fmt.Sprintf("%d rolled-back IDs never released as holes: %s", len(unreleased), ids(unreleased)))
	}
	if len(wrong) > 0 {
		problems = append(problems, fmt.Sprintf("%d IDs released as holes that are not rolled back: %s", len(wrong), ids(wrong)))
	}
	// A late arrival is a row whose ID was released before it committed. The planned ones
	// are expected, each exactly once; any other means discovery released an ID too early
	// (the harness keeps late commits well inside max-commit-delay).
	found := map[int64]bool{}
	var unplanned []int64
	for _, id := range ev.chaos.late {
		found[id] = true
		if !planned[id] {
			unplanned = append(unplanned, id)
		}
	}
	var missed []int64
	for id := range planned {
		if !found[id] {
			missed = append(missed, id)
		}
	}
	slices.Sort(missed)
	if len(unplanned) > 0 {
		problems = append(problems, fmt.Sprintf("%d unplanned late arrivals (released before they committed, processed out of ID order): %s",
			len(unplanned), ids(unplanned)))
	}
	if len(missed) > 0 {
		problems = append(problems, fmt.Sprintf("%d planned late arrivals never found by the late watch: %s", len(missed), ids(missed)))
	}
	if len(ev.load.arrivals) > 0 && len(planned) == 0 {
		problems = append(problems, fmt.Sprintf("none of the %d planned late arrivals was made", len(ev.load.arrivals)))
	}
	c.Pass = len(problems) == 0
	if c.Pass {
		c.Detail = fmt.Sprintf("%d rows, each enqueued once; %d holes released exactly at the %d rolled-back and late-arrival IDs; %d late commits (held up to %s) enqueued in ID order; %d late arrivals, exactly the planned ones",
			len(ev.inbox.ids), len(ev.chaos.holes), len(want), len(ev.load.late), lateHeld.Round(time.Millisecond), len(planned))
	} else {
		c.Detail = strings.Join(problems, "; ")
	}
	return c
}

func terminal(state string) bool {
	return state == "SUCCEEDED" || state == "SKIPPED" || state == "DEAD"
}

func checkTerminal(ev evidence) Check {
	c := Check{Name: CheckTerminal}
	var unfinished, unmarked, abandoned []int64
	for _, id := range slices.Sorted(maps.Keys(ev.chaos.outcomes)) {
		o := ev.chaos.outcomes[id]
		switch {
		case !terminal(o.State):
			unfinished = append(unfinished, id)
		case o.Abandoned:
			abandoned = append(abandoned, id)
		case !o.Marked:
			unmarked = append(unmarked, id)
		}
	}
	var problems []string
	if len(unfinished) > 0 {
		problems = append(problems, fmt.Sprintf("%d not terminal: %s", len(unfinished), examples(unfinished, func(id int64) string {
			o := ev.chaos.outcomes[id]
			return fmt.Sprintf("%d %s after %d attempts (%s)", id, o.State, o.Attempts, short(o.Reason))
		})))
	}
	if len(abandoned) > 0 {
		problems = append(problems, fmt.Sprintf("%d markers abandoned: %s", len(abandoned), ids(abandoned)))
	}
	if len(unmarked) > 0 {
		problems = append(problems, fmt.Sprintf("%d terminal rows without backfill_at: %s", len(unmarked), ids(unmarked)))
	}
	if len(ev.inbox.unmarked) > 0 {
		problems = append(problems, fmt.Sprintf("%d inbox rows without the processed marker: %s", len(ev.inbox.unmarked), ids(ev.inbox.unmarked)))
	}
	c.Pass = len(problems) == 0
	if c.Pass {
		c.Detail = fmt.Sprintf("%d rows terminal, marked in proc_state and in the inbox", len(ev.chaos.outcomes))
	} else {
		c.Detail = strings.Join(problems, "; ")
	}
	return c
}

// outagePatterns are the error texts of an unreachable, stopped or locked dependency:
// timeouts, refused or dropped connections, a disabled account, a terminated backend.
var outagePatterns = []string{
	"context deadline exceeded", "i/o timeout", "timeout", "connection refused", "connection reset",
	"broken pipe", "eof", "bad connection", "invalid connection", "closed", "wrongpass", "noauth",
	"user is disabled", "terminating connection", "not currently accepting connections", "dial",
	"lock wait", "read inbox", "redis projection", "no route", "network",
}

// outageReason reports whether a failure text names an outage rather than the message.
func outageReason(reason string) bool { return containsAny(strings.ToLower(reason), outagePatterns...) }

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// short cuts s to about 200 bytes at a character boundary (texts carry Chinese remarks).
func short(s string) string {
	if len(s) <= 200 {
		return s
	}
	cut := 200
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func checkExhausted(ev evidence) Check {
	c := Check{Name: CheckExhausted}
	var outage, other []int64
	for _, id := range slices.Sorted(maps.Keys(ev.chaos.outcomes)) {
		o := ev.chaos.outcomes[id]
		if o.State != "DEAD" || o.Class != "EXHAUSTED" {
			continue
		}
		if outageReason(o.Reason) {
			outage = append(outage, id)
		} else {
			other = append(other, id)
		}
	}
	show := func(id int64) string { return fmt.Sprintf("%d %q", id, short(ev.chaos.outcomes[id].Reason)) }
	c.Pass = len(outage) == 0
	switch {
	case !c.Pass:
		c.Detail = fmt.Sprintf("%d messages charged for an outage: %s", len(outage), examples(outage, show))
	case len(other) > 0:
		c.Detail = fmt.Sprintf("0 with an outage reason; %d EXHAUSTED for other reasons (judged by the clean-run check): %s", len(other), examples(other, show))
	default:
		c.Detail = "no message went DEAD(EXHAUSTED)"
	}
	return c
}

// msgEvents counts the KAFKA:msg events of each message per FLID.
func msgEvents(s *snapshot) map[int64]map[string]int {
	out := map[int64]map[string]int{}
	for _, e := range s.events {
		if e.Target != "KAFKA:msg" {
			continue
		}
		if out[e.MsgID] == nil {
			out[e.MsgID] = map[string]int{}
		}
		out[e.MsgID][e.FLID]++
	}
	return out
}

// checkDouble finds messages applied more often than in the clean run: more KAFKA:msg events
// for a FLID (each application of a change writes one), or a duplicate identity that went
// through instead of being skipped.
func checkDouble(ev evidence) Check {
	c := Check{Name: CheckDouble}
	chaosN, cleanN := msgEvents(ev.chaos), msgEvents(ev.clean)
	_, disordered := ev.outOfOrder()
	var twice []string
	for _, id := range slices.Sorted(maps.Keys(chaosN)) {
		for _, flid := range slices.Sorted(maps.Keys(chaosN[id])) {
			n, want := chaosN[id][flid], cleanN[id][flid]
			if disordered[flid] {
				// Out of ID order a message may change what in ID order a newer one changed
				// (R-ORDER-6), but one application writes one change event per flight.
				want = max(want, 1)
			}
			if n > want {
				twice = append(twice, fmt.Sprintf("msg %d flight %s: %d change events, %d in the clean run", id, flid, n, want))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ev.chaos.outcomes)) {
		o, ref := ev.chaos.outcomes[id], ev.clean.outcomes[id]
		if o.State == "SUCCEEDED" && ref.State == "SKIPPED" && strings.HasPrefix(ref.Reason, "duplicate-of:") {
			twice = append(twice, fmt.Sprintf("msg %d (identity %s) applied; the clean run skipped it as %s", id, o.Identity, ref.Reason))
		}
	}
	// One binding per identity: the column is UNIQUE, so two rows can only share an identity
	// if one was never bound, which a SUCCEEDED message always is.
	holders := map[string][]int64{}
	for id, o := range ev.chaos.outcomes {
		if o.State == "SUCCEEDED" && o.Identity != "" {
			holders[o.Identity] = append(holders[o.Identity], id)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(holders)) {
		if len(holders[k]) > 1 {
			twice = append(twice, fmt.Sprintf("identity %s applied by messages %v", k, holders[k]))
		}
	}
	c.Pass = len(twice) == 0
	if c.Pass {
		c.Detail = fmt.Sprintf("%d identities applied once each, %d change events as in the clean run", len(holders), countEvents(ev.chaos, "KAFKA:msg"))
	} else {
		c.Detail = fmt.Sprintf("%d double applications: %s", len(twice), examples(twice, func(s string) string { return s }))
	}
	return c
}

func countEvents(s *snapshot, target string) int {
	n := 0
	for _, e := range s.events {
		if e.Target == target {
			n++
		}
	}
	return n
}

// firstSeen is the arrival order of the distinct event ids: what a consumer that drops the
// ids it has seen (docs/dispatcher.md: at least once, deduplicated by msgx-event-id) reads.
func firstSeen(recs []received) (order []received, dups int) {
	seen := map[int64]bool{}
	for _, r := range recs {
		if seen[r.eventID] {
			dups++
			continue
		}
		seen[r.eventID] = true
		order = append(order, r)
	}
	return order, dups
}

// orderProblem compares what arrived for one FLID on KAFKA:msg with its outbox events in
// event order: every event exactly in that order, nothing else.
func orderProblem(want []int64, got []received) string {
	order, _ := firstSeen(got)
	gotIDs := make([]int64, len(order))
	for i, r := range order {
		gotIDs[i] = r.eventID
	}
	if slices.Equal(gotIDs, want) {
		return ""
	}
	wantSet := map[int64]bool{}
	for _, id := range want {
		wantSet[id] = true
	}
	var unknown []int64
	gotSet := map[int64]bool{}
	for _, id := range gotIDs {
		gotSet[id] = true
		if !wantSet[id] {
			unknown = append(unknown, id)
		}
	}
	var missing []int64
	for _, id := range want {
		if !gotSet[id] {
			missing = append(missing, id)
		}
	}
	switch {
	case len(missing) > 0:
		return fmt.Sprintf("events %s never arrived", ids(missing))
	case len(unknown) > 0:
		return fmt.Sprintf("records of events %s that the outbox does not hold for it", ids(unknown))
	default:
		return fmt.Sprintf("arrived in the order %s, the outbox order is %s", ids(gotIDs), ids(want))
	}
}

func checkKafkaOrder(ev evidence) Check {
	c := Check{Name: CheckKafkaOrder}
	var problems []string
	msgByFLID := map[string][]int64{}
	schdRow := map[string]event{}
	var undelivered []event
	for _, e := range ev.chaos.events {
		if e.State != "SENT" {
			undelivered = append(undelivered, e)
		}
		if e.Target == "KAFKA:msg" {
			msgByFLID[e.FLID] = append(msgByFLID[e.FLID], e.ID)
		} else {
			schdRow[e.FLID] = e
		}
	}
	if len(undelivered) > 0 {
		problems = append(problems, fmt.Sprintf("%d outbox events not SENT: %s", len(undelivered), examples(undelivered, func(e event) string {
			return fmt.Sprintf("%d %s %s %s", e.ID, e.Target, e.FLID, e.State)
		})))
	}
	var order []string
	dups := 0
	for _, flid := range slices.Sorted(maps.Keys(msgByFLID)) {
		_, d := firstSeen(ev.msg[flid])
		dups += d
		if p := orderProblem(msgByFLID[flid], ev.msg[flid]); p != "" {
			order = append(order, "flight "+flid+": "+p)
		}
	}
	for _, flid := range slices.Sorted(maps.Keys(ev.msg)) {
		if _, ok := msgByFLID[flid]; !ok {
			order = append(order, fmt.Sprintf("flight %s: %d records on KAFKA:msg, no event in the outbox", flid, len(ev.msg[flid])))
		}
	}
	// KAFKA:schd carries the latest state: the versions a consumer reads never go back, and
	// the last record of each FLID is the outbox's current row.
	for _, flid := range slices.Sorted(maps.Keys(schdRow)) {
		row := schdRow[flid]
		recs := ev.schd[flid]
		firsts, d := firstSeen(recs)
		dups += d
		for i := 1; i < len(firsts); i++ {
			if firsts[i].version < firsts[i-1].version {
				order = append(order, fmt.Sprintf("flight %s on KAFKA:schd: version %d after %d", flid, firsts[i].version, firsts[i-1].version))
				break
			}
		}
		if len(recs) == 0 || recs[len(recs)-1].eventID != row.ID {
			last := "nothing"
			if len(recs) > 0 {
				last = fmt.Sprintf("event %d (version %d)", recs[len(recs)-1].eventID, recs[len(recs)-1].version)
			}
			order = append(order, fmt.Sprintf("flight %s on KAFKA:schd: last record is %s, the current state is event %d (version %d)",
				flid, last, row.ID, row.Version))
		}
	}
	if len(order) > 0 {
		problems = append(problems, fmt.Sprintf("%d FLIDs out of order or incomplete: %s", len(order), examples(order, func(s string) string { return s })))
	}
	if ev.foreign > 0 {
		problems = append(problems, fmt.Sprintf("%d records without an msgx-event-id header", ev.foreign))
	}
	if ev.broken > 0 {
		problems = append(problems, fmt.Sprintf("%d records break the event contract: %s", ev.broken, strings.Join(ev.brokenFirst, "; ")))
	}
	if len(problems) > 0 && len(ev.kafkaState) > 0 {
		problems = append(problems, "broker: "+strings.Join(ev.kafkaState, "; "))
	}
	c.Pass = len(problems) == 0
	if c.Pass {
		c.Detail = fmt.Sprintf("%d FLIDs, %d change events each once in outbox order on KAFKA:msg, latest state of %d FLIDs last on KAFKA:schd; %d redeliveries (at least once); every record matches the event contract",
			len(msgByFLID), countEvents(ev.chaos, "KAFKA:msg"), len(schdRow), dups)
	} else {
		c.Detail = strings.Join(problems, "; ")
	}
	return c
}

// diffRows pairs the rows of two runs by key and describes every difference: a row only in
// one run, or the columns whose values differ.
func diffRows(key []string, a, b []string) []string {
	index := func(rows []string) (map[string]map[string]any, []string) {
		m := map[string]map[string]any{}
		var order []string
		for _, r := range rows {
			var v map[string]any
			if err := json.Unmarshal([]byte(r), &v); err != nil {
				v = map[string]any{"row": r}
			}
			var parts []string
			for _, k := range key {
				parts = append(parts, fmt.Sprintf("%s=%v", k, v[k]))
			}
			id := strings.Join(parts, " ")
			// Rows with equal keys (a table whose key the list does not name exactly) stay
			// apart by their position.
			for n := 2; m[id] != nil; n++ {
				id = fmt.Sprintf("%s #%d", strings.Join(parts, " "), n)
			}
			m[id] = v
			order = append(order, id)
		}
		return m, order
	}
	ma, oa := index(a)
	mb, ob := index(b)
	var out []string
	for _, id := range oa {
		rb, ok := mb[id]
		if !ok {
			out = append(out, id+" only in the chaos run")
			continue
		}
		var cols []string
		for _, c := range slices.Sorted(maps.Keys(ma[id])) {
			if x, y := fmt.Sprint(ma[id][c]), fmt.Sprint(rb[c]); x != y {
				cols = append(cols, fmt.Sprintf("%s chaos %s, clean %s", c, x, y))
			}
		}
		for _, c := range slices.Sorted(maps.Keys(rb)) {
			if _, ok := ma[id][c]; !ok {
				cols = append(cols, fmt.Sprintf("%s only in the clean run", c))
			}
		}
		if len(cols) > 0 {
			out = append(out, id+": "+strings.Join(cols, ", "))
		}
	}
	for _, id := range ob {
		if _, ok := ma[id]; !ok {
			out = append(out, id+" only in the clean run")
		}
	}
	return out
}

// comparable is the part of an outcome a clean run must reproduce: the failure texts of
// retried attempts and the attempt counts are the faults' doing.
func (o outcome) comparable() string {
	reason := ""
	if o.State == "SKIPPED" || (o.State == "DEAD" && o.Class != "EXHAUSTED") {
		reason = o.Reason
	}
	return fmt.Sprintf("%s(%s) %q identity=%s %s/%s", o.State, o.Class, reason, o.Identity, o.Type, o.Styp)
}

// outOfOrder lists the messages the run applied out of ID order on purpose, the late
// arrivals and the replays it made, by ID with their flight, and the flights whose versions
// and change events they may shift: theirs, and any other their change events name in either
// run (a code-share master).
func (ev evidence) outOfOrder() (map[int64]string, map[string]bool) {
	msgs, flights := map[int64]string{}, map[string]bool{}
	if ev.load == nil {
		return msgs, flights
	}
	for _, a := range ev.load.arrivals {
		if a.released && a.err == nil {
			msgs[a.id] = a.flid
		}
	}
	for _, r := range ev.load.replays {
		if r.made {
			msgs[r.id] = r.flid
		}
	}
	for _, f := range msgs {
		flights[f] = true
	}
	for _, s := range []*snapshot{ev.chaos, ev.clean} {
		for _, e := range s.events {
			if _, ok := msgs[e.MsgID]; ok {
				flights[e.FLID] = true
			}
		}
	}
	return msgs, flights
}

// versionFree drops from a row of a disordered flight what counts or names its writes rather
// than its content: state_version (out of ID order a message may change what a newer one
// changed in ID order, so the count of changes differs, R-ORDER-6), last_msg_id and the
// provenance's last (the message last applied, older or not, R-RETAIN-6). The provenance's
// writers of each part and its life stay compared.
func versionFree(row string, flights map[string]bool) string {
	var v map[string]any
	if err := json.Unmarshal([]byte(row), &v); err != nil {
		return row
	}
	flid, _ := v["flid"].(string)
	if !flights[flid] {
		return row
	}
	delete(v, "state_version")
	delete(v, "last_msg_id")
	if p, ok := v["provenance"].(map[string]any); ok {
		delete(p, "last")
	}
	b, _ := json.Marshal(v) // decoded JSON always encodes
	return string(b)
}

// withoutVersion drops STATE_VERSION from a published document.
func withoutVersion(doc string) string {
	var v map[string]any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return doc
	}
	delete(v, "STATE_VERSION")
	b, _ := json.Marshal(v)
	return string(b)
}

func checkClean(ev evidence) Check {
	c := Check{Name: CheckClean}
	var problems []string
	var outcomeDiffs []string
	disMsgs, disFlights := ev.outOfOrder()
	superseded := 0
	all := map[int64]bool{}
	for id := range ev.chaos.outcomes {
		all[id] = true
	}
	for id := range ev.clean.outcomes {
		all[id] = true
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		a, aok := ev.chaos.outcomes[id]
		b, bok := ev.clean.outcomes[id]
		switch {
		case !aok || !bok:
			outcomeDiffs = append(outcomeDiffs, fmt.Sprintf("msg %d only in the %s run", id, map[bool]string{true: "chaos", false: "clean"}[aok]))
		case a.comparable() == b.comparable():
		case disMsgs[id] != "" && b.State == "SUCCEEDED" && a.State == "SKIPPED" && a.Class == "" &&
			strings.HasPrefix(a.Reason, "superseded: ") && a.Identity == b.Identity && a.Type == b.Type && a.Styp == b.Styp:
			// Applied after newer messages that wrote every part it writes (R-ORDER-2): in ID
			// order it changed them first, and the newer messages changed them again.
			superseded++
		default:
			outcomeDiffs = append(outcomeDiffs, fmt.Sprintf("msg %d %s, clean %s", id, a.comparable(), b.comparable()))
		}
	}
	if len(outcomeDiffs) > 0 {
		problems = append(problems, fmt.Sprintf("%d outcomes differ: %s", len(outcomeDiffs), examples(outcomeDiffs, short)))
	}
	rows := 0
	for _, t := range stateTables {
		a, b := ev.chaos.tables[t.name], ev.clean.tables[t.name]
		rows += len(a)
		if len(disFlights) > 0 {
			a, b = slices.Clone(a), slices.Clone(b)
			for i := range a {
				a[i] = versionFree(a[i], disFlights)
			}
			for i := range b {
				b[i] = versionFree(b[i], disFlights)
			}
		}
		if d := diffRows(t.key, a, b); len(d) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d rows differ: %s", t.name, len(d), examples(d, short)))
		}
	}
	// A disordered flight's change events on KAFKA:msg are not compared: their number and
	// versions differ out of ID order (R-ORDER-6). Its KAFKA:schd row, the latest state, is
	// compared without the version and the message that wrote it.
	notCompared := 0
	seq := func(s *snapshot) map[string][]string {
		out := map[string][]string{}
		for _, e := range s.events {
			k := e.Target + " " + e.FLID
			switch {
			case !disFlights[e.FLID]:
				out[k] = append(out[k], e.key())
			case e.Target == "KAFKA:msg":
			default:
				out[k] = append(out[k], e.Type+" "+withoutVersion(e.Payload))
			}
		}
		return out
	}
	for _, e := range ev.chaos.events {
		if disFlights[e.FLID] && e.Target == "KAFKA:msg" {
			notCompared++
		}
	}
	sa, sb := seq(ev.chaos), seq(ev.clean)
	var evDiffs []string
	keys := map[string]bool{}
	for k := range sa {
		keys[k] = true
	}
	for k := range sb {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !slices.Equal(sa[k], sb[k]) {
			evDiffs = append(evDiffs, fmt.Sprintf("%s: chaos %d events, clean %d (first difference: %s)", k, len(sa[k]), len(sb[k]), firstDiff(sa[k], sb[k])))
		}
	}
	if len(evDiffs) > 0 {
		problems = append(problems, fmt.Sprintf("%d per-FLID event sequences differ: %s", len(evDiffs), examples(evDiffs, short)))
	}
	var redisDiffs []string
	rkeys := map[string]bool{}
	for k := range ev.chaos.redis {
		rkeys[k] = true
	}
	for k := range ev.clean.redis {
		rkeys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(rkeys)) {
		a, b := ev.chaos.redis[k], ev.clean.redis[k]
		if flid, ok := strings.CutPrefix(k, "flight-version/"); ok && disFlights[flid] {
			continue // the version of a disordered flight (R-ORDER-6)
		}
		if flid, ok := strings.CutPrefix(k, "flight:"); ok && disFlights[flid] {
			a, b = withoutVersion(a), withoutVersion(b)
		}
		if a != b {
			redisDiffs = append(redisDiffs, fmt.Sprintf("%s: chaos %s, clean %s", k, orNone(a), orNone(b)))
		}
	}
	if len(redisDiffs) > 0 {
		problems = append(problems, fmt.Sprintf("%d Redis keys differ: %s", len(redisDiffs), examples(redisDiffs, short)))
	}
	c.Pass = len(problems) == 0
	if c.Pass {
		c.Detail = fmt.Sprintf("%d outcomes, %d rows in %d flight and reference tables, %d event sequences, %d Redis keys identical (timestamps of the pump's clock ignored)",
			len(all), rows, len(stateTables), len(keys), len(rkeys))
		if len(disMsgs) > 0 {
			c.Detail += fmt.Sprintf("; out of ID order %d messages (%d SKIPPED as superseded, SUCCEEDED in ID order) on %d flights, compared without state_version, last_msg_id, provenance.last, STATE_VERSION and flight-version, their %d KAFKA:msg change events not compared",
				len(disMsgs), superseded, len(disFlights), notCompared)
		}
	} else {
		c.Detail = strings.Join(problems, "; ")
	}
	return c
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func firstDiff(a, b []string) string {
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("#%d chaos %s, clean %s", i+1, short(orNone(x)), short(orNone(y)))
		}
	}
	return "none"
}

// checkCodeShare is the code-share invariant on the final state of the run with faults: no
// ACTIVE flight's MAID names a flight that is DELETED, or gone to flight_history
// (R-CODESHARE-4, R-CODESHARE-5). A MAID naming a flight never seen is dangling, which
// R-CODESHARE-1 allows, and is only counted.
func checkCodeShare(ev evidence) Check {
	c := Check{Name: CheckCodeShare}
	type row struct {
		FLID  string  `json:"flid"`
		State string  `json:"state"`
		MAID  *string `json:"maid"`
	}
	flights := map[string]row{}
	for _, r := range ev.chaos.tables["flight_schd"] {
		var f row
		if err := json.Unmarshal([]byte(r), &f); err != nil {
			c.Detail = "flight_schd row: " + err.Error()
			return c
		}
		flights[f.FLID] = f
	}
	archived := map[string]bool{}
	for _, r := range ev.chaos.tables["flight_history"] {
		var f row
		if json.Unmarshal([]byte(r), &f) == nil {
			archived[f.FLID] = true
		}
	}
	var bad []string
	children, dangling := 0, 0
	for _, id := range slices.Sorted(maps.Keys(flights)) {
		f := flights[id]
		if f.State != "ACTIVE" || f.MAID == nil || *f.MAID == "" || *f.MAID == id {
			continue
		}
		children++
		m, ok := flights[*f.MAID]
		switch {
		case ok && m.State == "DELETED", !ok && archived[*f.MAID]:
			bad = append(bad, id+" under "+*f.MAID)
		case !ok:
			dangling++
		}
	}
	c.Pass = len(bad) == 0
	c.Detail = fmt.Sprintf("%d active children, %d under a deleted master%s, %d dangling (allowed)", children, len(bad),
		examples(bad, func(s string) string { return s }), dangling)
	return c
}

// checkFaults makes sure the run did what it claims: every short fault kind at least once,
// every planned long outage for at least its length. A harness that silently injected
// nothing would otherwise pass every other check.
func checkFaults(ev evidence) Check {
	c := Check{Name: CheckFaults}
	var problems []string
	kinds := ev.kinds
	if kinds == nil {
		kinds = ShortKinds
	}
	for _, k := range kinds {
		if t := ev.faults[k]; t == nil || t.n == 0 {
			problems = append(problems, fmt.Sprintf("%s never injected", k))
		}
	}
	for _, l := range ev.long {
		t := ev.faults[longKind(l.dep)]
		switch {
		case t == nil || t.n == 0:
			problems = append(problems, fmt.Sprintf("%s never injected", longKind(l.dep)))
		case t.down < l.dur-100*time.Millisecond:
			problems = append(problems, fmt.Sprintf("%s lasted %s, planned %s", longKind(l.dep), t.down.Round(time.Millisecond), l.dur))
		case t.work == 0:
			// An outage that found nothing to do charged nothing whatever the code does: it
			// cannot pass for a check of it.
			problems = append(problems, fmt.Sprintf("%s met no work: nothing was waiting on %s before it ended", longKind(l.dep), l.dep))
		}
	}
	// The replays: a plan that made none tested no replay (the late arrivals are the enqueue
	// check's). One the harness could not place in time is named, not a failure.
	made := 0
	var notMade []string
	if ev.load != nil {
		for _, r := range ev.load.replays {
			if r.made {
				made++
			} else {
				notMade = append(notMade, fmt.Sprintf("%d: %s", r.id, r.why))
			}
		}
		if len(ev.load.replays) > 0 && made == 0 {
			problems = append(problems, fmt.Sprintf("none of the %d planned replays was made: %s", len(ev.load.replays),
				examples(notMade, func(s string) string { return s })))
		}
	}
	c.Pass = len(problems) == 0
	if c.Pass {
		c.Detail = fmt.Sprintf("%d short kinds, %d long outages (each longer than the %s retry budget), %d replays", len(kinds), len(ev.long), RetryBudget(), made)
		if len(notMade) > 0 {
			c.Detail += fmt.Sprintf(" (%d not made: %s)", len(notMade), examples(notMade, func(s string) string { return s }))
		}
	} else {
		c.Detail = strings.Join(problems, "; ")
	}
	return c
}
