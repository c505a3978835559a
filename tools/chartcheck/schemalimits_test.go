package chartcheck

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
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

// durationUnits are Go's duration units with their length, and the days ParseDuration adds.
var durationUnits = []struct {
	unit string
	ns   int64
}{{"ns", 1}, {"us", 1e3}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}, {"d", 86400e9}}

// durationRangePattern matches the durations lo..hi (hi < 0: no upper bound) written as one
// whole number of one unit ("50ms", "7d", "30s"), each unit's number range computed from the
// bounds, and lets through the forms a pattern cannot weigh (several components, a fraction),
// which the service checks at start-up.
func durationRangePattern(lo, hi int64) string {
	var alts []string
	if lo == 0 {
		alts = append(alts, "0")
	}
	for _, u := range durationUnits {
		from := (lo + u.ns - 1) / u.ns
		to := int64(-1)
		if hi >= 0 {
			to = hi / u.ns
			if to < from {
				continue
			}
		}
		r := intRangePattern(from, to)
		alts = append(alts, strings.TrimSuffix(strings.TrimPrefix(r, "^"), "$")+u.unit)
	}
	const component = `[0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h)`
	alts = append(alts, "("+component+"){2,}", `[0-9]*\.[0-9]+(ns|us|µs|ms|s|m|h)`)
	return "^(" + strings.Join(alts, "|") + ")$"
}

// limitSchema adds the registry's limit to a parameter's schema: minimum and maximum for a
// number written as such, a pattern of the same range for one written as a string, and for a
// duration a pattern of its range over the one-unit forms (docs/environment.md).
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
		lo, _ := config.ParseDuration(l.Min)
		hi := int64(-1)
		if l.Max != "" {
			d, _ := config.ParseDuration(l.Max)
			hi = int64(d)
		}
		s["pattern"] = orEmpty(durationRangePattern(int64(lo), hi))
		s["description"] = fmt.Sprintf("%s; from %s to %s", s["description"], l.Min, cmpOr(l.Max, "any"))
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
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

func TestDurationRangePattern(t *testing.T) {
	t.Parallel()
	const day = int64(86400e9)
	tests := []struct {
		name   string
		lo, hi int64
		values map[string]bool
	}{
		{"positive", 1, -1, map[string]bool{"1s": true, "0s": false, "0": false, "0d": false, "30d": true, "1h0m0s": true,
			"0.5s": true, "100ms": true, "1.5h": true, "10": false, "-1s": false, "1x": false, "1ns": true}},
		{"at least 50ms", 50e6, -1, map[string]bool{"10ms": false, "49ms": false, "50ms": true, "1s": true, "50000us": true,
			"49999999ns": false, "1d": true, "0s": false}},
		{"1d to 7d", day, 7 * day, map[string]bool{"1d": true, "7d": true, "30d": false, "0d": false, "24h": true, "168h": true,
			"169h": false, "23h": false, "12h": false, "10080m": true, "10081m": false, "36h30m": true}},
		{"0 to under 24h", 0, day - 1, map[string]bool{"0s": true, "0": true, "23h": true, "24h": false, "1d": false, "0d": true, "1439m": true}},
	}
	for _, tc := range tests {
		re := regexp.MustCompile(durationRangePattern(tc.lo, tc.hi))
		for v, want := range tc.values {
			if got := re.MatchString(v); got != want {
				t.Errorf("%s: %q matched %v, want %v", tc.name, v, got, want)
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
