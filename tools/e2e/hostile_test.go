package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// hostile is one row of the hostile corpus and the outcome it must get: a terminal state, the
// class (empty when the state carries none) and a fragment of the reason naming what was wrong.
type hostile struct {
	name   string
	xml    string
	state  string
	class  string
	reason string
	id     int64
}

// maxRSS is the bound on every service's peak resident memory over the whole corpus.
const maxRSS = 300 << 20

const hostileFLID = "E2E-HOSTILE"

var hostileDay = time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))

// hostileCorpus is the corpus: XML attacks, broken and truncated input, bytes that are not a
// message at all, and SIS messages over the codec's bounds (docs/codec.md §6). Every FLOP aims
// at hostileFLID, which exists, so that a message that got through would change it.
func hostileCorpus(ffid string) []*hostile {
	dttm := hostileDay.Add(6 * time.Hour)
	seq := int64(100)
	flop := func(styp, fields string) string {
		seq++
		return traffic.FLOP(seq, dttm.Add(time.Duration(seq)*time.Second), hostileFLID, ffid, styp, fields)
	}
	items := func(tag, seqAttr, child string, n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			if tag == "DELY" {
				fmt.Fprintf(&b, `<DELY CODE="%d" DURA="0010">late</DELY>`, i%90+10)
				continue
			}
			fmt.Fprintf(&b, `<%s %s="%d"><%s>R%d</%s></%s>`, tag, seqAttr, i, child, i, child, tag)
		}
		return b.String()
	}
	var laughs strings.Builder
	laughs.WriteString(`<?xml version="1.0"?><!DOCTYPE MSG [<!ENTITY lol "lol">`)
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&laughs, `<!ENTITY lol%d "%s">`, i, strings.Repeat(fmt.Sprintf("&lol%d;", i-1), 10))
	}
	laughs.WriteString(`]>`)
	valid := flop("ESTT", "<ESTT>"+traffic.FormatTime(dttm.Add(3*time.Hour))+"</ESTT>")
	body := func(x string) string { return x[strings.Index(x, "<MSG"):] }
	// valid with n empty attributes on its root instead of the schema location.
	attrs := func(n int) string {
		var b strings.Builder
		b.WriteString("<MSG")
		for i := range n {
			fmt.Fprintf(&b, ` a%d=""`, i)
		}
		rest := body(valid)
		return b.String() + rest[strings.Index(rest, ">"):]
	}

	c := []*hostile{
		{name: "entity bomb", xml: laughs.String() + body(flop("REMC", "<REMC>&lol9;</REMC>")),
			state: "DEAD", class: "MALFORMED", reason: "DOCTYPE"},
		{name: "external entity", xml: `<?xml version="1.0"?><!DOCTYPE MSG [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>` +
			body(flop("REMC", "<REMC>&xxe;</REMC>")), state: "DEAD", class: "MALFORMED", reason: "DOCTYPE"},
		{name: "external DTD", xml: `<?xml version="1.0"?><!DOCTYPE MSG SYSTEM "http://127.0.0.1:1/sis.dtd">` + body(flop("ESTT", "<ESTT/>")),
			state: "DEAD", class: "MALFORMED", reason: "DOCTYPE"},
		{name: "undeclared entity", xml: flop("REMC", "<REMC>&xxe;</REMC>"),
			state: "DEAD", class: "MALFORMED", reason: "entity"},
		{name: "deep nesting", xml: flop("ESTT", "<SRVT>"+strings.Repeat("<A>", 100_000)+strings.Repeat("</A>", 100_000)+"</SRVT>"),
			state: "DEAD", class: "MALFORMED", reason: "deeper than 64"},
		{name: "element flood", xml: flop("ESTT", strings.Repeat("<X/>", 600_000)),
			state: "DEAD", class: "MALFORMED", reason: "more than 524288 elements"},
		{name: "attribute flood", xml: attrs(600_000), state: "DEAD", class: "MALFORMED", reason: "more than 524288 elements and attributes"},
		{name: "huge attribute", xml: flop("GTDT", `<GTDT GTNO="`+strings.Repeat("9", 1<<20)+`"><GATE>A1</GATE></GTDT>`),
			state: "DEAD", class: "MALFORMED", reason: "/MSG/FLOP/GTDT[1]/@GTNO: attribute GTNO is 1048576 bytes"},
		{name: "truncated", xml: valid[:len(valid)*2/3], state: "DEAD", class: "MALFORMED", reason: "not well-formed XML"},
		{name: "binary", xml: "\x00\x01\x02\x03PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + strings.Repeat("\x7f\x00\x10ÿ", 64),
			state: "DEAD", class: "MALFORMED", reason: "illegal character"},
		{name: "empty", xml: "", state: "DEAD", class: "MALFORMED", reason: "no root element"},
		{name: "wrong root", xml: strings.ReplaceAll(flop("ESTT", "<ESTT/>"), "MSG", "MESSAGE"), state: "DEAD", class: "MALFORMED", reason: "not <MSG>"},
		{name: "missing META", xml: `<MSG><FLOP><FLID>` + hostileFLID + `</FLID><ESTT/></FLOP></MSG>`, state: "DEAD", class: "MALFORMED", reason: "no META"},
		{name: "bad META time", xml: strings.Replace(flop("ESTT", "<ESTT/>"), "<DTTM>20261130", "<DTTM>20261331", 1),
			state: "DEAD", class: "MALFORMED", reason: "/MSG/META/DTTM"},
		// A body time this codec cannot read is a CODEC_ERROR (docs/codec.md §1): retried, then
		// DEAD(EXHAUSTED) with the codec's reason kept.
		{name: "bad body time", xml: flop("ESTT", "<ESTT>32NOV260905</ESTT>"), state: "DEAD", class: "EXHAUSTED", reason: "not a known time format"},
		{name: "control characters", xml: flop("REMC", "<REMC>\x01\x02\x1b[31mred</REMC>"), state: "DEAD", class: "MALFORMED", reason: "illegal character"},
		{name: "the issue's 300,000 gates", xml: flop("GTDT", strings.Repeat("<GTDT/>", 300_000)),
			state: "DEAD", class: "MALFORMED", reason: "/MSG/FLOP/GTDT[100]: more than 99 GTDT elements"},
		{name: "the issue's 7 MB remark", xml: flop("REMC", "<REMC>"+strings.Repeat("备注", 1_000_000)+strings.Repeat("x", 1_000_000)+"</REMC>"),
			state: "DEAD", class: "MALFORMED", reason: "/MSG/FLOP/REMC: the text of REMC is 7000000 bytes"},
		{name: "remark one byte over", xml: flop("REMC", "<REMC>"+strings.Repeat("x", 4097)+"</REMC>"),
			state: "DEAD", class: "MALFORMED", reason: "4097 bytes, over the limit of 4096"},
		{name: "over codec.max-bytes", xml: flop("REMC", "<REMC>"+strings.Repeat("x", 9<<20)+"</REMC>"),
			state: "DEAD", class: "MALFORMED", reason: "over the limit of 8388608 (codec.max-bytes)"},
		// Legal but not supported: skipped for good, whatever its body holds.
		{name: "unsupported kind with a junk body", xml: strings.NewReplacer("<TYPE>FLOP</TYPE>", "<TYPE>ZZZZ</TYPE>").Replace(
			flop("ESTT", strings.Repeat("<JUNK><X>y</X></JUNK>", 10_000))), state: "SKIPPED", class: "UNSUPPORTED", reason: "ZZZZ"},
	}
	for _, col := range []struct {
		tag, seq, child string
		limit           int
	}{
		{"GTDT", "GTNO", "GATE", 99}, {"CKDT", "CKNO", "CHKC", 99}, {"CLDT", "CLNO", "BELT", 99},
		{"CHDT", "CHNO", "CHUT", 99}, {"CHOT", "CSNO", "CHID", 99}, {"ABTM", "ASNO", "ABDG", 99},
		{"PSDT", "PSNO", "PSST", 9}, {"ROUT", "RTNO", "APCD", 6}, {"ERUT", "RTNO", "APCD", 7}, {"DELY", "", "", 99},
	} {
		styp := strings.Replace(col.tag, "ERUT", "ROUT", 1)
		c = append(c, &hostile{name: fmt.Sprintf("%d %s", col.limit+1, col.tag), xml: flop(styp, items(col.tag, col.seq, col.child, col.limit+1)),
			state: "DEAD", class: "MALFORMED", reason: fmt.Sprintf("/MSG/FLOP/%s[%d]: more than %d %s elements", col.tag, col.limit+1, col.limit, col.tag)})
	}
	return c
}

// TestHostileCorpus sends the hostile corpus through the five binaries: every row ends DEAD or
// SKIPPED with its reason and its processed marker, nothing of it reaches the flight state,
// the outbox or Redis, no service restarts or passes maxRSS, and the ordinary messages after
// it succeed. One ordinary message would make a state larger than the dispatcher's record bound:
// the pump refuses it DEAD(MALFORMED) with both sizes before it writes anything (R-IDENT-5),
// rather than store a state that could never be published.
func TestHostileCorpus(t *testing.T) {
	e := newEnv(t)
	for _, role := range stack.Services {
		if err := e.stack.Start(role, nil,
			// The corpus's one CODEC_ERROR is retried before it is DEAD(EXHAUSTED): short steps
			// keep the run short (the bounds themselves are never retried).
			"MSGX_PIPELINE_BACKOFF=50ms,50ms,50ms,50ms,50ms",
			// A record bound of 64 KiB, so that a state over it needs tens of kilobytes.
			"MSGX_KAFKA_MAX_MESSAGE_BYTES=65536",
		); err != nil {
			t.Fatal(err)
		}
	}
	e.waitAllRolesActive(t)
	pids := map[string]int{}
	for _, role := range stack.Services {
		pids[role] = e.stack.PID(role)
	}
	ctx := context.Background()

	f := traffic.Flight{FLID: hostileFLID, ALCD: "CA", FLNO: "CA1502", MVIN: "D", SODT: hostileDay.Add(9 * time.Hour),
		FLTY: "W", FLIN: "D", ACFT: "33L", TRML: "T3", Route: []string{"PEK", "SHA"}}
	big := f
	big.FLID, big.FLNO = "E2E-BIG-STATE", "CA1504"
	dttm := hostileDay.Add(5 * time.Hour)
	later := hostileDay.Add(7 * time.Hour) // after every message of the corpus
	setup := []*message{{xml: traffic.ADFT(1, dttm, f), want: "SUCCEEDED"}, {xml: traffic.ADFT(2, dttm, big), want: "SUCCEEDED"}}
	e.insert(t, setup)
	for _, m := range setup {
		testwait.ForState(t, 60*time.Second, "the flights the corpus aims at", func() (bool, string) {
			f := e.facts(t, m.id)
			return f.terminal && f.delivered, f.String()
		})
	}
	before, bigBefore := e.flightRows(t, hostileFLID), e.flightRows(t, big.FLID)

	corpus := hostileCorpus(f.FFID())
	// A resend of a message already processed: a duplicate, skipped.
	corpus = append(corpus, &hostile{name: "resent message", xml: setup[0].xml, state: "SKIPPED", reason: fmt.Sprintf("duplicate-of:%d", setup[0].id)})
	start := time.Now()
	for _, h := range corpus {
		now := time.Now()
		h.id = e.my.InsertInbox(t, h.xml, &now)
	}
	remark := strings.Repeat("中", 4096/3) + "x" // 4,096 bytes: at the bound, accepted
	var gates strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&gates, `<GTDT GTNO="%d"><GATE>%s</GATE></GTDT>`, i, strings.Repeat("G", 4096))
	}
	after := []*message{
		{xml: traffic.FLOP(900, later, hostileFLID, f.FFID(), "REMC", "<REMC>"+remark+"</REMC>"), want: "SUCCEEDED"},
		{xml: traffic.FLOP(901, later, big.FLID, big.FFID(), "GTDT", gates.String()), want: "DEAD"},
	}
	e.insert(t, after)

	for _, h := range corpus {
		testwait.ForState(t, 60*time.Second, "the outcome and marker of "+h.name, func() (bool, string) {
			f := e.facts(t, h.id)
			return f.terminal && f.marked, f.String()
		})
		var state, class, reason string
		if err := e.pg.Pool.QueryRow(ctx, `SELECT state, coalesce(error_class, ''), coalesce(last_error, '') FROM proc_state WHERE msg_id = $1`,
			h.id).Scan(&state, &class, &reason); err != nil {
			t.Fatal(err)
		}
		if state != h.state || class != h.class || !strings.Contains(reason, h.reason) {
			t.Errorf("%s: %s(%s) %q, want %s(%s) with %q", h.name, state, class, clip(reason), h.state, h.class, h.reason)
		}
		if n := e.facts(t, h.id).events; n != 0 {
			t.Errorf("%s: %d outbox events written", h.name, n)
		}
	}
	t.Logf("corpus of %d rows terminal and marked %s after the insert", len(corpus), time.Since(start).Round(time.Millisecond))

	testwait.ForState(t, 60*time.Second, "the ordinary message after the corpus", func() (bool, string) {
		f := e.facts(t, after[0].id)
		return f.terminal && f.marked && f.delivered && f.state == "SUCCEEDED", f.String()
	})
	// Nothing of the corpus is in the flight: only the ordinary message changed it.
	got := e.flightRows(t, hostileFLID)
	if got.version != before.version+1 || got.remc != remark {
		t.Errorf("flight after the corpus: version %d (want %d), REMC of %d bytes (want the ordinary %d)",
			got.version, before.version+1, len(got.remc), len(remark))
	}
	for table, n := range got.details {
		if n != before.details[table] {
			t.Errorf("%s holds %d rows of the flight, %d before the corpus", table, n, before.details[table])
		}
	}
	doc, err := e.redis.Client.Get(ctx, projection.FlightKey(e.redis.Prefix, hostileFLID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	var projected map[string]any
	if err := json.Unmarshal([]byte(doc), &projected); err != nil || projected["REMC"] != remark {
		t.Errorf("projection of %d bytes, REMC %q...: want the ordinary remark", len(doc), clip(fmt.Sprint(projected["REMC"])))
	}

	// The state too large for a record: refused by the pump, with the bound's name, before it
	// changed anything; the flight keeps its version and nothing goes to the outbox.
	testwait.ForState(t, 60*time.Second, "the refusal of the oversized state", func() (bool, string) {
		f := e.facts(t, after[1].id)
		return f.terminal && f.marked, f.String()
	})
	var state, class, reason string
	if err := e.pg.Pool.QueryRow(ctx, `SELECT state, coalesce(error_class, ''), coalesce(last_error, '') FROM proc_state WHERE msg_id = $1`,
		after[1].id).Scan(&state, &class, &reason); err != nil {
		t.Fatal(err)
	}
	if state != "DEAD" || class != "MALFORMED" || !strings.Contains(reason, "kafka.max-message-bytes") {
		t.Errorf("the oversized state's message: %s(%s) %q, want DEAD(MALFORMED) naming kafka.max-message-bytes", state, class, clip(reason))
	}
	if n := e.facts(t, after[1].id).events; n != 0 {
		t.Errorf("the oversized state's message wrote %d outbox events", n)
	}
	if got := e.flightRows(t, big.FLID); got.version != bigBefore.version {
		t.Errorf("the big flight is at version %d after the refused message, was %d", got.version, bigBefore.version)
	}

	for _, role := range stack.Services {
		pid := e.stack.PID(role)
		if pid != pids[role] {
			t.Errorf("%s: pid %d, was %d: the service restarted or died", role, pid, pids[role])
			continue
		}
		hwm := peakRSS(t, pid)
		t.Logf("%s peak RSS %d MB", role, hwm>>20)
		if hwm > maxRSS {
			t.Errorf("%s: peak RSS %d MB, over %d MB", role, hwm>>20, maxRSS>>20)
		}
	}
}

// flightState is what the corpus must not change: the flight's version and remark and the rows
// of its detail tables.
type flightState struct {
	version int64
	remc    string
	details map[string]int
}

func (e *env) flightRows(t *testing.T, flid string) flightState {
	t.Helper()
	ctx := context.Background()
	var s flightState
	if err := e.pg.Pool.QueryRow(ctx, `SELECT state_version, coalesce(remc, '') FROM flight_schd WHERE flid = $1`, flid).
		Scan(&s.version, &s.remc); err != nil {
		t.Fatalf("flight %s: %v", flid, err)
	}
	s.details = map[string]int{}
	for _, table := range []string{"flight_gtdt", "flight_ckdt", "flight_cldt", "flight_chdt", "flight_psdt", "flight_chot",
		"flight_dely", "flight_abtm", "flight_route_point", "flight_raw_content"} {
		var n int
		if err := e.pg.Pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE flid = $1`, flid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		s.details[table] = n
	}
	return s
}

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
