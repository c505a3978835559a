package config

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// neighbour is the value one step outside bound (step -1 below Min, +1 above Max) in the
// parameter's syntax: one for an integer, one nanosecond for a duration.
func neighbour(t *testing.T, kind Kind, bound string, step int64) string {
	t.Helper()
	switch kind {
	case KindInteger:
		n, err := strconv.ParseInt(bound, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(n+step, 10)
	case KindDuration:
		d, err := ParseDuration(bound)
		if err != nil {
			t.Fatal(err)
		}
		return (d + time.Duration(step)).String()
	default:
		t.Fatalf("a limit on a %s parameter", kind)
		return ""
	}
}

// TestLimitsAreWhatValidateEnforces loads every registry bound and its outer neighbour: the
// bound passes the parameter's own check, the neighbour is refused naming the parameter. So the
// limits the chart's schema is generated from are exactly the services'.
func TestLimitsAreWhatValidateEnforces(t *testing.T) {
	t.Parallel()
	n := 0
	for _, p := range Params() {
		if p.Limit == (Limit{}) {
			continue
		}
		n++
		for _, b := range []struct {
			bound string
			step  int64
		}{{p.Limit.Min, -1}, {p.Limit.Max, 1}} {
			if b.bound == "" {
				continue
			}
			env := EnvName(p.Key)
			_, err := Load(map[string]string{env: b.bound}, AllServices)
			if err != nil && strings.Contains(err.Error(), p.Key+" must") {
				t.Errorf("%s=%s, the registry's bound, is refused: %v", env, b.bound, err)
			}
			out := neighbour(t, p.Kind, b.bound, b.step)
			_, err = Load(map[string]string{env: out}, AllServices)
			if err == nil || !strings.Contains(err.Error(), p.Key) {
				t.Errorf("%s=%s, beyond the registry's bound %s, is not refused for %s: %v", env, out, b.bound, p.Key, err)
			}
		}
	}
	if n < 40 {
		t.Errorf("%d parameters have limits; validate bounds more", n)
	}
}

// TestUnlimitedParamsTakeAnyValue: a number or duration parameter without a registry limit is
// not refused for its value alone, so no bound of validate is missing from the registry.
func TestUnlimitedParamsTakeAnyValue(t *testing.T) {
	t.Parallel()
	for _, p := range Params() {
		if p.Limit != (Limit{}) || (p.Kind != KindInteger && p.Kind != KindDuration) {
			continue
		}
		for _, v := range []string{"-1", "-1ns", "0", "0s", "1000000000", "100000h"} {
			if _, err := strconv.ParseInt(v, 10, 64); (err == nil) != (p.Kind == KindInteger) {
				continue
			}
			env := EnvName(p.Key)
			if _, err := Load(map[string]string{env: v}, AllServices); err != nil && strings.Contains(err.Error(), p.Key+" must") {
				t.Errorf("%s=%s is refused, but the registry has no limit for %s: %v", env, v, p.Key, err)
			}
		}
	}
}
