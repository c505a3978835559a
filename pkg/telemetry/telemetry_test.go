package telemetry

import (
	"context"
	"testing"
)

// TestTraceContextSurvivesInjectAndExtract: the context a span injects, extracted again, is
// that span's, so a stored trace context continues the message's trace.
func TestTraceContextSurvivesInjectAndExtract(t *testing.T) {
	tel, err := New(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	ctx, span := tel.Tracer.Start(t.Context(), "root")
	defer span.End()
	tc := tel.Inject(ctx)
	if tc.Parent == "" {
		t.Fatal("no traceparent injected")
	}
	if again := tel.Inject(tel.Extract(context.Background(), tc)); again != tc {
		t.Errorf("extracted and injected again: %+v, want %+v", again, tc)
	}
	if got := tel.Extract(ctx, TraceContext{}); got != ctx {
		t.Error("an empty trace context changed the context")
	}
}

// TestTraceContextColumnsRoundTrip: an empty header is stored as NULL and NULL reads back as
// empty, so a row written without a trace context reads as none.
func TestTraceContextColumnsRoundTrip(t *testing.T) {
	for _, tc := range []TraceContext{{}, {Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "vendor=x"}} {
		parent, state := tc.Columns()
		if (parent == nil) != (tc.Parent == "") || (state == nil) != (tc.State == "") {
			t.Errorf("%+v stored as %v, %v: want NULL exactly for the empty headers", tc, parent, state)
		}
		got := TraceContext{Parent: "stale", State: "stale"}
		dstParent, dstState := got.ScanColumns()
		for _, c := range []struct {
			dst interface{ Scan(any) error }
			src *string
		}{{dstParent, parent}, {dstState, state}} {
			var src any
			if c.src != nil {
				src = []byte(*c.src) // as a driver hands text over
			}
			if err := c.dst.Scan(src); err != nil {
				t.Fatal(err)
			}
		}
		if got != tc {
			t.Errorf("read back %+v, want %+v", got, tc)
		}
	}
	var got TraceContext
	parent, _ := got.ScanColumns()
	if err := parent.Scan(42); err == nil {
		t.Error("an integer scanned into a trace context column")
	}
}
