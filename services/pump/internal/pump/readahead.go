package pump

import (
	"context"
	"log/slog"
	"sync"
)

// RangeReader is a RawReader that can also read the rows after an ID in one query
// (aodb.Inbox.RawAfter).
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
//
// The background reads live within a term (Term, which Pump.Run calls): they run on the
// term's context, and the term does not end before they have. Outside a term every row is
// read on demand.
type ReadAhead struct {
	inner  RangeReader
	logger *slog.Logger

	mu      sync.Mutex
	texts   map[int64]string
	through int64 // the highest ID a read ahead covered
	running bool
	// term is the context of the current term, nil outside one; reads counts the background
	// reads started in it, for the term's end to wait for.
	term  context.Context
	reads sync.WaitGroup
}

// NewReadAhead wraps r.
func NewReadAhead(r RangeReader, logger *slog.Logger) *ReadAhead {
	return &ReadAhead{inner: r, logger: logger, texts: map[int64]string{}}
}

// Term starts a term of reads ahead on ctx. end cancels the read in flight, waits for it and
// forgets what was read, so nothing of the term outlives it; it must be called before the
// next Term.
func (a *ReadAhead) Term(ctx context.Context) (end func()) {
	ctx, cancel := context.WithCancel(ctx)
	a.mu.Lock()
	a.term = ctx
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.term = nil // no read starts after this
		a.mu.Unlock()
		cancel()
		a.reads.Wait()
		a.mu.Lock()
		clear(a.texts)
		a.through = 0
		a.mu.Unlock()
	}
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
		a.startLocked(max(a.through, id))
	}
	a.mu.Unlock()
	if ok {
		return text, nil
	}
	return a.inner.Raw(ctx, id)
}

// startLocked reads the rows after `after` in the background unless a read is running or no
// term is.
func (a *ReadAhead) startLocked(after int64) {
	if a.running || a.term == nil {
		return
	}
	a.running = true
	// The read outlives the step that started it, not the term; the inbox bounds it.
	ctx := a.term
	a.reads.Add(1)
	go func() {
		defer a.reads.Done()
		texts, err := a.inner.RawAfter(ctx, after, readAheadSpan, readAheadMaxBytes)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.running = false
		if err != nil {
			if ctx.Err() == nil {
				a.logger.DebugContext(ctx, "inbox read ahead failed; the rows are read one by one", "after", after, "err", err)
			}
			return
		}
		if ctx.Err() != nil {
			return // the term ended: what it read is not kept past it
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
