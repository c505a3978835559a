package pump

import (
	"context"
	"log/slog"
	"sync"
)

// RangeReader is a RawReader that can also read the rows after an ID in one query
// (inbox.Inbox.RawAfter).
type RangeReader interface {
	RawReader
	RawAfter(ctx context.Context, after int64, span int, maxBytes int) (map[int64]string, error)
}

// Read-ahead bounds: the IDs one read covers, and the longest text kept ahead (a large
// message, a schedule snapshot, is read when it is the head: its own processing dwarfs the
// read, and holding several would cost megabytes).
const (
	readAheadSpan     = 64
	readAheadMaxBytes = 64 << 10
)

// ReadAhead is the pump's RawReader: while the head runs, it reads the text of the next rows
// in one query in the background, so the head after it starts without an inbox round trip.
// Reading a row is idempotent and the pump still asks for one message at a time in ID order,
// so the processing order and every transaction stay as they are; only the wait for the
// inbox moves off the critical path. A row the read ahead did not find (not written yet,
// longer than the bound, the read failed) is read on demand, with the errors of the inner
// reader: an outage or a missing row is decided there, never by the read ahead.
type ReadAhead struct {
	inner  RangeReader
	logger *slog.Logger

	mu      sync.Mutex
	texts   map[int64]string
	through int64 // the highest ID a read ahead covered
	running bool
}

// NewReadAhead wraps r.
func NewReadAhead(r RangeReader, logger *slog.Logger) *ReadAhead {
	return &ReadAhead{inner: r, logger: logger, texts: map[int64]string{}}
}

// Raw implements RawReader.
func (a *ReadAhead) Raw(ctx context.Context, id int64) (string, error) {
	a.mu.Lock()
	text, ok := a.texts[id]
	for k := range a.texts {
		if k <= id {
			delete(a.texts, k) // passed: a later run of it (a replay) reads it again
		}
	}
	if a.through < id || a.through-id < readAheadSpan/2 {
		a.startLocked(ctx, max(a.through, id))
	}
	a.mu.Unlock()
	if ok {
		return text, nil
	}
	return a.inner.Raw(ctx, id)
}

// startLocked reads the rows after `after` in the background unless a read is running.
func (a *ReadAhead) startLocked(ctx context.Context, after int64) {
	if a.running {
		return
	}
	a.running = true
	// The read outlives the step that started it; the inbox bounds it.
	ctx = context.WithoutCancel(ctx)
	go func() {
		texts, err := a.inner.RawAfter(ctx, after, readAheadSpan, readAheadMaxBytes)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.running = false
		if err != nil {
			a.logger.Debug("inbox read ahead failed; the rows are read one by one", "after", after, "err", err)
			return
		}
		for id, t := range texts {
			a.texts[id] = t
		}
		// Rows not written yet are covered only once they exist: a read ahead that found
		// nothing leaves the next one to start from the same place.
		var top int64
		for id := range texts {
			top = max(top, id)
		}
		a.through = max(a.through, top)
	}()
}

// Probe implements RawReader.
func (a *ReadAhead) Probe(ctx context.Context) error { return a.inner.Probe(ctx) }
