package testwait_test

import (
	"fmt"
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
