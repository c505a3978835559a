package retry_test

import (
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/retry"
)

func TestAfter(t *testing.T) {
	t.Parallel()
	s := time.Second
	for _, c := range []struct {
		name    string
		p       retry.Policy
		attempt int
		want    time.Duration
	}{
		{"first step", retry.Policy{Backoff: []time.Duration{s, 2 * s, 4 * s}, Cap: 10 * s}, 1, s},
		{"zero counts as the first", retry.Policy{Backoff: []time.Duration{s, 2 * s}}, 0, s},
		{"third step", retry.Policy{Backoff: []time.Duration{s, 2 * s, 4 * s}, Cap: 10 * s}, 3, 4 * s},
		{"the last step repeats", retry.Policy{Backoff: []time.Duration{s, 2 * s, 4 * s}, Cap: 10 * s}, 9, 4 * s},
		{"capped", retry.Policy{Backoff: []time.Duration{s, 20 * s}, Cap: 10 * s}, 2, 10 * s},
		{"no cap", retry.Policy{Backoff: []time.Duration{s, 20 * s}}, 2, 20 * s},
		{"no steps: the cap", retry.Policy{Cap: 7 * s}, 3, 7 * s},
		{"nothing", retry.Policy{}, 3, 0},
	} {
		if got := c.p.After(c.attempt); got != c.want {
			t.Errorf("%s: After(%d) = %s, want %s", c.name, c.attempt, got, c.want)
		}
	}
}

func TestExhausted(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 3}
	if p.Exhausted(2) || !p.Exhausted(3) || !p.Exhausted(4) {
		t.Error("MaxAttempts 3: exhausted from the third attempt on")
	}
	if (retry.Policy{}).Exhausted(1000) {
		t.Error("MaxAttempts 0 means no limit")
	}
}

func TestDoubling(t *testing.T) {
	t.Parallel()
	m := time.Minute
	for _, c := range []struct {
		base, limit time.Duration
		want        []time.Duration
	}{
		{30 * time.Second, 15 * m, []time.Duration{30 * time.Second, m, 2 * m, 4 * m, 8 * m, 15 * m}},
		{m, 4 * m, []time.Duration{m, 2 * m, 4 * m}},
		{m, 30 * time.Second, []time.Duration{30 * time.Second}},
		{0, m, nil},
	} {
		if got := retry.Doubling(c.base, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("Doubling(%s, %s) = %v, want %v", c.base, c.limit, got, c.want)
		}
	}
}
