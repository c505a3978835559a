package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/tools/internal/repo"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// TestOneTracePerMessage runs the five services exporting to an in-process OTLP gRPC collector
// and follows inbox rows through them: each row is one trace, started at discovery and
// continued by the pump, the dispatcher (into the Kafka record's traceparent) and the backfill.
//
// The collector forwards every span to a real Jaeger v2 (bin/jaeger, `make jaeger`), and the
// test asks Jaeger's query API the operator's question as well: the traces of msgx-ingest
// tagged with the message's msg_id are exactly one, the stored one, across the services.
func TestOneTracePerMessage(t *testing.T) {
	root := repo.Root(t)
	jaeger, err := stack.StartJaeger(t.Context(), root, nil)
	if err != nil {
		t.Fatalf("%v: make test builds it (the jaeger target); run `make jaeger`", err)
	}
	// Registered first, so it stops after the services and the collector.
	t.Cleanup(jaeger.Stop)
	col := newCollector(t, jaeger.OTLPAddr)
	e := newEnv(t)
	otel := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.addr,
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_BSP_SCHEDULE_DELAY=100",
		// The services name themselves msgx-<role> unless told otherwise.
		"OTEL_SERVICE_NAME=",
	}
	for _, role := range stack.Services {
		if err := e.stack.Start(role, nil, otel...); err != nil {
			t.Fatal(err)
		}
	}
	msgs := scenario("TRACE-1")
	adft, estt, malformed := msgs[0], msgs[1], msgs[3]
	e.insert(t, []*message{adft, estt, malformed})
	for _, m := range []*message{adft, estt, malformed} {
		testwait.ForState(t, 90*time.Second, fmt.Sprintf("the five facts of message %d", m.id), func() (bool, string) {
			f := e.facts(t, m.id)
			return f.inInbox && f.enqueued && f.terminal && f.marked && f.delivered, f.String()
		})
	}

	ctx := context.Background()
	traceOf := func(m *message) string {
		var parent string
		if err := e.pg.Pool.QueryRow(ctx, `SELECT trace_parent FROM proc_state WHERE msg_id = $1`, m.id).Scan(&parent); err != nil {
			t.Fatalf("trace_parent of %d: %v", m.id, err)
		}
		f := strings.Split(parent, "-")
		if len(f) != 4 || len(f[1]) != 32 {
			t.Fatalf("message %d: stored trace_parent %q is not a W3C traceparent", m.id, parent)
		}
		return f[1]
	}
	steps := []string{"msgx-ingest/ingest.discover", "msgx-pump/pump.process", "msgx-backfill/backfill.mark"}
	withKafka := append(slices.Clone(steps), "msgx-dispatcher/dispatcher.send")

	// The ESTT message: a business success whose change goes to Kafka.
	traceID := traceOf(estt)
	spans := col.waitTrace(t, traceID, withKafka)
	checkTree(t, estt.id, spans)
	wantAttrs(t, spans, "msgx-pump/pump.process", map[string]string{
		"msg_id": fmt.Sprint(estt.id), "flid": "TRACE-1", "type": "FLOP", "styp": "ESTT", "state": "SUCCEEDED",
	})
	wantAttrs(t, spans, "msgx-dispatcher/dispatcher.send", map[string]string{"msg_id": fmt.Sprint(estt.id), "flid": "TRACE-1"})
	for _, s := range spans {
		if s.attrs["msg_id"] != fmt.Sprint(estt.id) {
			t.Errorf("span %s of trace %s has msg_id %q, want %d", s.key(), traceID, s.attrs["msg_id"], estt.id)
		}
	}
	// The Kafka record carries the dispatcher span's own context, so a consumer's spans join
	// this trace under the send.
	var eventID int64
	if err := e.pg.Pool.QueryRow(ctx, `SELECT event_id FROM msg_event WHERE msg_id = $1 AND target = 'KAFKA:msg'`, estt.id).Scan(&eventID); err != nil {
		t.Fatalf("the ESTT message's KAFKA:msg event: %v", err)
	}
	rec := e.records.record(eventID)
	var header string
	for _, h := range rec.Headers {
		if h.Key == "traceparent" {
			header = string(h.Value)
		}
	}
	var sendSpans []string
	for _, s := range spans {
		if s.key() == "msgx-dispatcher/dispatcher.send" && s.attrs["event_id"] == fmt.Sprint(eventID) {
			sendSpans = append(sendSpans, "00-"+s.traceID+"-"+s.spanID+"-01")
		}
	}
	if len(sendSpans) == 0 || !slices.Contains(sendSpans, header) {
		t.Errorf("Kafka record of event %d: traceparent %q, want the dispatcher.send span's %v", eventID, header, sendSpans)
	}

	// The malformed message: DEAD at once, with its error class, and still marked.
	deadTrace := traceOf(malformed)
	dead := col.waitTrace(t, deadTrace, steps)
	checkTree(t, malformed.id, dead)
	wantAttrs(t, dead, "msgx-pump/pump.process", map[string]string{
		"msg_id": fmt.Sprint(malformed.id), "state": "DEAD", "error_class": "MALFORMED",
	})

	// The pump's log line about the DEAD message was written inside its span: it names the
	// message's trace, so the line can be joined to the trace in Jaeger.
	wantLogInTrace(t, e.stack.Output("pump"), "message is DEAD and needs an operator", malformed.id, deadTrace)

	// One trace per message, not one per batch or per service.
	if adftTrace := traceOf(adft); adftTrace == traceID || adftTrace == deadTrace || deadTrace == traceID {
		t.Errorf("messages share a trace: ADFT %s, ESTT %s, malformed %s", adftTrace, traceID, deadTrace)
	}
	checkTree(t, adft.id, col.waitTrace(t, traceOf(adft), steps))

	for _, c := range []struct {
		m     *message
		trace string
		want  []string
	}{{estt, traceID, withKafka}, {malformed, deadTrace, steps}, {adft, traceOf(adft), steps}} {
		tags := map[string]string{"msg_id": fmt.Sprint(c.m.id)}
		testwait.ForState(t, 60*time.Second, fmt.Sprintf("Jaeger's one trace of message %d", c.m.id), func() (bool, string) {
			traces, err := jaeger.Traces(ctx, "msgx-ingest", tags)
			if err != nil {
				return false, err.Error()
			}
			if len(traces) != 1 || traces[c.trace] == nil {
				ids := make([]string, 0, len(traces))
				for id := range traces {
					ids = append(ids, id)
				}
				return false, fmt.Sprintf("traces %v, want %s alone", ids, c.trace)
			}
			have := map[string]bool{}
			for _, s := range traces[c.trace] {
				have[s.Service+"/"+s.Operation] = true
			}
			for _, w := range c.want {
				if !have[w] {
					return false, fmt.Sprintf("spans %v, want %v", have, c.want)
				}
			}
			return true, ""
		})
	}
}

// wantLogInTrace finds the JSON log line with the message text and msg_id and checks that it
// carries the trace's trace_id and a span_id.
func wantLogInTrace(t *testing.T, logs, text string, msgID int64, traceID string) {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Msg     string `json:"msg"`
			MsgID   int64  `json:"msg_id"`
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != text || l.MsgID != msgID {
			continue
		}
		if l.TraceID != traceID || len(l.SpanID) != 16 {
			t.Errorf("log line %q of message %d: trace_id %q span_id %q, want trace %s", text, msgID, l.TraceID, l.SpanID, traceID)
		}
		return
	}
	t.Errorf("no log line %q for message %d in:\n%s", text, msgID, logs)
}

// checkTree asserts that the spans form one tree rooted at ingest's discovery span.
func checkTree(t *testing.T, msgID int64, spans []span) {
	t.Helper()
	ids := map[string]span{}
	for _, s := range spans {
		ids[s.spanID] = s
	}
	var roots []string
	for _, s := range spans {
		if s.parentID == "" {
			roots = append(roots, s.key())
			continue
		}
		if _, ok := ids[s.parentID]; !ok {
			t.Errorf("message %d: span %s has parent %s, which is not in the trace", msgID, s.key(), s.parentID)
		}
	}
	if len(roots) != 1 || roots[0] != "msgx-ingest/ingest.discover" {
		t.Errorf("message %d: roots %v, want ingest.discover alone", msgID, roots)
	}
}

func wantAttrs(t *testing.T, spans []span, key string, want map[string]string) {
	t.Helper()
	for _, s := range spans {
		if s.key() != key {
			continue
		}
		ok := true
		for k, v := range want {
			if s.attrs[k] != v {
				ok = false
			}
		}
		if ok {
			return
		}
	}
	var got []map[string]string
	for _, s := range spans {
		if s.key() == key {
			got = append(got, s.attrs)
		}
	}
	t.Errorf("no %s span with attributes %v; got %v", key, want, got)
}

// span is one exported span, flattened.
type span struct {
	service, name             string
	traceID, spanID, parentID string
	attrs                     map[string]string
}

func (s span) key() string { return s.service + "/" + s.name }

// collector is an OTLP gRPC trace receiver on a loopback port.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	addr    string
	forward collectortrace.TraceServiceClient
	mu      sync.Mutex
	spans   []span
}

// newCollector starts the receiver; with a forward address it passes every export on to that
// OTLP gRPC endpoint too (the real Jaeger), failing the export when it does.
func newCollector(t *testing.T, forward string) *collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{addr: ln.Addr().String()}
	if forward != "" {
		conn, err := grpc.NewClient(forward, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		c.forward = collectortrace.NewTraceServiceClient(conn)
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	// Registered before newEnv's cleanup, so it runs after the services stopped and flushed.
	t.Cleanup(func() { srv.Stop(); <-done })
	return c
}

func (c *collector) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	if c.forward != nil {
		if _, err := c.forward.Export(ctx, req); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attrString(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range s.GetAttributes() {
					attrs[kv.GetKey()] = anyString(kv.GetValue())
				}
				c.spans = append(c.spans, span{
					service: service, name: s.GetName(),
					traceID: hex.EncodeToString(s.GetTraceId()), spanID: hex.EncodeToString(s.GetSpanId()),
					parentID: hex.EncodeToString(s.GetParentSpanId()), attrs: attrs,
				})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// waitTrace waits until the trace holds a span of every wanted service/name and returns it.
func (c *collector) waitTrace(t *testing.T, traceID string, want []string) []span {
	t.Helper()
	var got []span
	testwait.ForState(t, 60*time.Second, "the spans "+strings.Join(want, ", ")+" of trace "+traceID, func() (bool, string) {
		c.mu.Lock()
		got = got[:0]
		for _, s := range c.spans {
			if s.traceID == traceID {
				got = append(got, s)
			}
		}
		c.mu.Unlock()
		have := map[string]bool{}
		var names []string
		for _, s := range got {
			have[s.key()] = true
			names = append(names, s.key())
		}
		sort.Strings(names)
		for _, w := range want {
			if !have[w] {
				return false, fmt.Sprintf("spans so far %v", names)
			}
		}
		return true, ""
	})
	return slices.Clone(got)
}

func attrString(kvs []*commonv1.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return anyString(kv.GetValue())
		}
	}
	return ""
}

func anyString(v *commonv1.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_StringValue:
		return x.StringValue
	case *commonv1.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonv1.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonv1.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	default:
		return fmt.Sprint(v)
	}
}
