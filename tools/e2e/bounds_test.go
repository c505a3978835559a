package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// controlPeak is the bound on control's peak resident memory under the probes below: the
// chart's limit is 256 Mi, and control must stay well under it.
const controlPeak = 200 << 20

// The global bounds of docs/security.md hold against every client together, through the real
// control binary: many connections each with many health Watch streams; many calls without a
// token that declare a 1 MB message and send a little of it; 20 readers of a 16 MB inbox body
// at once. Control's peak resident memory stays under 200 MB over all three.
func TestControlGlobalBoundsHoldMemory(t *testing.T) {
	e := newEnv(t)
	// The longest inbox call allowed: a shared test machine writes and reads a 16 MB row slowly.
	began := time.Now()
	// A read waits up to 10 s for its slot within a call of 15 s: 20 readers of a 16 MB row
	// share the 8 slots of pg.max-conns 10, and MySQL cuts each from the whole row, slowly on a
	// shared test machine.
	admin := e.startControl(t, "MSGX_INBOX_TIMEOUT=8s", "MSGX_CONTROL_CALL_TIMEOUT=15s", "MSGX_CONTROL_POOL_WAIT=10s", "MSGX_CONTROL_MAX_CONNECTIONS=128",
		"MSGX_CONTROL_MAX_ANONYMOUS_CALLS=128", "MSGX_CONTROL_MAX_CALLS=64", "MSGX_CONTROL_MAX_BODY_CHARS=262144")
	if err := e.stack.Start("ingest", nil, "MSGX_INBOX_TIMEOUT=8s"); err != nil {
		t.Fatal(err)
	}
	pid := e.stack.PID("control")
	t.Logf("control RSS at start %d MiB, %s after the test began", rss(t, pid)>>20, time.Since(began).Round(time.Second))

	// Probe 1: 300 connections × 20 health Watch streams, no token.
	const conns, perConn = 300, 20
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	var mu sync.Mutex
	outcome := map[string]int{}
	var wg sync.WaitGroup
	clients := make([]*grpc.ClientConn, 0, conns)
	for range conns {
		c, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		health := healthpb.NewHealthClient(c)
		for range perConn {
			wg.Go(func() {
				s, err := health.Watch(wctx, &healthpb.HealthCheckRequest{})
				if err == nil {
					_, err = s.Recv()
				}
				mu.Lock()
				if err == nil {
					outcome["open"]++
				} else {
					outcome[status.Code(err).String()]++
				}
				mu.Unlock()
				if err == nil {
					<-wctx.Done() // the stream stays open until the probe ends
				}
			})
		}
	}
	testwait.ForState(t, 15*time.Second, "every Watch stream open or refused", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range outcome {
			n += v
		}
		return n >= conns*perConn, fmt.Sprint(outcome)
	})
	during := rss(t, pid)
	openConns := metric(t, admin, "msgx_control_grpc_connections_open")
	anon := metric(t, admin, "msgx_control_grpc_anonymous_calls_in_flight")
	wcancel()
	wg.Wait()
	for _, c := range clients {
		_ = c.Close()
	}
	mu.Lock()
	t.Logf("probe 1, %d connections × %d Watch streams: %v; %v connections open, %v anonymous calls in flight; RSS %d MiB",
		conns, perConn, outcome, openConns, anon, during>>20)
	if outcome["open"] > 128 {
		t.Errorf("%d Watch streams open, over control.max-anonymous-calls (128)", outcome["open"])
	}
	if outcome[codes.ResourceExhausted.String()] == 0 {
		t.Errorf("no Watch stream was refused RESOURCE_EXHAUSTED: %v", outcome)
	}
	mu.Unlock()
	if openConns > 128 || anon > 128 {
		t.Errorf("%v connections and %v anonymous calls during the probe, over their bounds of 128", openConns, anon)
	}

	// Probe 2: 5,000 calls without a token that declare a 1 MB message and send 60 KB of it,
	// over 50 connections: half to the API (refused in the tap, never read), half to the
	// credential-free health check (bounded over all connections).
	testwait.ForState(t, 10*time.Second, "probe 1's connections closed", func() (bool, string) {
		n := metric(t, admin, "msgx_control_grpc_connections_open")
		return n <= 1, fmt.Sprint(n)
	})
	start := time.Now()
	codesSeen := halfSentCalls(t, e.grpcAddr, 50, 100, 1<<20, 60<<10)
	halfRSS := rss(t, pid)
	t.Logf("probe 2, 5000 calls declaring 1 MB and sending 60 KB: %v in %s; RSS %d MiB",
		codesSeen, time.Since(start).Round(time.Millisecond), halfRSS>>20)
	// Every call is refused in the tap (UNAUTHENTICATED, or RESOURCE_EXHAUSTED past its
	// connection's rate or the anonymous bound) but the health checks the bound holds, which
	// wait for the rest of their body.
	if held, refused := codesSeen["none"], codesSeen["Unauthenticated"]+codesSeen["ResourceExhausted"]; held > 128 || held+refused != 5000 {
		t.Errorf("%d calls held and %d refused, want at most 128 held and the rest refused: %v", held, refused, codesSeen)
	}
	if codesSeen["Unauthenticated"] == 0 || codesSeen["ResourceExhausted"] == 0 {
		t.Errorf("want API calls refused UNAUTHENTICATED and calls refused RESOURCE_EXHAUSTED: %v", codesSeen)
	}

	// Probe 3: 20 parallel reader GetMessage calls of a 16 MB inbox body.
	body := "<MSG>" + strings.Repeat("x", 16_000_000) + "</MSG>"
	id := e.my.InsertInbox(t, body, nil)
	conn := e.grpcConn(t)
	client := controlv1.NewControlServiceClient(conn)
	t.Logf("the 16 MB row %d inserted after %s", id, time.Since(began).Round(time.Second))
	testwait.ForState(t, 30*time.Second, "the 16 MB row enqueued", func() (bool, string) {
		ctx, cancel := context.WithTimeout(withToken(context.Background(), readerToken), 10*time.Second)
		defer cancel()
		_, err := client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: id})
		return err == nil, fmt.Sprint(err)
	})
	results := make(chan string, 20)
	for range 20 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(withToken(context.Background(), readerToken), 30*time.Second)
			defer cancel()
			r, err := client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: id})
			switch {
			case status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "reads in flight"):
				results <- "busy"
			case err != nil:
				results <- status.Code(err).String()
			case !r.GetBodyTruncated() || r.GetBodyChars() != int64(len(body)) || len(r.GetRawXml()) != 262144:
				results <- fmt.Sprintf("truncated %v, %d of %d characters", r.GetBodyTruncated(), len(r.GetRawXml()), r.GetBodyChars())
			default:
				results <- "truncated OK"
			}
		})
	}
	wg.Wait()
	close(results)
	readers := map[string]int{}
	for r := range results {
		readers[r]++
	}
	// The whole text, chunk by chunk, as msgxctl get-message-body reads it.
	var whole strings.Builder
	chunks := 0
	for offset := int64(0); ; chunks++ {
		ctx, cancel := context.WithTimeout(withToken(context.Background(), readerToken), 10*time.Second)
		r, err := client.GetMessageBody(ctx, &controlv1.GetMessageBodyRequest{MsgId: id, Offset: offset})
		cancel()
		if err != nil {
			t.Fatalf("GetMessageBody at %d: %v", offset, err)
		}
		if int64(len(r.GetText())) > 262144 {
			t.Fatalf("a chunk of %d characters, over control.max-body-chars", len(r.GetText()))
		}
		whole.WriteString(r.GetText())
		if r.GetEof() {
			break
		}
		offset = r.GetNextOffset()
	}
	peak := peakRSS(t, pid)
	t.Logf("probe 3, 20 parallel GetMessage of a %d-byte body: %v; the whole body in %d GetMessageBody chunks; control peak RSS %d MiB; %s in all",
		len(body), readers, chunks+1, peak>>20, time.Since(began).Round(time.Second))
	// Each call is served truncated, or refused UNAVAILABLE when no read slot came free within
	// the pool wait: never a whole 16 MB body, never an error of another kind.
	if readers["truncated OK"] < 8 || readers["truncated OK"]+readers["busy"] != 20 {
		t.Errorf("GetMessage outcomes %v, want 20 truncated to 262144 characters of %d (or busy), at least 8 served", readers, len(body))
	}
	if whole.String() != body {
		t.Errorf("the chunks make %d bytes, want the %d of the inbox row", whole.Len(), len(body))
	}
	if peak > controlPeak {
		t.Errorf("control peak RSS %d MiB, want under %d MiB", peak>>20, controlPeak>>20)
	}
	if _, err := e.status(context.Background()); err != nil {
		t.Errorf("control stopped serving after the probes: %v", err)
	}
}

// halfSentCalls opens conns HTTP/2 connections and on each starts streams calls, every one
// declaring a message of declare bytes and sending only send of them, without a token: half
// to ControlService/GetStatus, half to Health/Check. It returns the gRPC status each call was
// answered with (by name, "none" for a call still waiting for the rest of its body when the
// probe ends). It speaks the frames itself, since a gRPC client cannot send half a message.
func halfSentCalls(t *testing.T, addr string, conns, streams, declare, send int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			got, err := halfSentOn(addr, streams, declare, send)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				seen["connection: "+err.Error()]++
			}
			for k, v := range got {
				seen[k] += v
			}
		})
	}
	wg.Wait()
	return seen
}

func halfSentOn(addr string, streams, declare, send int) (map[string]int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var wmu sync.Mutex // the framer's writes
	if err := fr.WriteSettings(); err != nil {
		return nil, err
	}

	// The reader keeps the connection's send window, answers settings and pings, and records
	// each stream's grpc-status.
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		window  = 65535
		answers = map[uint32]string{}
		readErr error
	)
	go func() {
		for {
			f, err := fr.ReadFrame()
			mu.Lock()
			if err != nil {
				readErr = err
				cond.Broadcast()
				mu.Unlock()
				return
			}
			switch f := f.(type) {
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					window += int(f.Increment)
					cond.Broadcast()
				}
			case *http2.MetaHeadersFrame:
				if v := f.PseudoValue("status"); v != "" && v != "200" {
					answers[f.StreamID] = "http " + v
				}
				for _, hf := range f.RegularFields() {
					if hf.Name == "grpc-status" {
						answers[f.StreamID] = grpcCodeName(hf.Value)
					}
				}
				cond.Broadcast()
			case *http2.RSTStreamFrame:
				if _, ok := answers[f.StreamID]; !ok {
					answers[f.StreamID] = "reset " + f.ErrCode.String()
				}
				cond.Broadcast()
			case *http2.SettingsFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = fr.WriteSettingsAck()
					wmu.Unlock()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = fr.WritePing(true, f.Data)
					wmu.Unlock()
				}
			}
			mu.Unlock()
		}
	}()

	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	prefix := make([]byte, 5)
	binary.BigEndian.PutUint32(prefix[1:], uint32(declare))
	payload := append(prefix, bytes.Repeat([]byte{0x0a}, send)...)
	for i := range streams {
		id := uint32(2*i + 1)
		method := "/msgx.control.v1.ControlService/GetStatus"
		if i%2 == 1 {
			method = "/grpc.health.v1.Health/Check"
		}
		hbuf.Reset()
		for _, hf := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", addr},
			{"content-type", "application/grpc"}, {"te", "trailers"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: hf[0], Value: hf[1]})
		}
		wmu.Lock()
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true})
		wmu.Unlock()
		if err != nil {
			return nil, err
		}
		for rest := payload; len(rest) > 0; {
			n := min(len(rest), 16384)
			mu.Lock()
			for window < n && readErr == nil {
				cond.Wait()
			}
			if readErr != nil {
				mu.Unlock()
				return tally(answers, streams), readErr
			}
			window -= n
			mu.Unlock()
			wmu.Lock()
			err := fr.WriteData(id, false, rest[:n])
			wmu.Unlock()
			if err != nil {
				return nil, err
			}
			rest = rest[n:]
		}
	}
	// Wait for the answers the server gives at once; the calls it accepted wait for the rest
	// of their body, which never comes.
	deadline := time.Now().Add(5 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	for len(answers) < streams && time.Now().Before(deadline) && readErr == nil {
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
	}
	return tally(answers, streams), nil
}

func tally(answers map[uint32]string, streams int) map[string]int {
	out := map[string]int{}
	for _, a := range answers {
		out[a]++
	}
	if n := streams - len(answers); n > 0 {
		out["none"] += n
	}
	return out
}

// grpcCodeName names a grpc-status header's value as codes.Code does.
func grpcCodeName(v string) string {
	var n uint32
	if _, err := fmt.Sscan(v, &n); err != nil {
		return "grpc-status " + v
	}
	return codes.Code(n).String()
}
