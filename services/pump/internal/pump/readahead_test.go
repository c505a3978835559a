package pump_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// countingInbox counts the one-row reads and the range reads that reach the inbox.
type countingInbox struct {
	*aodb.Inbox
	one, ranges atomic.Int64
}

func (c *countingInbox) Raw(ctx context.Context, id int64) (string, error) {
	c.one.Add(1)
	return c.Inbox.Raw(ctx, id)
}

func (c *countingInbox) RawAfter(ctx context.Context, after int64, span, maxBytes int) (map[int64]string, error) {
	defer c.ranges.Add(1) // counted once answered
	return c.Inbox.RawAfter(ctx, after, span, maxBytes)
}

// The read ahead gives exactly the texts the inbox gives, the ones after the first without a
// read of their own; a row longer than its bound and a row that does not exist are read on
// demand, with the inbox's own answer.
func TestReadAheadServesTheNextRowsFromOneRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var ids []int64
	for i := range 5 {
		ids = append(ids, e.my.InsertInbox(t, e.remark("4711", strings.Repeat("R", i+1)), nil))
	}
	large := e.my.InsertInbox(t, e.remark("4711", strings.Repeat("L", 70<<10)), nil)
	in := &countingInbox{Inbox: e.inbox}
	ra := pump.NewReadAhead(in, slog.New(slog.DiscardHandler))
	defer ra.Term(ctx)()
	read := func(id int64) string {
		t.Helper()
		got, err := ra.Raw(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want, err := e.inbox.Raw(ctx, id)
		if err != nil || got != want {
			t.Fatalf("row %d: read ahead gave %q, the inbox %q (%v)", id, got, want, err)
		}
		return got
	}
	read(ids[0])
	testwait.For(t, 5*time.Second, "the read ahead", func() bool { return in.ranges.Load() >= 1 && ra.Idle() })
	before := in.one.Load()
	for _, id := range ids[1:] {
		read(id)
	}
	if n := in.one.Load() - before; n != 0 {
		t.Fatalf("%d rows read one by one after the read ahead, want 0", n)
	}
	read(large)
	if n := in.one.Load() - before; n != 1 {
		t.Fatalf("the row over the bound: %d reads, want 1", n)
	}
	if _, err := ra.Raw(ctx, large+1000); !errors.Is(err, aodb.ErrRowMissing) {
		t.Fatalf("missing row: %v, want ErrRowMissing", err)
	}
}

// blockingInbox is a RangeReader whose range reads wait until their context ends.
type blockingInbox struct {
	started, returned chan struct{}
}

func (b *blockingInbox) Raw(ctx context.Context, id int64) (string, error) { return "text", nil }
func (b *blockingInbox) Probe(ctx context.Context) error                   { return nil }

func (b *blockingInbox) RawAfter(ctx context.Context, after int64, span, maxBytes int) (map[int64]string, error) {
	close(b.started)
	defer close(b.returned)
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// The read ahead lives within its term: the end of the term cancels the read in flight and
// returns only once it has, and outside a term nothing is read ahead.
func TestReadAheadEndsWithItsTerm(t *testing.T) {
	in := &blockingInbox{started: make(chan struct{}), returned: make(chan struct{})}
	ra := pump.NewReadAhead(in, slog.New(slog.DiscardHandler))
	if _, err := ra.Raw(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-in.started:
		t.Fatal("a read ahead started outside a term")
	case <-time.After(100 * time.Millisecond):
	}
	end := ra.Term(t.Context())
	if _, err := ra.Raw(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	<-in.started
	end()
	select {
	case <-in.returned:
	default:
		t.Fatal("the term ended before its read ahead returned")
	}
}
