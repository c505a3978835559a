package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// JaegerBinary is where `make jaeger` builds Jaeger v2 (tools/jaeger, a module of its own).
func JaegerBinary(root string) string { return filepath.Join(root, "bin", "jaeger") }

// Jaeger is a running Jaeger v2 with in-memory storage (tools/jaeger/config.yaml) on free
// loopback ports.
type Jaeger struct {
	// OTLPAddr takes OTLP gRPC (OTEL_EXPORTER_OTLP_ENDPOINT=http://OTLPAddr).
	OTLPAddr string
	// QueryURL is the UI and its HTTP API, e.g. QueryURL + "/api/traces?service=msgx-ingest".
	QueryURL string
	cmd      *exec.Cmd
	done     chan error
}

// StartJaeger runs root's bin/jaeger, output to logs, and waits until its query API answers.
func StartJaeger(ctx context.Context, root string, logs io.Writer) (*Jaeger, error) {
	bin := JaegerBinary(root)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("jaeger: %w (build it with `make jaeger`)", err)
	}
	var addrs [3]string
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	j := &Jaeger{OTLPAddr: addrs[0], QueryURL: "http://" + addrs[1], done: make(chan error, 1)}
	j.cmd = exec.Command(bin, "--config", filepath.Join(root, "tools", "jaeger", "config.yaml"))
	j.cmd.Env = append(os.Environ(), "MSGX_JAEGER_OTLP_ADDR="+addrs[0], "MSGX_JAEGER_QUERY_ADDR="+addrs[1],
		"MSGX_JAEGER_QUERY_GRPC_ADDR="+addrs[2])
	if logs == nil {
		logs = io.Discard
	}
	j.cmd.Stdout, j.cmd.Stderr = logs, logs
	if err := j.cmd.Start(); err != nil {
		return nil, fmt.Errorf("jaeger: %w", err)
	}
	go func() { j.done <- j.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var s struct{ Data []string }
		if err := j.get(ctx, "/api/services", &s); err == nil {
			return j, nil
		}
		select {
		case err := <-j.done:
			return nil, fmt.Errorf("jaeger exited at start-up: %v", err)
		case <-ctx.Done():
			j.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			j.Stop()
			return nil, errors.New("jaeger: the query API did not answer within 60s")
		}
	}
}

// Stop ends the process.
func (j *Jaeger) Stop() {
	if j.cmd.Process == nil {
		return
	}
	_ = j.cmd.Process.Signal(os.Interrupt)
	select {
	case <-j.done:
	case <-time.After(10 * time.Second):
		_ = j.cmd.Process.Kill()
		<-j.done
	}
}

// TraceSpan is one span of a trace as the query API returns it.
type TraceSpan struct {
	TraceID, SpanID, Service, Operation string
	Tags                                map[string]string
}

// TracesPath is the query API request for the traces of service whose spans carry the tags,
// the one the demo prints.
func TracesPath(service string, tags map[string]string) string {
	t, _ := json.Marshal(tags)
	return "/api/traces?" + url.Values{"service": {service}, "tags": {string(t)}, "lookback": {"1h"}, "limit": {"20"}}.Encode()
}

// Traces asks the query API for the traces of service with spans tagged tags, each trace as
// its spans.
func (j *Jaeger) Traces(ctx context.Context, service string, tags map[string]string) (map[string][]TraceSpan, error) {
	var resp struct {
		Data []struct {
			TraceID string `json:"traceID"`
			Spans   []struct {
				SpanID        string `json:"spanID"`
				OperationName string `json:"operationName"`
				ProcessID     string `json:"processID"`
				Tags          []struct {
					Key   string `json:"key"`
					Value any    `json:"value"`
				} `json:"tags"`
			} `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := j.get(ctx, TracesPath(service, tags), &resp); err != nil {
		return nil, err
	}
	out := map[string][]TraceSpan{}
	for _, tr := range resp.Data {
		for _, s := range tr.Spans {
			tags := map[string]string{}
			for _, kv := range s.Tags {
				tags[kv.Key] = fmt.Sprint(kv.Value)
			}
			out[tr.TraceID] = append(out[tr.TraceID], TraceSpan{TraceID: tr.TraceID, SpanID: s.SpanID,
				Service: tr.Processes[s.ProcessID].ServiceName, Operation: s.OperationName, Tags: tags})
		}
	}
	return out, nil
}

func (j *Jaeger) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("jaeger %s: %s %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
