// Package sendbudget bounds the response bytes the control server holds for clients that do
// not read them (issue #57, finding 1).
//
// grpc-go ends a call's context once its handler has written its status, before the response
// is flushed; the response then waits in the transport until the client grants HTTP/2 window,
// and a client that grants none holds it there. grpc-go bounds neither those bytes nor their
// time, and no public hook tells when a response has left. So the budget watches the frames
// themselves: Credentials wraps each connection after its handshake (above TLS, so it sees the
// plaintext HTTP/2 frames the server writes and reads), and a response's bytes are counted
// from the moment an interceptor reserves them, before grpc-go encodes the message, until the
// DATA frames that carry them are written, the stream is reset, or the connection closes.
//
// The bounds that follow (docs/security.md, "Control API: limits"):
//   - a message is sent only if its bytes fit its connection's budget and the total budget;
//     otherwise the call ends RESOURCE_EXHAUSTED and nothing is queued;
//   - a call admitted by the tap reserves, before its handler builds anything, the size its
//     method's answers have been taking (Admit): when that does not fit, or while a bound has
//     refused a message and no byte has left since, the call is refused there, so answers are
//     never built only to be refused at the send;
//   - a call's slot (the tap's bound) is held until its connection has nothing queued, not
//     given back when its context ends (Hold);
//   - a connection whose queued bytes make no progress for the stall timeout is closed.
package sendbudget

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Limits are the budget's bounds.
type Limits struct {
	// PerConnection bounds the bytes queued on one connection
	// (control.max-queued-bytes-per-connection); it is also the largest message the server
	// sends, since a larger one could never be queued.
	PerConnection int64
	// Total bounds the bytes queued over all connections (control.max-queued-bytes).
	Total int64
	// Stall is how long a connection's queued bytes may make no progress before it is closed
	// (control.send-stall-timeout).
	Stall time.Duration
}

// Hooks are told of the budget's events, for metrics and the log; nil fields are skipped.
type Hooks struct {
	// Refused is called for every message refused at a bound, with which ("connection",
	// "total").
	Refused func(ctx context.Context, bound string)
	// Stalled is called for every connection closed at the stall timeout.
	Stalled func(remote net.Addr)
}

// unknownAnswer is what a call reserves when it is admitted while its method has sent no answer
// yet. It is large enough that a burst of calls of a method not seen before cannot make the
// handlers build much more than the budget before the first answer tells its size (the
// reflection descriptors are ~23 KB, a history page up to control.page-bytes), and small enough
// that the default control.max-calls (64) of them fit the default total (16 MiB) many times.
const unknownAnswer = 64 << 10

// grpcPrefix is the length prefix gRPC writes before each message (gRPC over HTTP/2,
// "Length-Prefixed-Message"): a message of n bytes is n+5 bytes of DATA.
const grpcPrefix = 5

// Budget is the server's send budget. Its zero value is not usable; see New.
type Budget struct {
	limits Limits
	hooks  Hooks
	total  atomic.Int64
	// full is set when a message was refused at the total and cleared when bytes are given
	// back: meanwhile Admit refuses calls before their handlers build a response.
	full atomic.Bool
	// answers holds, per method that has answered, the size a call of it is expected to take
	// (expected): only methods whose handlers answered are keys, so a client's made-up names
	// cannot grow it.
	answers sync.Map
	// handshaken holds each connection from its handshake until its stats TagConn claims it,
	// keyed by its addresses: TagConn is told only those.
	handshaken sync.Map
}

// New returns a budget with the limits.
func New(l Limits, h Hooks) (*Budget, error) {
	if l.PerConnection <= 0 || l.Total <= 0 || l.Stall <= 0 {
		return nil, fmt.Errorf("sendbudget: every limit must be positive, got %+v", l)
	}
	return &Budget{limits: l, hooks: h}, nil
}

// Queued is the bytes queued over all connections.
func (b *Budget) Queued() int64 { return b.total.Load() }

// Credentials wraps inner so every connection the server accepts is watched by the budget.
func (b *Budget) Credentials(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return &watchingCreds{TransportCredentials: inner, b: b}
}

type watchingCreds struct {
	credentials.TransportCredentials
	b *Budget
}

func (c *watchingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	w := c.b.watch(conn)
	c.b.handshaken.Store(w.key, w)
	return w, info, nil
}

func (c *watchingCreds) Clone() credentials.TransportCredentials {
	return &watchingCreds{TransportCredentials: c.TransportCredentials.Clone(), b: c.b}
}

func addrKey(local, remote net.Addr) string {
	if local == nil || remote == nil {
		return ""
	}
	return local.String() + "|" + remote.String()
}

type connKey struct{}
type rpcKey struct{}

// StatsHandler is the stats.Handler that ties each connection's calls to its budget and
// settles each message's reservation against the bytes grpc-go actually encoded (a response
// the client asked to be compressed is smaller than its proto size).
func (b *Budget) StatsHandler() stats.Handler { return statsHandler{b} }

type statsHandler struct{ b *Budget }

func (h statsHandler) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if w, ok := h.b.handshaken.LoadAndDelete(addrKey(info.LocalAddr, info.RemoteAddr)); ok {
		return context.WithValue(ctx, connKey{}, w)
	}
	return ctx
}

func (statsHandler) HandleConn(context.Context, stats.ConnStats) {}

func (statsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return Track(ctx)
}

// Track gives a call's context (its tap's, or its stats TagRPC's) the record of its reserved
// and queued bytes, once: the tap's context, which Hold is given, and the handler's then share
// it.
func Track(ctx context.Context) context.Context {
	if _, ok := ctx.Value(connKey{}).(*conn); !ok {
		return ctx
	}
	if _, ok := ctx.Value(rpcKey{}).(*reservation); ok {
		return ctx
	}
	return context.WithValue(ctx, rpcKey{}, &reservation{})
}

func (statsHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c, _ := ctx.Value(connKey{}).(*conn)
	r, _ := ctx.Value(rpcKey{}).(*reservation)
	if c == nil || r == nil {
		return
	}
	switch s := s.(type) {
	case *stats.OutPayload:
		// The message is queued: its reservation becomes the bytes actually queued.
		r.queued.Store(true)
		c.adjust(int64(s.WireLength) - r.take())
	case *stats.End:
		// A reservation still open at the end was never sent (the stream ended first).
		c.adjust(-r.take())
	}
}

// reservation is the bytes reserved for a call's message that grpc-go has not queued yet: at
// first what Admit expects of the method's answer, then the message's own size. grpc-go sends
// one message of a stream at a time, so there is at most one. queued tells whether the call
// has queued any message at all; method is the call's, whose expected size each message
// teaches.
type reservation struct {
	n      atomic.Int64
	queued atomic.Bool
	method string
}

func (r *reservation) take() int64 { return r.n.Swap(0) }

// Admit reserves for a call of method, on the context Track gave it, the bytes its answer is
// expected to take (expected), and refuses the call (RESOURCE_EXHAUSTED) when they do not fit
// its connection's budget or the total, or while either is known to be full (a message was
// refused at that bound and no byte has been given back since). It is for the tap, before the
// handler runs, so that a client that reads nothing cannot make the handlers build answer
// after answer only to have them refused at the send: each is garbage for the collector, and
// a check at the send alone let a burst of calls build all their answers before the first
// refusal (120 connections × 100 unread reflection calls under a loaded machine: control at
// 367 MiB; 10,544 answers refused at the send: 238 MiB with 32 MiB queued).
func (b *Budget) Admit(ctx context.Context, method string) error {
	c, ok := ctx.Value(connKey{}).(*conn)
	r, _ := ctx.Value(rpcKey{}).(*reservation)
	if !ok || r == nil {
		return nil
	}
	c.mu.Lock()
	full := c.full
	c.mu.Unlock()
	switch {
	case full:
		return b.refuse(ctx, "connection", 0)
	case b.full.Load():
		return b.refuse(ctx, "total", 0)
	}
	n := b.expected(method)
	if bound := c.reserve(n); bound != "" {
		return b.refuse(ctx, bound, 0)
	}
	r.method = method
	r.n.Add(n)
	return nil
}

// expected is the bytes a call of method is expected to answer: unknownAnswer until the method
// has answered once, then the size of its answers, which follows a larger answer at once and
// a smaller one by an eighth of the difference per answer, so a method whose answers vary is
// expected to answer near its large ones.
func (b *Budget) expected(method string) int64 {
	if v, ok := b.answers.Load(method); ok {
		return v.(*atomic.Int64).Load()
	}
	return unknownAnswer
}

// learn teaches method's expected size an answer of n bytes.
func (b *Budget) learn(method string, n int64) {
	if method == "" {
		return
	}
	v, ok := b.answers.Load(method)
	if !ok {
		v, _ = b.answers.LoadOrStore(method, new(atomic.Int64))
	}
	e := v.(*atomic.Int64)
	for {
		old := e.Load()
		if e.CompareAndSwap(old, max(n, old-(old-n)/8)) {
			return
		}
	}
}

func (b *Budget) refuse(ctx context.Context, bound string, n int64) error {
	if b.hooks.Refused != nil {
		b.hooks.Refused(ctx, bound)
	}
	what := "the response"
	if n > 0 {
		what = fmt.Sprintf("the response (%d bytes)", n)
	}
	if bound == "connection" {
		return status.Errorf(codes.ResourceExhausted,
			"%s does not fit this connection's %d bytes of responses not yet read (control.max-queued-bytes-per-connection); read the responses, or ask for a smaller page",
			what, b.limits.PerConnection)
	}
	return status.Errorf(codes.ResourceExhausted,
		"the server holds %d bytes of responses its clients have not read, its bound (control.max-queued-bytes); retry later", b.limits.Total)
}

// reserve counts a message of size bytes against its connection's and the total budget before
// it is sent.
func (b *Budget) reserve(ctx context.Context, size int) error {
	c, _ := ctx.Value(connKey{}).(*conn)
	r, _ := ctx.Value(rpcKey{}).(*reservation)
	if c == nil || r == nil {
		return nil
	}
	n := int64(size) + grpcPrefix
	b.learn(r.method, n)
	// What Admit reserved for the call stands for this message: only the difference is counted
	// (a refused message's reservation is given back at the call's end, stats End).
	if d := n - r.n.Load(); d > 0 {
		if bound := c.reserve(d); bound != "" {
			return b.refuse(ctx, bound, n)
		}
	} else {
		c.adjust(d)
	}
	r.n.Store(n)
	return nil
}

// UnaryInterceptor reserves each unary response before grpc-go sends it.
func (b *Budget) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			return resp, err
		}
		if m, ok := resp.(proto.Message); ok {
			if err := b.reserve(ctx, proto.Size(m)); err != nil {
				return nil, err
			}
		}
		return resp, nil
	}
}

// StreamInterceptor reserves each message a streaming handler sends.
func (b *Budget) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &reservingStream{ServerStream: ss, b: b})
	}
}

type reservingStream struct {
	grpc.ServerStream
	b *Budget
}

func (s *reservingStream) SendMsg(m any) error {
	if pm, ok := m.(proto.Message); ok {
		if err := s.b.reserve(s.Context(), proto.Size(pm)); err != nil {
			return err
		}
	}
	return s.ServerStream.SendMsg(m)
}

// Hold calls release once the call's connection has no response bytes queued (at once when it
// has none, or when the call queued no message: a refusal's status is not flow-controlled) or
// is closed: the tap's slot of a call is thus held until its response has left, not given back
// when grpc-go ends the call's context, which it does before the flush. The connection's bytes
// are not told apart by stream (no public hook of grpc-go names a call's stream), so a call
// waits for the connection's whole queue.
func Hold(ctx context.Context, release func()) {
	c, ok := ctx.Value(connKey{}).(*conn)
	r, _ := ctx.Value(rpcKey{}).(*reservation)
	if !ok || r == nil || !r.queued.Load() {
		release()
		return
	}
	c.hold(release)
}

// HTTP/2 frame types and flags (RFC 9113, section 6) the budget reads.
const (
	frameData      = 0x0
	frameHeaders   = 0x1
	frameRSTStream = 0x3
	flagEndStream  = 0x1
	frameHeaderLen = 9
)

// conn is a server connection watched by the budget.
type conn struct {
	net.Conn
	b   *Budget
	key string
	// in and out parse the frames read and written; each is used by one goroutine of grpc-go's
	// transport (its reader, its writer).
	in, out frames

	mu sync.Mutex
	// queued is the bytes reserved or queued and not yet written as DATA.
	queued int64
	// full is set when a message was refused at the connection's bound, cleared when bytes
	// are given back (Admit).
	full bool
	// open holds the streams the client opened that the server has not ended (trailers or
	// RST_STREAM) nor the client reset; lastOpened is the highest such stream ID.
	open       map[uint32]struct{}
	lastOpened uint32
	held       []func()
	stall      *time.Timer
	closed     bool
}

func (b *Budget) watch(c net.Conn) *conn {
	w := &conn{Conn: c, b: b, key: addrKey(c.LocalAddr(), c.RemoteAddr()), open: map[uint32]struct{}{}}
	// The client's connection preface (RFC 9113, section 3.4) comes before its first frame.
	w.in.skip = 24
	return w
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.feed(p[:n], c.onRead)
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.feed(p[:n], c.onWrite)
	return n, err
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.b.handshaken.CompareAndDelete(c.key, c)
	c.mu.Lock()
	c.closed = true
	release := c.settleLocked()
	c.mu.Unlock()
	runAll(release)
	return err
}

func (c *conn) onRead(typ, flags byte, stream uint32, length int) {
	switch typ {
	case frameHeaders:
		// Client streams have odd IDs that only grow (RFC 9113, section 5.1.1); a HEADERS frame on a
		// known ID is a trailer, which gRPC clients do not send.
		if stream%2 == 1 && stream > c.lastOpened {
			c.mu.Lock()
			c.lastOpened = stream
			c.open[stream] = struct{}{}
			c.mu.Unlock()
		}
	case frameRSTStream:
		c.ended(stream)
	}
}

func (c *conn) onWrite(typ, flags byte, stream uint32, length int) {
	switch {
	case typ == frameData:
		c.sent(int64(length))
		if flags&flagEndStream != 0 {
			c.ended(stream)
		}
	case typ == frameHeaders && flags&flagEndStream != 0, typ == frameRSTStream:
		c.ended(stream)
	}
}

// reserve counts n bytes against the connection and the total, or names the bound they do not
// fit.
func (c *conn) reserve(n int64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queued+n > c.b.limits.PerConnection {
		c.full = true
		return "connection"
	}
	if c.b.total.Add(n) > c.b.limits.Total {
		c.b.total.Add(-n)
		c.b.full.Store(true)
		return "total"
	}
	c.queued += n
	c.armLocked()
	return ""
}

// adjust corrects the queued bytes by d (a message smaller once encoded, a reservation never
// sent).
func (c *conn) adjust(d int64) {
	if d == 0 {
		return
	}
	c.mu.Lock()
	d = max(d, -c.queued)
	c.queued += d
	c.b.total.Add(d)
	if d < 0 {
		c.gaveBackLocked()
	}
	var release []func()
	if c.queued == 0 {
		release = c.settleLocked()
	}
	c.mu.Unlock()
	runAll(release)
}

// sent counts n bytes of DATA written: progress, which restarts the stall timeout.
func (c *conn) sent(n int64) {
	c.mu.Lock()
	n = min(n, c.queued)
	c.queued -= n
	c.b.total.Add(-n)
	if n > 0 {
		c.gaveBackLocked()
	}
	var release []func()
	if c.queued == 0 {
		release = c.settleLocked()
	} else {
		c.armLocked()
	}
	c.mu.Unlock()
	runAll(release)
}

// ended notes a stream ended. With no stream left open nothing can be queued any more: what a
// reset stream had queued was dropped by grpc-go, so the count is settled to zero.
func (c *conn) ended(stream uint32) {
	c.mu.Lock()
	delete(c.open, stream)
	var release []func()
	if len(c.open) == 0 {
		release = c.settleLocked()
	}
	c.mu.Unlock()
	runAll(release)
}

func (c *conn) hold(release func()) {
	c.mu.Lock()
	if c.queued > 0 && !c.closed {
		c.held = append(c.held, release)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	release()
}

// settleLocked empties the connection's count: it gives its bytes back to the total, stops the
// stall timeout and returns the held slots to release (outside the lock).
func (c *conn) settleLocked() []func() {
	if c.queued > 0 {
		c.b.total.Add(-c.queued)
		c.queued = 0
		c.gaveBackLocked()
	}
	if c.stall != nil {
		c.stall.Stop()
	}
	held := c.held
	c.held = nil
	return held
}

// gaveBackLocked notes that bytes were given back: a message may fit again.
func (c *conn) gaveBackLocked() {
	c.full = false
	c.b.full.Store(false)
}

// armLocked (re)starts the stall timeout: queued bytes that make no progress for it close the
// connection.
func (c *conn) armLocked() {
	if c.closed {
		return
	}
	if c.stall == nil {
		c.stall = time.AfterFunc(c.b.limits.Stall, c.stalled)
		return
	}
	c.stall.Reset(c.b.limits.Stall)
}

func (c *conn) stalled() {
	c.mu.Lock()
	stuck := c.queued > 0 && !c.closed
	c.mu.Unlock()
	if !stuck {
		return
	}
	if c.b.hooks.Stalled != nil {
		c.b.hooks.Stalled(c.RemoteAddr())
	}
	// Closing the socket ends grpc-go's transport, which drops what it had queued and ends
	// every call of the connection; Close (ours, through grpc-go) settles the count.
	_ = c.Close()
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// frames parses a byte stream of HTTP/2 frames, possibly split anywhere, far enough to tell
// each frame's header: it holds at most one header, never a payload.
type frames struct {
	skip int // bytes to pass before the first frame (the client preface)
	hdr  [frameHeaderLen]byte
	nhdr int
	rest int // payload bytes of the current frame still to pass
}

func (f *frames) feed(p []byte, each func(typ, flags byte, stream uint32, length int)) {
	for len(p) > 0 {
		switch {
		case f.skip > 0:
			n := min(f.skip, len(p))
			f.skip -= n
			p = p[n:]
		case f.rest > 0:
			n := min(f.rest, len(p))
			f.rest -= n
			p = p[n:]
		default:
			n := copy(f.hdr[f.nhdr:], p)
			f.nhdr += n
			p = p[n:]
			if f.nhdr < frameHeaderLen {
				return
			}
			f.nhdr = 0
			length := int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
			each(f.hdr[3], f.hdr[4], binary.BigEndian.Uint32(f.hdr[5:])&0x7fffffff, length)
			f.rest = length
		}
	}
}
