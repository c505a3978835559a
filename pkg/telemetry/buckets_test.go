package telemetry

import (
	"slices"
	"strconv"
	"testing"
)

func TestBucketsAreRoundDecimals(t *testing.T) {
	for _, tt := range []struct {
		lo, hi float64
		want   []string
	}{
		{0.001, 0.1, []string{"0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1"}},
		{0.0005, 3, []string{"0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5"}},
		{5, 600, []string{"5", "10", "25", "50", "100", "250", "500"}},
	} {
		var got []string
		for _, b := range Buckets(tt.lo, tt.hi) {
			got = append(got, strconv.FormatFloat(b, 'g', -1, 64))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Buckets(%v, %v) = %v, want %v", tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestLatencyBucketsResolveTheAlertThreshold(t *testing.T) {
	for i := 1; i < len(LatencyBuckets); i++ {
		if LatencyBuckets[i] <= LatencyBuckets[i-1] {
			t.Fatalf("LatencyBuckets not strictly increasing at %d: %v", i, LatencyBuckets)
		}
	}
	// The bounds around 60 s are at most 50 % apart, so a p99 near the threshold is
	// interpolated within a narrow bucket.
	i := slices.Index(LatencyBuckets, 60)
	if i < 1 || LatencyBuckets[i-1] < 40 || LatencyBuckets[i+1] > 90 {
		t.Errorf("LatencyBuckets around 60 s: %v", LatencyBuckets)
	}
}
