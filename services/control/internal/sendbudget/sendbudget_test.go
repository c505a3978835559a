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
	// Both bounds refused a message and nothing was given back since: the tap refuses calls,
	// even of a method whose answers are known to be empty.
	b.learn("/m", 0)
	call := func(x *conn) context.Context { return Track(context.WithValue(t.Context(), connKey{}, x)) }
	actx, cctx := call(a), call(c)
	if err := b.Admit(actx, "/m"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "control.max-queued-bytes-per-connection") {
		t.Errorf("a call on a full connection: %v, want RESOURCE_EXHAUSTED naming the connection's bound", err)
	}
	if err := b.Admit(cctx, "/m"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "control.max-queued-bytes)") {
		t.Errorf("a call with the total full: %v, want RESOURCE_EXHAUSTED naming the total", err)
	}
	// A connection whose calls all ended with nothing queued (refused, say) gives nothing back.
	d := &conn{b: b, open: map[uint32]struct{}{}}
	d.onRead(frameHeaders, 0, 1, 10)
	d.onWrite(frameHeaders, flagEndStream|0x4, 1, 8)
	if err := b.Admit(cctx, "/m"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a call with the total full, after another connection's refused call ended: %v, want RESOURCE_EXHAUSTED", err)
	}
	released := 0
	a.hold(func() { released++ })
	a.onWrite(frameData, 0, 1, 70)
	if released != 0 || b.Queued() != 80 {
		t.Errorf("after 70 bytes of DATA: %d released, %d queued; want 0 and 80", released, b.Queued())
	}
	// Bytes given back: a message may fit again.
	if err := b.Admit(call(a), "/m"); err != nil {
		t.Errorf("a call after progress: %v", err)
	}
	if err := b.Admit(call(c), "/m"); err != nil {
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

// A call reserves at admission what its method's answers take, before its handler builds one:
// calls whose expected answers do not fit are refused in the tap, the send counts only the
// difference, and the expectation follows the answers (issue #57: a burst of unread calls
// built every answer before the first refusal at the send).
func TestAdmissionReservesTheExpectedAnswer(t *testing.T) {
	t.Parallel()
	b, err := New(Limits{PerConnection: 1 << 20, Total: 200 << 10, Stall: time.Hour}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	a := &conn{b: b, open: map[uint32]struct{}{}}
	defer func() {
		a.mu.Lock()
		a.settleLocked()
		a.mu.Unlock()
	}()
	a.onRead(frameHeaders, 0, 1, 10)
	call := func() context.Context { return Track(context.WithValue(t.Context(), connKey{}, a)) }
	const method = "/svc/Big"
	// A method not seen yet: each call reserves unknownAnswer, three fit the 200 KiB total.
	var admitted []context.Context
	for range 4 {
		ctx := call()
		if err := b.Admit(ctx, method); err == nil {
			admitted = append(admitted, ctx)
		} else if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "control.max-queued-bytes)") {
			t.Fatalf("the fourth call of an unknown method: %v, want RESOURCE_EXHAUSTED naming the total", err)
		}
	}
	if len(admitted) != 3 || b.Queued() != 3*unknownAnswer {
		t.Fatalf("%d calls admitted with %d bytes reserved; want 3 and %d", len(admitted), b.Queued(), 3*unknownAnswer)
	}
	// The first answer (20,000 bytes) takes the place of its call's reservation and teaches the
	// method's size; the bytes given back clear the full total.
	if err := b.reserve(admitted[0], 20_000-grpcPrefix); err != nil {
		t.Fatal(err)
	}
	if want := int64(2*unknownAnswer + 20_000); b.Queued() != want {
		t.Fatalf("%d bytes reserved after the first answer, want %d", b.Queued(), want)
	}
	if got := b.expected(method); got != 20_000 {
		t.Fatalf("expected answer %d bytes, want 20000", got)
	}
	// Now a call of it reserves 20,000 bytes: 200 KiB − 2×64 KiB − 20,000 leaves room for two.
	for i, want := range []bool{true, true, false} {
		err := b.Admit(call(), method)
		if (err == nil) != want {
			t.Fatalf("call %d after the size is known: %v, want admitted %v", i, err, want)
		}
	}
	// A larger answer than reserved counts the difference, and a smaller one gives it back.
	r := admitted[1].Value(rpcKey{}).(*reservation)
	if err := b.reserve(admitted[1], 30_000-grpcPrefix); err != nil {
		t.Fatal(err)
	}
	if r.n.Load() != 30_000 {
		t.Errorf("reservation %d after a 30,000-byte answer, want 30000", r.n.Load())
	}
	if got := b.expected(method); got != 30_000 {
		t.Errorf("expected answer %d bytes after a larger one, want 30000 at once", got)
	}
	b.learn(method, 14_000)
	if got := b.expected(method); got != 28_000 {
		t.Errorf("expected answer %d bytes after a smaller one, want 28000 (an eighth of the way down)", got)
	}
	// Unknown method names are not remembered.
	_ = b.Admit(call(), "/made/up")
	if _, ok := b.answers.Load("/made/up"); ok {
		t.Error("a method that never answered was remembered")
	}
}
