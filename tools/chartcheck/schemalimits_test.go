package chartcheck

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// sameLengthRange is a pattern of the decimal numbers lo..hi, both of the same length.
func sameLengthRange(lo, hi string) string {
	if len(lo) == 1 {
		if lo == hi {
			return lo
		}
		return "[" + lo + "-" + hi + "]"
	}
	if strings.Trim(lo, "0") == "" && strings.Trim(hi, "9") == "" {
		return fmt.Sprintf("[0-9]{%d}", len(lo))
	}
	if lo[0] == hi[0] {
		return lo[:1] + sameLengthRange(lo[1:], hi[1:])
	}
	rest := len(lo) - 1
	alts := []string{lo[:1] + sameLengthRange(lo[1:], strings.Repeat("9", rest))}
	if hi[0]-lo[0] > 1 {
		alts = append(alts, fmt.Sprintf("[%c-%c][0-9]{%d}", lo[0]+1, hi[0]-1, rest))
	}
	alts = append(alts, hi[:1]+sameLengthRange(strings.Repeat("0", rest), hi[1:]))
	return "(" + strings.Join(alts, "|") + ")"
}

// intRangePattern matches the decimal numbers min..max (max < 0: no upper bound), with leading
// zeros, as strconv.Atoi reads them; min ≥ 0.
func intRangePattern(lo, hi int64) string {
	var alts []string
	from := lo
	for {
		digits := len(strconv.FormatInt(from, 10))
		top := int64(1)
		for range digits {
			top *= 10
		}
		top-- // the largest number of this many digits
		if hi >= 0 && hi <= top {
			alts = append(alts, sameLengthRange(strconv.FormatInt(from, 10), strconv.FormatInt(hi, 10)))
			break
		}
		alts = append(alts, sameLengthRange(strconv.FormatInt(from, 10), strconv.FormatInt(top, 10)))
		if hi < 0 {
			alts = append(alts, fmt.Sprintf("[1-9][0-9]{%d,}", digits))
			break
		}
		from = top + 1
	}
	return "^0*(" + strings.Join(alts, "|") + ")$"
}

// limitSchema adds the registry's limit to a parameter's schema: minimum and maximum for a
// number written as such and a pattern of the same range for one written as a string. A
// duration's limit is only described here: a pattern weighing durations took ~1,500
// characters, which is what helm quoted at whoever set a value out of range (issue #56); the
// chart checks it at render time instead (limitsTemplate, msgexchange.validate), saying
// "at most 8s" (docs/environment.md).
func limitSchema(p config.Param, s map[string]any) {
	l := p.Limit
	if l == (config.Limit{}) {
		return
	}
	orEmpty := func(pattern string) string {
		if p.Default == "" {
			return "^$|" + pattern
		}
		return pattern
	}
	switch p.Kind {
	case config.KindInteger:
		lo, _ := strconv.ParseInt(l.Min, 10, 64)
		hi := int64(-1)
		s["minimum"] = lo
		if l.Max != "" {
			hi, _ = strconv.ParseInt(l.Max, 10, 64)
			s["maximum"] = hi
		}
		s["pattern"] = orEmpty(intRangePattern(lo, hi))
	case config.KindDuration:
		s["description"] = fmt.Sprintf("%s; %s", s["description"], limitText(l))
	}
}

// limitText says a limit as pkg/config's refusal does (Limit.check).
func limitText(l config.Limit) string {
	switch {
	case (l.Min == "1" || l.Min == "1ns") && l.Max != "":
		return "positive, at most " + l.Max
	case l.Min != "" && l.Max != "":
		return fmt.Sprintf("between %s and %s", l.Min, l.Max)
	case l.Min == "1" || l.Min == "1ns":
		return "positive"
	case l.Min != "":
		return "at least " + l.Min
	default:
		return "at most " + l.Max
	}
}

// limitsFile is the chart's copy of the registry's duration limits, generated with the schema.
const limitsFile = chartDir + "/templates/_limits.tpl"

// limitsTemplate is limitsFile's text: one line of YAML (JSON) per duration parameter with a
// limit, which msgexchange.validate reads with fromYaml and checks each value of
// values.config against, failing with the bound and its reason.
func limitsTemplate() string {
	var b strings.Builder
	b.WriteString("{{- /* Generated from pkg/config's registry by `go test ./tools/chartcheck -run TestValuesSchemaMatchesConfig -update`:\n" +
		"the duration parameters' limits, which msgexchange.validate checks (the schema says only \"a duration\"). */ -}}\n" +
		"{{- define \"msgexchange.durationLimits\" -}}\n")
	for _, p := range config.Params() {
		if _, managed := chartManaged[p.Key]; managed || p.Kind != config.KindDuration || p.Limit == (config.Limit{}) {
			continue
		}
		line, _ := json.Marshal(map[string]string{"env": config.EnvName(p.Key), "min": p.Limit.Min, "max": p.Limit.Max,
			"text": limitText(p.Limit), "why": p.Why})
		fmt.Fprintf(&b, "%q: %s\n", p.Key, line)
	}
	b.WriteString("{{- end -}}\n")
	return b.String()
}

func TestIntRangePattern(t *testing.T) {
	t.Parallel()
	tests := []struct{ lo, hi int64 }{{1, -1}, {0, 9}, {65536, 16777216}, {1024, 104857599}, {4096, 524288}, {1, 16777216}, {7, 7}, {19, 2001}}
	for _, tc := range tests {
		re := regexp.MustCompile(intRangePattern(tc.lo, tc.hi))
		for _, n := range []int64{0, 1, 2, 6, 7, 8, 9, 10, 18, 19, 20, 99, 100, 999, 1000, 1023, 1024, 1025, 2000, 2001, 2002, 4095, 4096, 65535, 65536, 65537, 524288, 524289,
			9999999, 16777215, 16777216, 16777217, 104857599, 104857600, 1 << 40} {
			want := n >= tc.lo && (tc.hi < 0 || n <= tc.hi)
			for _, text := range []string{strconv.FormatInt(n, 10), "00" + strconv.FormatInt(n, 10)} {
				if got := re.MatchString(text); got != want {
					t.Errorf("%d..%d: %q matched %v, want %v (%s)", tc.lo, tc.hi, text, got, want, re)
				}
			}
		}
	}
}

// TestHelmRefusesWhatTheServicesRefuse: values the services would refuse at start-up fail
// `helm template` already, each naming the parameter.
func TestHelmRefusesWhatTheServicesRefuse(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	for _, set := range []string{
		"config.pipeline\\.max-attempts=0",
		"config.pipeline\\.max-attempts=-3",
		"config.codec\\.max-bytes=1024",
		"config.codec\\.max-bytes=99999999",
		"config.control\\.max-body-chars=600000",
		"config.schd\\.flush-period=0s",
		"config.pipeline\\.proc-retention=30d",
		"config.pipeline\\.poll-interval=10ms",
		"config.inbox\\.timeout=30s",
	} {
		t.Run(set, func(t *testing.T) {
			out, err := helmRun(helm, "template", "msgx", filepath.Join(root, chartDir), "-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml"), "--set-string", set)
			key := strings.ReplaceAll(strings.TrimPrefix(set[:strings.Index(set, "=")], "config."), "\\", "")
			if err == nil || !strings.Contains(out, key) {
				t.Errorf("helm template --set-string %s: err %v, want a refusal naming %s:\n%.2000s", set, err, key, out)
			}
		})
	}
}

// helmRun runs helm and returns its combined output and error, for the runs that must fail.
func helmRun(helm string, args ...string) (string, error) {
	out, err := exec.Command(helm, args...).CombinedOutput()
	return string(out), err
}

// TestDurationRefusalsSayTheBound: a duration out of its registry limit fails the render with
// one short line saying the bound and its reason, as the services would, not a pattern of
// ~1,500 characters (issue #56); the bounds themselves render.
func TestDurationRefusalsSayTheBound(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	chart := filepath.Join(root, chartDir)
	tokens := filepath.Join(chart, "ci/tokens-values.yaml")
	for set, want := range map[string]string{
		"config.inbox\\.timeout=30s":                       "config.inbox.timeout=30s: must be positive, at most 8s (longer calls would outlive the leader lease of the lock connection; MSGX_INBOX_TIMEOUT, docs/environment.md)",
		"config.inbox\\.timeout=0s":                        "config.inbox.timeout=0s: must be positive, at most 8s",
		"config.pipeline\\.poll-interval=10ms":             "config.pipeline.poll-interval=10ms: must be at least 50ms (MSGX_PIPELINE_POLL_INTERVAL",
		"config.pipeline\\.proc-retention=30d":             "config.pipeline.proc-retention=30d: must be between 1d and 7d (R-RETAIN-1;",
		"config.airport\\.operation-day-cutover=24h":       "must be between 0s and 23h59m59.999999999s (within a day;",
		"config.schd\\.flush-period=0":                     "config.schd.flush-period=0: must be positive",
		"config.retention\\.pause=10001ms":                 "config.retention.pause=10001ms: must be between 0s and 10s",
		"config.airport\\.time-zone=Mars/Olympus":          "airport.time-zone",
		"config.airport\\.time-zone=Asia/Shanghai/Extra/X": "airport.time-zone",
	} {
		out, err := helmRun(helm, "template", "msgx", chart, "-f", tokens, "--set-string", set)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("helm template --set-string %s: err %v, want a refusal saying %q:\n%.2000s", set, err, want, out)
		}
		if len(out) > 600 {
			t.Errorf("helm template --set-string %s: a refusal of %d characters, want a short one:\n%.2000s", set, len(out), out)
		}
	}
	for _, set := range []string{"config.inbox\\.timeout=8s", "config.inbox\\.timeout=7999ms", "config.pipeline\\.poll-interval=50ms",
		"config.pipeline\\.proc-retention=7d", "config.airport\\.operation-day-cutover=23h59m", "config.retention\\.pause=0",
		"config.airport\\.time-zone=UTC", "config.airport\\.time-zone=America/Argentina/Buenos_Aires", "config.airport\\.time-zone=Etc/GMT+8"} {
		if out, err := helmRun(helm, "template", "msgx", chart, "-f", tokens, "--set-string", set); err != nil {
			t.Errorf("helm template --set-string %s: %v, want it rendered:\n%.2000s", set, err, out)
		}
	}
}

// TestTimeZonePatternCoversTzdata: every zone of Go's tzdata in an IANA area (and UTC) passes
// the schema's pattern, so the schema refuses no zone the services load; names outside the
// areas do not.
func TestTimeZonePatternCoversTzdata(t *testing.T) {
	t.Parallel()
	// Every Go distribution ships its tzdata here (the time/tzdata package embeds the same file).
	zr, err := zip.OpenReader(filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Fatalf("Go's tzdata: %v", err)
	}
	defer zr.Close()
	re := regexp.MustCompile(timeZonePattern)
	areas := regexp.MustCompile(`^(Africa|America|Antarctica|Arctic|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)/`)
	n := 0
	for _, f := range zr.File {
		if areas.MatchString(f.Name) || f.Name == "UTC" {
			n++
			if !re.MatchString(f.Name) {
				t.Errorf("tzdata's zone %s does not match the schema's time-zone pattern", f.Name)
			}
		}
	}
	if n < 300 {
		t.Errorf("only %d zones of tzdata checked", n)
	}
	for _, z := range []string{"Mars/Olympus", "Local", "", "Asia", "Asia/Shanghai/Extra/X", "asia/shanghai"} {
		if re.MatchString(z) {
			t.Errorf("%q matches the time-zone pattern", z)
		}
	}
}
