package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/zerowindow"
)

const reflectionInfo = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"

// The probe of issue #57, finding 1, at a bounded size, through the real control binary: many
// connections of a client that grants no HTTP/2 window (SETTINGS_INITIAL_WINDOW_SIZE 0, never a
// WINDOW_UPDATE) ask for the service's descriptors by reflection, ~23 KB each, and never read
// them. Without a token every call is refused. With the reader token the responses the
// server queues are bounded by control.max-queued-bytes (16 MiB by default; the call bound is
// raised here so that the byte bound is what holds), control's RSS stays under 200 MB, and
// every connection is closed once its responses have made no progress for
// control.send-stall-timeout, which gives back the bytes and the slots.
func TestUnreadResponsesStayBounded(t *testing.T) {
	e := newEnv(t)
	// Long enough for every call to be answered before the first connection is closed.
	const stall = 20 * time.Second
	admin := e.startControl(t, "MSGX_CONTROL_MAX_CALLS=100000", "MSGX_CONTROL_SEND_STALL_TIMEOUT="+stall.String())
	pid := e.stack.PID("control")
	atStart := rss(t, pid)
	req, err := proto.Marshal(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "msgx.control.v1.ControlService"},
	})
	if err != nil {
		t.Fatal(err)
	}

	// Without a token: refused in the tap, nothing queued.
	anonymous := probeUnread(t, e.grpcAddr, 20, 20, req)
	t.Logf("20 connections × 20 reflection calls without a token: %v", anonymous)
	if anonymous["Unauthenticated"] != 400 {
		t.Errorf("reflection without a token: %v, want 400 UNAUTHENTICATED", anonymous)
	}
	if q := metric(t, admin, "msgx_control_grpc_queued_response_bytes"); q != 0 {
		t.Errorf("%v bytes queued after calls refused in the tap, want 0", q)
	}

	// With the reader token, 120 connections × 100 calls, none read.
	const conns, perConn = 120, 100
	began := time.Now()
	var (
		mu      sync.Mutex
		tally   = map[string]int{}
		clients []*zerowindow.Conn
	)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			z, err := zerowindow.Dial(t.Context(), e.grpcAddr)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			clients = append(clients, z)
			mu.Unlock()
			for range perConn {
				if _, err := z.Call(reflectionInfo, req, "authorization", "Bearer "+readerToken); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, z := range clients {
			_ = z.Close()
		}
	})
	testwait.ForState(t, 60*time.Second, "every call answered (response headers or status)", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		tally = map[string]int{}
		for _, z := range clients {
			for k, v := range z.Tally() {
				tally[k] += v
			}
		}
		return tally["none"] == 0, fmt.Sprint(tally)
	})
	answeredIn := time.Since(began)
	queued := metric(t, admin, "msgx_control_grpc_queued_response_bytes")
	inFlight := metric(t, admin, "msgx_control_grpc_calls_in_flight")
	during := rss(t, pid)
	t.Logf("%d connections × %d unread reflection calls with the reader token: %v in %s; %.0f bytes queued, %.0f calls in flight; RSS %d MiB at start, %d MiB with the responses queued",
		conns, perConn, tally, answeredIn.Round(time.Millisecond), queued, inFlight, atStart>>20, during>>20)
	if tally["unread"]+tally["ResourceExhausted"] != conns*perConn || tally["ResourceExhausted"] == 0 {
		t.Errorf("outcomes %v, want every call unread or RESOURCE_EXHAUSTED, some refused", tally)
	}
	if queued > 16<<20 || queued == 0 {
		t.Errorf("%.0f bytes queued, want some and at most control.max-queued-bytes (16 MiB)", queued)
	}
	// The refused calls give their slots back as their status is written; the unread ones keep
	// theirs.
	testwait.ForState(t, 10*time.Second, "a slot held by every call whose response waits unread, and no other", func() (bool, string) {
		n := metric(t, admin, "msgx_control_grpc_calls_in_flight")
		return n == float64(tally["unread"]), fmt.Sprintf("%.0f calls in flight, %d unread", n, tally["unread"])
	})
	if during > controlPeak {
		t.Errorf("control RSS %d MiB with the responses unread, want under %d MiB", during>>20, controlPeak>>20)
	}

	// No byte of them leaves: every connection with responses queued is closed at the stall
	// timeout (one whose calls were all refused holds nothing and may stay).
	deadline := time.After(stall + 30*time.Second)
	holding := 0
	for _, z := range clients {
		if z.Tally()["unread"] == 0 {
			continue
		}
		holding++
		select {
		case <-z.Closed():
		case <-deadline:
			t.Fatalf("a connection with its responses stalled was still open %s after the probe began", time.Since(began).Round(time.Second))
		}
	}
	closedIn := time.Since(began)
	testwait.ForState(t, 10*time.Second, "the stalled connections' bytes and slots back", func() (bool, string) {
		q, n := metric(t, admin, "msgx_control_grpc_queued_response_bytes"), metric(t, admin, "msgx_control_grpc_calls_in_flight")
		return q == 0 && n == 0, fmt.Sprintf("%.0f bytes queued, %.0f calls in flight", q, n)
	})
	stalled := metric(t, admin, "msgx_control_grpc_send_stalled_total")
	peak := peakRSS(t, pid)
	t.Logf("every connection holding responses (%d) closed %s after the probe began; %.0f closed at the stall timeout; control peak RSS %d MiB, now %d MiB",
		holding, closedIn.Round(time.Millisecond), stalled, peak>>20, rss(t, pid)>>20)
	if stalled != float64(holding) {
		t.Errorf("%.0f connections counted as stalled, want the %d that had responses queued", stalled, holding)
	}
	if peak > controlPeak {
		t.Errorf("control peak RSS %d MiB, want under %d MiB", peak>>20, controlPeak>>20)
	}
	if _, err := e.status(context.Background()); err != nil {
		t.Errorf("control stopped serving after the probe: %v", err)
	}
}

// probeUnread opens conns connections of a client that grants no window, makes calls
// reflection calls on each without a token, and tallies their answers.
func probeUnread(t *testing.T, addr string, conns, calls int, req []byte) map[string]int {
	t.Helper()
	tally := map[string]int{}
	var clients []*zerowindow.Conn
	defer func() {
		for _, z := range clients {
			_ = z.Close()
		}
	}()
	for range conns {
		z, err := zerowindow.Dial(t.Context(), addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, z)
		for range calls {
			if _, err := z.Call(reflectionInfo, req); err != nil {
				t.Fatal(err)
			}
		}
	}
	testwait.ForState(t, 20*time.Second, "every call without a token answered", func() (bool, string) {
		tally = map[string]int{}
		for _, z := range clients {
			for k, v := range z.Tally() {
				tally[k] += v
			}
		}
		return tally["none"] == 0, fmt.Sprint(tally)
	})
	return tally
}
