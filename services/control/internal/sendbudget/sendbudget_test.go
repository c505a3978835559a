package sendbudget

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/testkit/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// frameSettings is the SETTINGS frame type (RFC 9113, section 6.5), which the budget skips.
const frameSettings = 0x4

type seen struct {
	typ, flags byte
	stream     uint32
	length     int
}

// The frames a connection writes arrive in writes split anywhere (grpc-go's buffered writer
// flushes when full): every split gives the same frame headers, and the client preface is
// skipped.
func TestFramesAreParsedHoweverTheBytesAreSplit(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}))
	must(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte("hdr"), EndHeaders: true}))
	must(fr.WriteData(1, false, bytes.Repeat([]byte{7}, 16384)))
	must(fr.WriteData(1, false, []byte{}))
	must(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte("trailers"), EndHeaders: true, EndStream: true}))
	must(fr.WriteRSTStream(3, http2.ErrCodeCancel))
	want := []seen{
		{frameSettings, 0, 0, 6},
		{frameHeaders, 0x4, 1, 3},
		{frameData, 0, 1, 16384},
		{frameData, 0, 1, 0},
		{frameHeaders, 0x5, 1, 8},
		{frameRSTStream, 0, 3, 4},
	}
	stream := buf.Bytes()
	parse := func(chunks [][]byte) []seen {
		f := frames{skip: len(http2.ClientPreface)}
		var got []seen
		for _, c := range chunks {
			f.feed(c, func(typ, flags byte, stream uint32, length int) { got = append(got, seen{typ, flags, stream, length}) })
		}
		return got
	}
	for split := 0; split <= len(stream); split++ {
		if got := parse([][]byte{stream[:split], stream[split:]}); !slices.Equal(got, want) {
			t.Fatalf("split at %d: %v, want %v", split, got, want)
		}
	}
	var bytewise [][]byte
	for i := range stream {
		bytewise = append(bytewise, stream[i:i+1])
	}
	if got := parse(bytewise); !slices.Equal(got, want) {
		t.Errorf("byte by byte: %v, want %v", got, want)
	}
}

// The connection's count: reservations within its bound and the total, DATA written as
// progress, a settled count when no stream is open, the held releases run when the queue
// drains.
func TestConnectionCount(t *testing.T) {
	t.Parallel()
	b, err := New(Limits{PerConnection: 100, Total: 150, Stall: time.Hour}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	a, c := &conn{b: b, open: map[uint32]struct{}{}}, &conn{b: b, open: map[uint32]struct{}{}}
	defer func() {
		for _, x := range []*conn{a, c} {
			x.mu.Lock()
			x.settleLocked()
			x.mu.Unlock()
		}
	}()
	a.onRead(frameHeaders, 0, 1, 10)
	a.onRead(frameHeaders, 0, 3, 10)
	steps := []struct {
		what string
		do   func() string
		want string
	}{
		{"60 on a", func() string { return a.reserve(60) }, ""},
		{"41 more on a: over its 100", func() string { return a.reserve(41) }, "connection"},
		{"40 more on a", func() string { return a.reserve(40) }, ""},
		{"60 on c: over the total 150", func() string { return c.reserve(60) }, "total"},
		{"50 on c", func() string { return c.reserve(50) }, ""},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Fatalf("%s: %q, want %q", s.what, got, s.want)
		}
	}
	if q := b.Queued(); q != 150 {
		t.Fatalf("%d queued in all, want 150", q)
	}
	// Both bounds refused a message and nothing was given back since: the tap refuses calls.
	actx, cctx := context.WithValue(t.Context(), connKey{}, a), context.WithValue(t.Context(), connKey{}, c)
	if err := b.Admit(actx); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "control.max-queued-bytes-per-connection") {
		t.Errorf("a call on a full connection: %v, want RESOURCE_EXHAUSTED naming the connection's bound", err)
	}
	if err := b.Admit(cctx); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "control.max-queued-bytes)") {
		t.Errorf("a call with the total full: %v, want RESOURCE_EXHAUSTED naming the total", err)
	}
	// A connection whose calls all ended with nothing queued (refused, say) gives nothing back.
	d := &conn{b: b, open: map[uint32]struct{}{}}
	d.onRead(frameHeaders, 0, 1, 10)
	d.onWrite(frameHeaders, flagEndStream|0x4, 1, 8)
	if err := b.Admit(cctx); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a call with the total full, after another connection's refused call ended: %v, want RESOURCE_EXHAUSTED", err)
	}
	released := 0
	a.hold(func() { released++ })
	a.onWrite(frameData, 0, 1, 70)
	if released != 0 || b.Queued() != 80 {
		t.Errorf("after 70 bytes of DATA: %d released, %d queued; want 0 and 80", released, b.Queued())
	}
	// Bytes given back: a message may fit again.
	if err := b.Admit(actx); err != nil {
		t.Errorf("a call after progress: %v", err)
	}
	if err := b.Admit(cctx); err != nil {
		t.Errorf("a call on another connection after progress: %v", err)
	}
	// Stream 1 reset by the client, stream 3 ended by its trailers: nothing can be queued any
	// more, whatever the count says.
	a.onRead(frameRSTStream, 0, 1, 4)
	if released != 0 {
		t.Errorf("the hold released with stream 3 still open")
	}
	a.onWrite(frameHeaders, flagEndStream|0x4, 3, 8)
	if released != 1 || b.Queued() != 50 {
		t.Errorf("with no stream open: %d released, %d queued; want 1 and c's 50", released, b.Queued())
	}
	// A hold on a connection with nothing queued releases at once.
	a.hold(func() { released++ })
	if released != 2 {
		t.Errorf("a hold with nothing queued was not released at once")
	}
	// A reservation never sent is given back (the stats End).
	c.adjust(-50)
	if b.Queued() != 0 {
		t.Errorf("%d queued after c's reservation was given back, want 0", b.Queued())
	}
	if _, err := New(Limits{PerConnection: 1, Total: 1}, Hooks{}); err == nil {
		t.Error("a budget without a stall timeout was accepted")
	}
	if a.lastOpened != 3 {
		t.Errorf("last stream opened %d, want 3", a.lastOpened)
	}
}
