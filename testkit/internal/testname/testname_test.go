package testname

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestStampOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, sep string
		base      int
		want      int64
		ok        bool
	}{
		{"msgxt_pump_1700000000_42_3", "_", 10, 1700000000, true},
		{"msgxt_a_b_1700000000_42_3", "_", 10, 1700000000, true},
		{"msgxu_s44we8_42_3", "_", 36, 1700000000, true}, // mysqltest accounts: base 36, no package
		{"msgxt:pump:1700000000:42:3", ":", 10, 1700000000, true},
		{"msgxt_something", "_", 10, 0, false},
	} {
		got, ok := StampOf(c.name, c.sep, c.base)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("StampOf(%q) = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestNameCarriesStampAndPID(t *testing.T) {
	t.Parallel()
	r := NewRun()
	a, b := r.Name("msgxt_", "_"), r.Name("msgxt_", "_")
	if a == b {
		t.Fatalf("two names alike: %s", a)
	}
	if !strings.HasPrefix(a, "msgxt_") || !strings.Contains(a, fmt.Sprintf("_%d_%d_", r.Stamp, os.Getpid())) {
		t.Errorf("name %s lacks the stamp %d or the pid", a, r.Stamp)
	}
	if ts, ok := StampOf(a, "_", 10); !ok || ts != r.Stamp {
		t.Errorf("StampOf(%s) = %d, %v; want %d", a, ts, ok, r.Stamp)
	}
}

func TestSweepOnceSweepsOncePerServer(t *testing.T) {
	t.Parallel()
	r := NewRun()
	n := map[string]int{}
	for _, s := range []string{"a", "b", "a", "a"} {
		r.SweepOnce(s, func(int64) { n[s]++ })
	}
	if n["a"] != 1 || n["b"] != 1 {
		t.Errorf("sweeps = %v, want one per server", n)
	}
}
