package traffic

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testDay = time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)

func TestFormatTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   time.Time
		want string
	}{
		{"airport local", time.Date(2021, 1, 23, 5, 35, 0, 0, airportZone), "23JAN210535"},
		{"converted from UTC", time.Date(2021, 1, 22, 21, 35, 0, 0, time.UTC), "23JAN210535"},
		{"seconds dropped", time.Date(2003, 12, 15, 18, 25, 59, 0, airportZone), "15DEC031825"},
		{"single-digit day padded", time.Date(2024, 2, 9, 0, 5, 0, 0, airportZone), "09FEB240005"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatTime(tt.in); got != tt.want {
				t.Fatalf("FormatTime(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFFID(t *testing.T) {
	t.Parallel()
	f := Flight{ALCD: "CA", FLNO: "CA101", MVIN: "A", SODT: time.Date(2003, 12, 12, 13, 45, 0, 0, airportZone), FLIN: "D"}
	if got, want := f.FFID(), "CA-CA101-A-12DEC031345-D"; got != want {
		t.Fatalf("FFID() = %q, want %q", got, want)
	}
}

func TestDayIsDeterministic(t *testing.T) {
	t.Parallel()
	opts := Options{Day: testDay, Seed: 42, Flights: 120}
	a, b := Day(opts), Day(opts)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs with the same options differ")
	}
	opts.Seed = 43
	if c := Day(opts); reflect.DeepEqual(a, c) {
		t.Fatal("a different seed gave the same day")
	}
}

func TestDayCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want map[Kind]int // exact counts; KindFLOP is checked as a minimum
	}{
		{
			name: "defaults",
			opts: Options{Day: testDay},
			want: map[Kind]int{KindSchedule: 300, KindFDEL: 3, KindReference: 5, KindUnsupported: 3, KindMalformed: 3, KindDuplicate: 3, KindFLOP: 300 * 5},
		},
		{
			name: "small, no malformed",
			opts: Options{Day: testDay, Flights: 50, Malformed: -1, Duplicates: 5, Seed: 9},
			want: map[Kind]int{KindSchedule: 50, KindFDEL: 1, KindReference: 2, KindUnsupported: 2, KindMalformed: 0, KindDuplicate: 5, KindFLOP: 50 * 5},
		},
		{
			name: "large",
			opts: Options{Day: testDay, Flights: 1000, Malformed: 10, Duplicates: 7, Seed: 3},
			want: map[Kind]int{KindSchedule: 1000, KindFDEL: 10, KindReference: 16, KindUnsupported: 10, KindMalformed: 10, KindDuplicate: 7, KindFLOP: 1000 * 5},
		},
		{
			name: "no duplicates",
			opts: Options{Day: testDay, Flights: 20, Duplicates: -1},
			want: map[Kind]int{KindSchedule: 20, KindFDEL: 1, KindReference: 2, KindUnsupported: 2, KindMalformed: 3, KindDuplicate: 0, KindFLOP: 20 * 5},
		},
	}
	wantState := map[Kind]string{
		KindSchedule: Succeeded, KindFLOP: Succeeded, KindFDEL: Succeeded, KindReference: Succeeded,
		KindUnsupported: Skipped, KindDuplicate: Skipped, KindMalformed: Dead,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := map[Kind]int{}
			for _, m := range Day(tt.opts) {
				got[m.Kind]++
				if m.Want != wantState[m.Kind] {
					t.Errorf("SEQN %d kind %s: Want %q, want %q", m.SEQN, m.Kind, m.Want, wantState[m.Kind])
				}
			}
			for k, n := range tt.want {
				if k == KindFLOP {
					if got[k] < n {
						t.Errorf("%d %s messages, want at least %d", got[k], k, n)
					}
					continue
				}
				if got[k] != n {
					t.Errorf("%d %s messages, want %d", got[k], k, n)
				}
			}
			if len(got) != len(wantState)-boolInt(tt.want[KindMalformed] == 0)-boolInt(tt.want[KindDuplicate] == 0) {
				t.Errorf("unexpected kinds: %v", got)
			}
		})
	}
}

func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, pcgStream)) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// envelope is what a SIS consumer needs from any message: the root and META.
type envelopeInfo struct {
	root     string
	order    []string // META children in document order
	meta     map[string]string
	declUTF8 bool
}

// parseEnvelope reads the whole document with encoding/xml, so anything not well-formed fails,
// and requires root MSG with a META holding SNDR SEQN DTTM TYPE STYP.
func parseEnvelope(doc string) (envelopeInfo, error) {
	info := envelopeInfo{meta: map[string]string{}}
	d := xml.NewDecoder(strings.NewReader(doc))
	var stack []string
	var text strings.Builder
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return info, err
		}
		switch tok := tok.(type) {
		case xml.ProcInst:
			info.declUTF8 = tok.Target == "xml" && strings.Contains(string(tok.Inst), `encoding="UTF-8"`)
		case xml.StartElement:
			if len(stack) == 0 {
				info.root = tok.Name.Local
			}
			stack = append(stack, tok.Name.Local)
			text.Reset()
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			if len(stack) == 3 && stack[1] == "META" {
				info.order = append(info.order, tok.Name.Local)
				info.meta[tok.Name.Local] = strings.TrimSpace(text.String())
			}
			stack = stack[:len(stack)-1]
		}
	}
	switch {
	case info.root != "MSG":
		return info, fmt.Errorf("root %q, want MSG", info.root)
	case len(info.order) == 0:
		return info, errors.New("no META")
	}
	for _, f := range []string{"SNDR", "SEQN", "DTTM", "TYPE", "STYP"} {
		if info.meta[f] == "" {
			return info, fmt.Errorf("META has no %s", f)
		}
	}
	return info, nil
}

func TestMessagesAreWellFormedSIS(t *testing.T) {
	t.Parallel()
	msgs := Day(Options{Day: testDay, Seed: 5, Malformed: 8, Sender: "AODB2"})
	for _, m := range msgs {
		info, err := parseEnvelope(m.XML)
		if m.Kind == KindMalformed {
			if err == nil {
				t.Errorf("malformed message SEQN %d parses as a valid SIS envelope:\n%s", m.SEQN, m.XML)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s SEQN %d: %v\n%s", m.Kind, m.SEQN, err, m.XML)
		}
		if !info.declUTF8 {
			t.Errorf("SEQN %d: no encoding=\"UTF-8\" declaration", m.SEQN)
		}
		if want := []string{"SNDR", "SEQN", "DTTM", "TYPE", "STYP"}; !slices.Equal(info.order, want) {
			t.Errorf("SEQN %d: META order %v, want %v (the samples' order)", m.SEQN, info.order, want)
		}
		dttm, err := time.ParseInLocation("20060102150405", info.meta["DTTM"], airportZone)
		if err != nil {
			t.Errorf("SEQN %d: DTTM %q: %v", m.SEQN, info.meta["DTTM"], err)
		}
		got := []string{info.meta["SNDR"], info.meta["SEQN"], info.meta["TYPE"], info.meta["STYP"]}
		want := []string{m.SNDR, strconv.FormatInt(m.SEQN, 10), m.TYPE, m.STYP}
		if !slices.Equal(got, want) || !dttm.Equal(m.DTTM) {
			t.Errorf("META %v %v disagrees with Message fields %v %v", got, dttm, want, m.DTTM)
		}
		if m.SNDR != "AODB2" {
			t.Errorf("SEQN %d: SNDR %q, want the Sender option", m.SEQN, m.SNDR)
		}
	}
}

// TestMalformedVariants pins that each way of being malformed is present and fails for the
// reason it was made for.
func TestMalformedVariants(t *testing.T) {
	t.Parallel()
	var reasons []string
	for _, m := range Day(Options{Day: testDay, Flights: 30, Malformed: 4}) {
		if m.Kind != KindMalformed {
			continue
		}
		_, err := parseEnvelope(m.XML)
		var syntax *xml.SyntaxError
		switch {
		case errors.As(err, &syntax):
			reasons = append(reasons, "not well-formed")
		case err != nil:
			reasons = append(reasons, err.Error())
		}
	}
	slices.Sort(reasons)
	want := []string{"META has no SEQN", "no META", "not well-formed", `root "MESSAGE", want MSG`}
	if !slices.Equal(reasons, want) {
		t.Fatalf("malformed reasons %q, want %q", reasons, want)
	}
}

func identity(m Message) string {
	return strings.Join([]string{m.SNDR, m.TYPE, m.STYP, strconv.FormatInt(m.SEQN, 10)}, "|")
}

func TestIdentities(t *testing.T) {
	t.Parallel()
	msgs := Day(Options{Day: testDay, Seed: 11, Duplicates: 6})
	seen := map[string]int{} // identity → index of first message
	seqns := map[int64]bool{}
	dups := 0
	for i, m := range msgs {
		if m.Kind == KindDuplicate {
			dups++
			j, ok := seen[identity(m)]
			if !ok {
				t.Fatalf("duplicate %s at %d repeats no earlier message", identity(m), i)
			}
			orig := msgs[j]
			if orig.Kind != KindFLOP || orig.XML != m.XML || orig.FLID != m.FLID {
				t.Fatalf("duplicate at %d is not an exact re-send of the FLOP at %d", i, j)
			}
			continue
		}
		if m.SEQN == 0 {
			if m.Kind != KindMalformed {
				t.Fatalf("%s message at %d has no SEQN", m.Kind, i)
			}
			continue
		}
		if seqns[m.SEQN] {
			t.Fatalf("SEQN %d used twice", m.SEQN)
		}
		seqns[m.SEQN] = true
		seen[identity(m)] = i
	}
	if dups != 6 {
		t.Fatalf("%d duplicates, want 6", dups)
	}
}

func TestStartSEQN(t *testing.T) {
	t.Parallel()
	msgs := Day(Options{Day: testDay, Flights: 20, StartSEQN: 500000})
	if msgs[0].SEQN != 500000 {
		t.Fatalf("first SEQN %d, want 500000", msgs[0].SEQN)
	}
}

func TestTimeOrder(t *testing.T) {
	t.Parallel()
	start := time.Date(2021, 1, 23, 0, 0, 0, 0, airportZone)
	for seed := range int64(20) {
		var prev time.Time
		for _, m := range Day(Options{Day: testDay, Seed: seed}) {
			if m.Kind == KindDuplicate || m.DTTM.IsZero() {
				continue // a re-send carries its original's DTTM; a META-less message has none
			}
			if m.DTTM.Before(prev) {
				t.Fatalf("seed %d SEQN %d: DTTM %v before previous %v", seed, m.SEQN, m.DTTM, prev)
			}
			if m.DTTM.Before(start) || !m.DTTM.Before(start.AddDate(0, 0, 1)) {
				t.Fatalf("seed %d SEQN %d: DTTM %v outside the operation day", seed, m.SEQN, m.DTTM)
			}
			prev = m.DTTM
		}
	}
}

// flopWhitelist is the FLOP table of R-FLOP-1 plus the legacy extras it names.
var flopWhitelist = []string{
	"ACFT", "ACTT", "BOTM", "CHOT", "FLTY", "CKDT", "CLDT", "CHDT", "CNCL", "ESTT", "FDEL", "FDIV",
	"FINT", "FLIN", "FRET", "GTDT", "LACL", "MAXP", "HNAG", "PSDT", "RENO", "ROUT", "TAOP", "TRML",
	"VIPP", "ABTM", "DELY", "PADT", "FTSS", "STND", "BDPB", "REMC",
}

func TestFLOPsFollowTheirFlight(t *testing.T) {
	t.Parallel()
	msgs := Day(Options{Day: testDay, Flights: 1000, Seed: 17})
	type state struct{ scheduled, deleted, cancelled bool }
	flights := map[string]*state{}
	styps := map[string]int{}
	undos := 0
	for _, m := range msgs {
		switch m.Kind {
		case KindSchedule:
			if flights[m.FLID] != nil {
				t.Fatalf("second ADFT for FLID %s", m.FLID)
			}
			flights[m.FLID] = &state{scheduled: true}
			continue
		case KindFLOP, KindFDEL:
		case KindUnsupported:
			if m.TYPE == "FLOP" && slices.Contains(flopWhitelist, m.STYP) {
				t.Fatalf("unsupported FLOP with whitelisted STYP %s", m.STYP)
			}
			continue
		default:
			continue
		}
		if !slices.Contains(flopWhitelist, m.STYP) {
			t.Fatalf("FLOP STYP %s is not in the whitelist", m.STYP)
		}
		styps[m.STYP]++
		st := flights[m.FLID]
		switch {
		case st == nil:
			t.Fatalf("SEQN %d %s for FLID %s before its ADFT", m.SEQN, m.STYP, m.FLID)
		case st.deleted:
			t.Fatalf("SEQN %d %s for FLID %s after its FDEL", m.SEQN, m.STYP, m.FLID)
		case st.cancelled && m.STYP != "CNCL" && m.STYP != "REMC":
			t.Fatalf("SEQN %d %s for cancelled FLID %s", m.SEQN, m.STYP, m.FLID)
		}
		switch {
		case m.STYP == "FDEL":
			st.deleted = true
		case m.STYP == "CNCL" && strings.Contains(m.XML, "<CNCL></CNCL>"):
			if !st.cancelled {
				t.Fatalf("SEQN %d undoes a cancellation that did not happen", m.SEQN)
			}
			st.cancelled = false
			undos++
		case m.STYP == "CNCL":
			st.cancelled = true
		}
	}
	for _, s := range []string{"ESTT", "ACTT", "GTDT", "CKDT", "CLDT", "PSDT", "STND", "BOTM", "LACL", "CNCL", "RENO", "TRML", "REMC", "ROUT", "HNAG", "FDEL"} {
		if styps[s] == 0 {
			t.Errorf("no FLOP %s in a 1000-flight day", s)
		}
	}
	if undos == 0 {
		t.Error("no cancellation was undone")
	}
}

func TestSchedule(t *testing.T) {
	t.Parallel()
	day := time.Date(2021, 1, 23, 0, 0, 0, 0, airportZone)
	plans := schedule(newTestRand(1), day, 500)
	if len(plans) != 500 {
		t.Fatalf("%d flights, want 500", len(plans))
	}
	ffids := map[string]bool{}
	dom, intl, arr := 0, 0, 0
	for i, p := range plans {
		if ffids[p.FFID()] {
			t.Fatalf("FFID %s twice", p.FFID())
		}
		ffids[p.FFID()] = true
		if i > 0 && p.SODT.Before(plans[i-1].SODT) {
			t.Fatal("flights not in SODT order")
		}
		if p.SODT.Before(day.Add(6*time.Hour)) || p.SODT.After(day.Add(22*time.Hour+30*time.Minute)) {
			t.Errorf("%s SODT %v outside 06:00–22:30", p.FLNO, p.SODT)
		}
		if !strings.HasPrefix(p.FLNO, p.ALCD) {
			t.Errorf("FLNO %s does not start with ALCD %s", p.FLNO, p.ALCD)
		}
		if p.MVIN == "A" {
			arr++
		}
		if n := len(p.Route); n < 1 || n > 3 || slices.Contains(p.Route, home) {
			t.Errorf("%s route %v", p.FLNO, p.Route)
		}
		switch p.FLIN {
		case "D":
			dom++
			for _, s := range p.Route {
				if !slices.Contains(domestic, s) {
					t.Errorf("domestic %s calls at %s", p.FLNO, s)
				}
			}
		case "I":
			intl++
		}
	}
	if dom < 400 || intl == 0 || arr < 200 || arr > 300 {
		t.Fatalf("domestic %d, international %d, arrivals %d: not a plausible mix", dom, intl, arr)
	}
}

func TestRouteTimes(t *testing.T) {
	t.Parallel()
	sodt := time.Date(2021, 1, 23, 10, 0, 0, 0, airportZone)
	tests := []struct {
		name  string
		mvin  string
		route []string
		want  []string // APCD/SCAT/SCDT, "-" for absent
	}{
		{"departure direct", "D", []string{"XIY"}, []string{"XIY/23JAN211125/-"}},
		{"departure through", "D", []string{"XIY", "PEK"}, []string{"XIY/23JAN211125/23JAN211210", "PEK/23JAN211415/-"}},
		{"arrival direct", "A", []string{"KMG"}, []string{"KMG/-/23JAN210840"}},
		{"arrival through", "A", []string{"PEK", "XIY"}, []string{"PEK/-/23JAN210545", "XIY/23JAN210750/23JAN210835"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range routeTimes(tt.mvin, sodt, tt.route) {
				f := func(t time.Time) string {
					if t.IsZero() {
						return "-"
					}
					return FormatTime(t)
				}
				got = append(got, p.apcd+"/"+f(p.scat)+"/"+f(p.scdt))
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBuilders(t *testing.T) {
	t.Parallel()
	dttm := time.Date(2021, 1, 23, 9, 3, 11, 0, airportZone)
	f := Flight{
		FLID: "15", ALCD: "3U", FLNO: "3U8881", MVIN: "D", SODT: time.Date(2021, 1, 23, 10, 0, 0, 0, airportZone),
		FLTY: "W", FLIN: "D", ACFT: "320", RENO: "B6789", TRML: "T2", Route: []string{"PEK"},
	}
	type fltr struct {
		FLID, ALCD, FLNO, MVIN, SODT, FLTY, FLIN, ACFT, RENO, TRML string
		STND                                                       *string
		ROUT                                                       []struct {
			RTNO string `xml:"RTNO,attr"`
			APCD string
		}
	}
	type flopBody struct {
		FLID, FFID string
		REMC       string
	}
	var doc struct {
		XMLName xml.Name `xml:"MSG"`
		SCHD    struct {
			RECS string
			FLTR []fltr
		}
		FLOP flopBody
	}

	if err := xml.Unmarshal([]byte(ADFT(7, dttm, f)), &doc); err != nil {
		t.Fatal(err)
	}
	want := fltr{FLID: "15", ALCD: "3U", FLNO: "3U8881", MVIN: "D", SODT: "23JAN211000", FLTY: "W", FLIN: "D", ACFT: "320", RENO: "B6789", TRML: "T2"}
	got := doc.SCHD.FLTR
	if doc.SCHD.RECS != "1" || len(got) != 1 || len(got[0].ROUT) != 1 || got[0].ROUT[0].APCD != "PEK" || got[0].ROUT[0].RTNO != "1" {
		t.Fatalf("ADFT body: %+v", doc.SCHD)
	}
	got[0].ROUT = nil
	if !reflect.DeepEqual(got[0], want) {
		t.Fatalf("ADFT FLTR %+v, want %+v (an empty STND must be absent)", got[0], want)
	}

	msg := FLOP(8, dttm, f.FLID, f.FFID(), "REMC", "<REMC>航班延误 &amp; 改期</REMC>")
	if err := xml.Unmarshal([]byte(msg), &doc); err != nil {
		t.Fatal(err)
	}
	if want := (flopBody{FLID: "15", FFID: "3U-3U8881-D-23JAN211000-D", REMC: "航班延误 & 改期"}); doc.FLOP != want {
		t.Fatalf("FLOP body %+v, want %+v", doc.FLOP, want)
	}
	info, err := parseEnvelope(msg)
	if err != nil {
		t.Fatal(err)
	}
	if info.meta["SEQN"] != "8" || info.meta["DTTM"] != "20210123090311" || info.meta["TYPE"] != "FLOP" || info.meta["STYP"] != "REMC" || info.meta["SNDR"] != "AODB" {
		t.Fatalf("FLOP META %v", info.meta)
	}
}

func TestDayOption(t *testing.T) {
	t.Parallel()
	// The calendar date of Day is the operation day, whatever its location.
	for _, d := range []time.Time{
		time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC),
		time.Date(2021, 1, 23, 23, 59, 0, 0, time.UTC),
		time.Date(2021, 1, 23, 12, 0, 0, 0, airportZone),
	} {
		for _, m := range Day(Options{Day: d, Flights: 10}) {
			if m.Kind == KindSchedule && !strings.Contains(m.XML, "<SODT>23JAN21") {
				t.Fatalf("Day %v: ADFT not on 23 Jan 2021:\n%s", d, m.XML)
			}
		}
	}
}

// TestConsistentWithSchedule checks what a pipeline cross-checks: a FLOP's FFID is its
// flight's ALCD-FLNO-MVIN-SODT-FLIN from the ADFT, and every RECS matches its records.
func TestConsistentWithSchedule(t *testing.T) {
	t.Parallel()
	type rec struct {
		XMLName xml.Name
	}
	var doc struct {
		RECS string
		SCHD struct {
			RECS string
			FLTR []struct{ FLID, ALCD, FLNO, MVIN, SODT, FLIN string }
		}
		SCHS struct {
			RECS string
			FLTR []struct{}
		}
		FLOP struct{ FLID, FFID string }
		Any  []rec `xml:",any"`
	}
	ffid := map[string]string{}
	for _, m := range Day(Options{Day: testDay, Seed: 8}) {
		if m.Kind == KindMalformed {
			continue
		}
		doc.SCHD.FLTR, doc.SCHS.FLTR, doc.Any, doc.RECS = nil, nil, nil, ""
		if err := xml.Unmarshal([]byte(m.XML), &doc); err != nil {
			t.Fatal(err)
		}
		switch {
		case m.TYPE == "SCHD":
			if doc.SCHD.RECS != strconv.Itoa(len(doc.SCHD.FLTR)) || len(doc.SCHD.FLTR) != 1 {
				t.Fatalf("SEQN %d: RECS %s with %d FLTR", m.SEQN, doc.SCHD.RECS, len(doc.SCHD.FLTR))
			}
			f := doc.SCHD.FLTR[0]
			if f.FLID != m.FLID {
				t.Fatalf("SEQN %d: FLTR FLID %s, Message.FLID %s", m.SEQN, f.FLID, m.FLID)
			}
			ffid[f.FLID] = strings.Join([]string{f.ALCD, f.FLNO, f.MVIN, f.SODT, f.FLIN}, "-")
		case m.TYPE == "FLOP":
			if doc.FLOP.FLID != m.FLID || doc.FLOP.FFID != ffid[m.FLID] {
				t.Fatalf("SEQN %d: FLOP FLID/FFID %s/%s, ADFT says %s/%s", m.SEQN, doc.FLOP.FLID, doc.FLOP.FFID, m.FLID, ffid[m.FLID])
			}
		case m.TYPE == "SCHS":
			if doc.SCHS.RECS != strconv.Itoa(len(doc.SCHS.FLTR)) {
				t.Fatalf("SEQN %d: SCHS RECS %s with %d FLTR", m.SEQN, doc.SCHS.RECS, len(doc.SCHS.FLTR))
			}
		default: // reference data: RECS then records named like the category, directly under MSG
			n := 0
			for _, r := range doc.Any {
				if r.XMLName.Local == m.TYPE {
					n++
				}
			}
			if n == 0 || doc.RECS != strconv.Itoa(n) {
				t.Fatalf("SEQN %d %s: RECS %q with %d records", m.SEQN, m.TYPE, doc.RECS, n)
			}
		}
	}
}

func TestTinyDays(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 12; n++ {
		msgs := Day(Options{Day: testDay, Flights: n, Seed: int64(n)})
		sched := 0
		for _, m := range msgs {
			if m.Kind == KindSchedule {
				sched++
			}
		}
		if sched != n {
			t.Fatalf("%d flights requested, %d ADFTs", n, sched)
		}
	}
}

func BenchmarkDay(b *testing.B) {
	for _, n := range []int{300, 2000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			msgs := 0
			for b.Loop() {
				msgs = len(Day(Options{Day: testDay, Flights: n}))
			}
			b.ReportMetric(float64(msgs), "msgs/day")
		})
	}
}

// With Snapshot the day's schedule is one SCHD DNLD first, carrying every flight of the day
// that DayFlights returns, and no ADFT.
func TestSnapshotDay(t *testing.T) {
	opts := Options{Flights: 40, Seed: 7, Day: time.Date(2026, 3, 1, 0, 0, 0, 0, airportZone), Snapshot: true}
	msgs := Day(opts)
	if msgs[0].Kind != KindSnapshot || msgs[0].STYP != "DNLD" || msgs[0].Want != Succeeded {
		t.Fatalf("first message %s %s-%s, want the DNLD", msgs[0].Kind, msgs[0].TYPE, msgs[0].STYP)
	}
	for _, m := range msgs {
		if m.Kind == KindSchedule {
			t.Fatal("an ADFT in a snapshot day")
		}
	}
	flights := DayFlights(opts)
	if len(flights) != 40 || !strings.Contains(msgs[0].XML, "<RECS>40</RECS>") {
		t.Fatalf("%d flights, DNLD %q", len(flights), msgs[0].XML[:200])
	}
	for _, f := range flights {
		if !strings.Contains(msgs[0].XML, "<FLID>"+f.FLID+"</FLID>") {
			t.Errorf("flight %s missing from the DNLD", f.FLID)
		}
	}
}
