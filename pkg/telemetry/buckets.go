package telemetry

import (
	"math"
	"strconv"
)

// Buckets are histogram upper bounds from lo to hi (seconds, or whatever the histogram
// measures) on the 1–2.5–5 series of each decade: 0.001, 0.0025, 0.005, 0.01, … Each bound is
// the float nearest its decimal spelling, so the exposition's `le` labels read as written
// (`le="0.025"`), where prometheus.ExponentialBuckets' products carry float noise
// (`le="0.08100000000000002"`) that a query or a dashboard has to match exactly.
func Buckets(lo, hi float64) []float64 {
	var out []float64
	for exp := int(math.Floor(math.Log10(lo))); ; exp++ {
		for _, m := range []string{"1", "2.5", "5"} {
			v, err := strconv.ParseFloat(m+"e"+strconv.Itoa(exp), 64)
			if err != nil {
				panic(err) // the spelling above always parses
			}
			if v > hi*(1+1e-9) {
				return out
			}
			if v >= lo*(1-1e-9) {
				out = append(out, v)
			}
		}
	}
}

// LatencyBuckets are the bounds of msgx_pipeline_e2e_latency_seconds: the 1–2.5–5 series up to
// 10 s, then steps that resolve the percentile around the 60 s threshold of
// MsgxEndToEndLatencyHigh (45, 60, 90), then the tail of a backlog.
var LatencyBuckets = append(Buckets(0.05, 10), 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1800)
