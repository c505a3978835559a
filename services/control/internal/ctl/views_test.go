package ctl

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

func TestRenderFlight(t *testing.T) {
	t.Parallel()
	v := int64(4)
	for _, tc := range []struct {
		name string
		r    *controlv1.GetFlightResponse
		want []string
	}{
		{"redis unreadable", &controlv1.GetFlightResponse{Flid: "F1", Drift: "unknown", Drifted: true,
			Postgres: &controlv1.FlightState{State: "ACTIVE", Version: 4, DocumentJson: `{"FLNO":"CA1501"}`},
			Redis:    &controlv1.FlightProjection{Error: "dial tcp: connection refused"}},
			[]string{"flight F1  drift UNKNOWN", "redis could not be read: dial tcp: connection refused", `≠  version\s+4\s+-\n`,
				`≠  FLNO\s+"CA1501"\s+-\n`}},
		{"only in redis", &controlv1.GetFlightResponse{Flid: "F2", Drift: "extra", Drifted: true,
			Redis: &controlv1.FlightProjection{Version: &v, DocumentJson: `{"FLNO":"MU1"}`}},
			[]string{"drift EXTRA", `≠  version\s+-\s+4\n`, `≠  FLNO\s+-\s+"MU1"\n`, `messages \(0\):`, `events \(0\):`}},
	} {
		var b bytes.Buffer
		if err := renderFlight(&b, tc.r, tableOpts{}); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !regexp.MustCompile(w).MatchString(b.String()) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, b.String())
			}
		}
	}
}

// A long collection does not widen the narrow view: each value is cut to flightCell characters,
// and a difference inside a cut value is shown where it starts; -o wide shows the values whole.
func TestFlightViewFitsATerminal(t *testing.T) {
	long := `[{"GATE":"` + strings.Repeat("G", 300) + `A"}]`
	drifted := strings.Replace(long, `A"`, `B"`, 1)
	v := int64(3)
	r := &controlv1.GetFlightResponse{Flid: "F3", Drift: "content", Drifted: true,
		Postgres: &controlv1.FlightState{State: "ACTIVE", Version: 3, DocumentJson: `{"FLNO":"CA1","GTDT":` + long + `}`},
		Redis:    &controlv1.FlightProjection{Version: &v, DocumentJson: `{"FLNO":"CA1","GTDT":` + drifted + `}`}}
	var narrow, wide bytes.Buffer
	if err := renderFlight(&narrow, r, tableOpts{}); err != nil {
		t.Fatal(err)
	}
	if err := renderFlight(&wide, r, tableOpts{wide: true, long: true}); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(narrow.String(), "\n") {
		if n := len([]rune(line)); n > 120 {
			t.Errorf("a line of %d characters in the narrow view: %q", n, line)
		}
	}
	if !strings.Contains(narrow.String(), "≠ GTDT differs from character 310") || !strings.Contains(narrow.String(), `GA"}]`) ||
		!strings.Contains(narrow.String(), `GB"}]`) {
		t.Errorf("the narrow view does not say where GTDT differs:\n%s", narrow.String())
	}
	if !strings.Contains(wide.String(), long) || !strings.Contains(wide.String(), drifted) ||
		!regexp.MustCompile(`\n\s+FLNO\s+"CA1"\s+"CA1"\n`).MatchString(wide.String()) {
		t.Errorf("-o wide does not show every field whole:\n%s", wide.String())
	}
	// The narrow view is a diff: the equal FLNO is counted, not listed.
	if strings.Contains(narrow.String(), "FLNO") || !strings.Contains(narrow.String(), "1 of 2 fields equal on both sides") {
		t.Errorf("the narrow view lists a field that agrees, or does not count them:\n%s", narrow.String())
	}
}
