package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// TestMetricsExpositionIsClean scrapes the five real services, after a message went through
// them, as Prometheus would, in both formats:
//   - the text format passes `promtool check metrics` (the linter of metric names, units and
//     help texts Prometheus ships);
//   - the OpenMetrics format, which names a counter's family without its _total, has each of
//     our families once: a gauge that shares its stem with a counter (msgx_x next to msgx_x_total)
//     would be two families of one name, which an OpenMetrics scraper refuses;
//   - every histogram bound reads as a round decimal (no `le="0.08100000000000002"`).
func TestMetricsExpositionIsClean(t *testing.T) {
	e := newEnv(t)
	admin := map[string]string{}
	for _, r := range stack.Services {
		admin[r] = freePort(t)
		if err := e.stack.Start(r, nil, "MSGX_ADMIN_ADDR="+admin[r]); err != nil {
			t.Fatal(err)
		}
	}
	e.waitAllRolesActive(t)
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	f := traffic.Flight{FLID: "MET-1", ALCD: "CA", FLNO: "CA1901", MVIN: "D", SODT: day.Add(9 * time.Hour),
		FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
	now := time.Now()
	id := e.my.InsertInbox(t, traffic.ADFT(1, day.Add(6*time.Hour), f), &now)
	testwait.ForState(t, time.Minute, "the message's five facts", func() (bool, string) {
		fs := e.facts(t, id)
		return fs.terminal && fs.marked && fs.delivered, fs.String()
	})

	promtool, err := exec.LookPath("promtool")
	if err != nil && os.Getenv("MSGX_PROMTOOL") != "skip" {
		t.Fatal("promtool not found: `apt-get install -y prometheus` (or run `make test`, which installs it)")
	}
	noisy := regexp.MustCompile(`le="[0-9.e+-]*[0-9]{9,}[0-9.e+-]*"`)
	for _, r := range stack.Services {
		text := scrape(t, admin[r], "text/plain; version=0.0.4")
		if promtool != "" {
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(text)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: promtool check metrics: %v\n%s", r, err, out)
			}
		}
		if m := noisy.FindAllString(text, 3); m != nil {
			t.Errorf("%s: histogram bounds with float noise: %v", r, m)
		}
		om := scrape(t, admin[r], "application/openmetrics-text; version=1.0.0; charset=utf-8")
		if !strings.HasSuffix(om, "# EOF\n") {
			t.Errorf("%s: the OpenMetrics exposition does not end with # EOF (was it served as text?)", r)
		}
		families := map[string]int{}
		for _, line := range strings.Split(om, "\n") {
			if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
				name, _, _ := strings.Cut(rest, " ")
				families[name]++
			}
		}
		if len(families) == 0 {
			t.Errorf("%s: no metric families in the OpenMetrics exposition", r)
		}
		for name, n := range families {
			// Only ours: client_golang's Go collector exports go_memstats_alloc_bytes beside
			// go_memstats_alloc_bytes_total itself, which is not ours to rename.
			if n > 1 && strings.HasPrefix(name, "msgx_") {
				t.Errorf("%s: OpenMetrics family %s appears %d times: a gauge shares its stem with a counter", r, name, n)
			}
		}
		t.Logf("%s: %d families, %d bytes of text exposition", r, len(families), len(text))
	}
}

// scrape reads a service's /metrics asking for the exposition format accept.
func scrape(t *testing.T, addr, accept string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, res.Body); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", addr, res.StatusCode, fmt.Sprint(err))
	}
	return b.String()
}
