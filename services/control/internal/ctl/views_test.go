package ctl

import (
	"bytes"
	"regexp"
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
