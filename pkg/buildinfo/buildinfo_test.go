package buildinfo

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestStampedBuild(t *testing.T) {
	version, commit = "1.4.2", "0123abc"
	defer func() { version, commit = "", "" }()
	var out bytes.Buffer
	if !PrintVersion("msgx-pump", []string{"--version"}, &out) {
		t.Fatal("--version not recognised")
	}
	if got := out.String(); !strings.HasPrefix(got, "msgx-pump version 1.4.2, commit 0123abc, go") {
		t.Errorf("--version printed %q", got)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	want := `
# HELP msgx_build_info The build of this binary: always 1, labelled with its version and commit.
# TYPE msgx_build_info gauge
msgx_build_info{commit="0123abc",goversion="` + Get().GoVersion + `",version="1.4.2"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "msgx_build_info"); err != nil {
		t.Error(err)
	}
}

func TestUnstampedBuild(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Commit == "" {
		t.Errorf("an unstamped build must still say something: %+v", i)
	}
	for _, args := range [][]string{nil, {"migrate"}, {"--version", "x"}, {"version"}} {
		if PrintVersion("x", args, &bytes.Buffer{}) {
			t.Errorf("PrintVersion took %v for a version request", args)
		}
	}
}
