package testwait_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/testwait"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			time.Sleep(5 * time.Millisecond)
			n.Add(1)
		}
	}()
	testwait.For(t, 5*time.Second, "three increments", func() bool { return n.Load() == 3 })
}

// fatalRecorder records Fatalf instead of stopping the goroutine, so the failure path can be
// asserted; testing.TB cannot be implemented outside the testing package, hence the embedding.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = format
	if len(args) > 0 {
		f.msg = sprintf(format, args...)
	}
}

func TestForStateReportsTheLastState(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	testwait.ForState(rec, 50*time.Millisecond, "the impossible", func() (bool, string) { return false, "still 2" })
	want := "timed out after 50ms waiting for the impossible; last state: still 2"
	if rec.msg != want {
		t.Fatalf("failure message %q, want %q", rec.msg, want)
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func TestUntilRetriesUntilTheProbeSucceedsOrTheContextEnds(t *testing.T) {
	calls := 0
	err := testwait.Until(t.Context(), "the third call", time.Second, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a probe's call has no deadline")
		}
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Until: %v after %d calls, want success on the third", err, calls)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	err = testwait.Until(ctx, "a server that never answers", time.Second, func(context.Context) error { return errors.New("refused") })
	if err == nil || !strings.Contains(err.Error(), "waiting for a server that never answers: refused") {
		t.Errorf("Until past its context: %v, want the awaited thing and the last error", err)
	}
}
