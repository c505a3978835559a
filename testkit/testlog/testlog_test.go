package testlog_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/msgexchange/msgexchange/testkit/testlog"
)

// Loggers writing from several goroutines while the test reads lose no line (run with -race).
func TestBufferKeepsConcurrentLines(t *testing.T) {
	var logs testlog.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			log.Info("line", "i", i)
			_ = logs.Lines()
		})
	}
	wg.Wait()
	_, _ = logs.Write([]byte("not json\n"))
	lines := logs.Lines()
	if len(lines) != 8 {
		t.Fatalf("%d JSON lines, want 8:\n%s", len(lines), logs.String())
	}
	for _, l := range lines {
		if l["msg"] != "line" {
			t.Errorf("decoded line %v", l)
		}
	}
	if !strings.Contains(logs.String(), "not json") {
		t.Error("String leaves out a line that is not JSON")
	}
}
