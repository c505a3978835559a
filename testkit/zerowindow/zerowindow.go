// Package zerowindow is a gRPC client over raw HTTP/2 that grants the server no flow-control
// window: it announces SETTINGS_INITIAL_WINDOW_SIZE 0 and sends no WINDOW_UPDATE unless told
// to, so every response the server answers with stays queued in the server. It is the client of
// the probes of issue #57 (finding 1): a gRPC library cannot be made to leave its responses
// unread. It records what each call was answered with.
package zerowindow

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// Answer is what the server sent on one stream so far.
type Answer struct {
	// Headers is true once the response headers came (grpc-go sends them before the message,
	// outside flow control).
	Headers bool
	// Status is the grpc-status of the trailers, "" while none came; Reset the error code of
	// an RST_STREAM from the server.
	Status  string
	Reset   string
	Message string
	// Data is the DATA bytes received.
	Data int
}

// Conn is one HTTP/2 connection.
type Conn struct {
	c  net.Conn
	fr *http2.Framer
	// wmu serialises the framer's writes, henc and hbuf the header encoding.
	wmu  sync.Mutex
	hbuf bytes.Buffer
	henc *hpack.Encoder
	next uint32

	mu      sync.Mutex
	answers map[uint32]*Answer
	readErr error
	done    chan struct{}
}

// Dial connects to addr (plaintext), sends the preface and SETTINGS with an initial window of
// zero, and starts reading the server's frames.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("zerowindow: dial %s: %w", addr, err)
	}
	z := &Conn{c: c, fr: http2.NewFramer(c, c), next: 1, answers: map[uint32]*Answer{}, done: make(chan struct{})}
	z.henc = hpack.NewEncoder(&z.hbuf)
	z.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("zerowindow: preface: %w", err)
	}
	if err := z.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("zerowindow: settings: %w", err)
	}
	go z.read()
	return z, nil
}

func (z *Conn) read() {
	defer close(z.done)
	for {
		f, err := z.fr.ReadFrame()
		if err != nil {
			z.mu.Lock()
			z.readErr = err
			z.mu.Unlock()
			return
		}
		z.mu.Lock()
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			a := z.answerLocked(f.StreamID)
			a.Headers = true
			for _, hf := range f.RegularFields() {
				switch hf.Name {
				case "grpc-status":
					a.Status = codeName(hf.Value)
				case "grpc-message":
					a.Message = hf.Value
				}
			}
		case *http2.DataFrame:
			z.answerLocked(f.StreamID).Data += len(f.Data())
		case *http2.RSTStreamFrame:
			z.answerLocked(f.StreamID).Reset = f.ErrCode.String()
		case *http2.SettingsFrame:
			if !f.IsAck() {
				z.write(func() error { return z.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				z.write(func() error { return z.fr.WritePing(true, f.Data) })
			}
		}
		z.mu.Unlock()
	}
}

func (z *Conn) answerLocked(id uint32) *Answer {
	a := z.answers[id]
	if a == nil {
		a = &Answer{}
		z.answers[id] = a
	}
	return a
}

func (z *Conn) write(f func() error) {
	z.wmu.Lock()
	defer z.wmu.Unlock()
	_ = f()
}

// Call starts a unary call of method (a full method name) with the request message req (its
// encoded bytes) and the metadata md (name, value pairs), and returns its stream ID. It does not
// wait for the answer.
func (z *Conn) Call(method string, req []byte, md ...string) (uint32, error) {
	z.wmu.Lock()
	defer z.wmu.Unlock()
	id := z.next
	z.next += 2
	z.hbuf.Reset()
	fields := []string{":method", "POST", ":scheme", "http", ":path", method, ":authority", z.c.RemoteAddr().String(),
		"content-type", "application/grpc", "te", "trailers"}
	fields = append(fields, md...)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := z.henc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]}); err != nil {
			return 0, fmt.Errorf("zerowindow: encode headers: %w", err)
		}
	}
	if err := z.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: z.hbuf.Bytes(), EndHeaders: true}); err != nil {
		return 0, fmt.Errorf("zerowindow: headers: %w", err)
	}
	msg := make([]byte, 5, 5+len(req))
	binary.BigEndian.PutUint32(msg[1:], uint32(len(req)))
	if err := z.fr.WriteData(id, true, append(msg, req...)); err != nil {
		return 0, fmt.Errorf("zerowindow: data: %w", err)
	}
	return id, nil
}

// Grant sends WINDOW_UPDATE of n bytes for the connection and for every stream started: the
// client reads at last.
func (z *Conn) Grant(n uint32) error {
	z.wmu.Lock()
	defer z.wmu.Unlock()
	if err := z.fr.WriteWindowUpdate(0, n); err != nil {
		return fmt.Errorf("zerowindow: window update: %w", err)
	}
	for id := uint32(1); id < z.next; id += 2 {
		if err := z.fr.WriteWindowUpdate(id, n); err != nil {
			return fmt.Errorf("zerowindow: window update: %w", err)
		}
	}
	return nil
}

// Cancel resets the stream id (RST_STREAM CANCEL), as a client that gives up on a call does.
func (z *Conn) Cancel(id uint32) error {
	z.wmu.Lock()
	defer z.wmu.Unlock()
	if err := z.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
		return fmt.Errorf("zerowindow: reset: %w", err)
	}
	return nil
}

// Answers returns a copy of every stream's answer so far.
func (z *Conn) Answers() map[uint32]Answer {
	z.mu.Lock()
	defer z.mu.Unlock()
	out := make(map[uint32]Answer, len(z.answers))
	for id, a := range z.answers {
		out[id] = *a
	}
	return out
}

// Tally counts the calls started by what they were answered with: "unread" for a response
// whose headers came but not its trailers, a code name for trailers, "reset <code>", "none",
// or "closed" for a call without an answer when the connection closed.
func (z *Conn) Tally() map[string]int {
	answers := z.Answers()
	z.wmu.Lock()
	next := z.next
	z.wmu.Unlock()
	none := "none"
	select {
	case <-z.done:
		none = "closed"
	default:
	}
	out := map[string]int{}
	for id := uint32(1); id < next; id += 2 {
		a, ok := answers[id]
		switch {
		case !ok:
			out[none]++
		case a.Status != "":
			out[a.Status]++
		case a.Reset != "":
			out["reset "+a.Reset]++
		case a.Headers:
			out["unread"]++
		default:
			out[none]++
		}
	}
	return out
}

// Closed is closed when the server has closed the connection (or Close was called).
func (z *Conn) Closed() <-chan struct{} { return z.done }

// Close closes the connection and waits for the reader to end.
func (z *Conn) Close() error {
	err := z.c.Close()
	<-z.done
	return err
}

// codeName names a grpc-status value as codes.Code does.
func codeName(v string) string {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return "grpc-status " + v
	}
	return codes.Code(n).String()
}
