// Package testlog collects what a logger writes, for a test to read back. The code under test
// logs from its own goroutines while the test reads, so the Buffer is safe for concurrent use.
package testlog

import (
	"bytes"
	"encoding/json"
	"sync"
)

// Buffer is an io.Writer for a logger (slog's handlers, logging.New) that keeps everything
// written to it. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines are the JSON lines written so far, decoded, in order; a line that is not a JSON object
// (a text handler's, a partial write) is left out.
func (l *Buffer) Lines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for raw := range bytes.SplitSeq(l.b.Bytes(), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}
