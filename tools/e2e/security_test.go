package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// The probes of docs/security.md, each against the real binaries on loopback.

const readerToken = "e2e-reader-token-0123456789abcdef0"

// startControl runs control alone with a reader token, short bounds and a known admin port,
// and waits until it answers; it returns the admin address.
func (e *env) startControl(t *testing.T, extra ...string) string {
	t.Helper()
	admin := freePort(t)
	env := append([]string{
		"MSGX_ADMIN_ADDR=" + admin,
		"MSGX_CONTROL_READER_TOKEN=" + readerToken,
		"MSGX_CONTROL_CALL_TIMEOUT=4s",
		"MSGX_CONTROL_READ_TIMEOUT=2s",
		"MSGX_CONTROL_POOL_WAIT=1s",
		"MSGX_PG_MAX_CONNS=10",
	}, extra...)
	if err := e.stack.Start("control", nil, env...); err != nil {
		t.Fatal(err)
	}
	testwait.ForState(t, 30*time.Second, "control to answer", func() (bool, string) {
		_, err := e.status(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	e.waitControlActive(t)
	return admin
}

// waitControlActive waits for control to hold its role. A standby already answers reads,
// and refuses mutating calls; the tests make them, and count control's log lines, from
// there on, so the role and the line that says so must come first.
func (e *env) waitControlActive(t testing.TB) {
	t.Helper()
	testwait.ForState(t, 30*time.Second, "control to hold its role", func() (bool, string) {
		return strings.Contains(e.stack.Output("control"), "acquired the role"), "not yet"
	})
}

func (e *env) grpcConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func readyz(t *testing.T, admin string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// With proc_state locked by another session, a storm of ListMessages without any client
// deadline neither starves GetStatus nor turns /readyz false: reads end at the statement
// timeout or the pool wait, and two pool connections always stay free of reads.
func TestControlReadStormStaysBounded(t *testing.T) {
	e := newEnv(t)
	admin := e.startControl(t)
	conn := e.grpcConn(t)
	client := controlv1.NewControlServiceClient(conn)

	lockCtx, unlock := context.WithCancel(context.Background())
	locked := make(chan error, 1)
	go func() {
		tx, err := e.pg.Pool.Begin(lockCtx)
		if err != nil {
			locked <- err
			return
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		_, err = tx.Exec(lockCtx, `LOCK TABLE proc_state IN ACCESS EXCLUSIVE MODE`)
		locked <- err
		<-lockCtx.Done()
	}()
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	defer unlock()

	const storm = 20
	var wg sync.WaitGroup
	codesSeen := make(chan codes.Code, storm)
	start := time.Now()
	for range storm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// No client deadline, as the probe: only the server bounds the call.
			_, err := client.ListMessages(withToken(context.Background(), readerToken), &controlv1.ListMessagesRequest{PageSize: 1000})
			codesSeen <- status.Code(err)
		}()
	}
	time.Sleep(300 * time.Millisecond)

	ctx, cancel := context.WithTimeout(withToken(context.Background(), e.token), 15*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err := client.GetStatus(ctx, &controlv1.GetStatusRequest{})
	took := time.Since(t0)
	if c := status.Code(err); c != codes.OK && c != codes.Unavailable && c != codes.DeadlineExceeded {
		t.Errorf("GetStatus during the storm: %v", err)
	}
	if took > 6*time.Second {
		t.Errorf("GetStatus took %s during the storm, want within the 4s call timeout (+ slack)", took)
	}
	t.Logf("GetStatus during the storm: %v after %s", status.Code(err), took.Round(time.Millisecond))
	if code, body := readyz(t, admin); code != http.StatusOK {
		t.Errorf("control /readyz during the storm = %d %q, want 200: the database is reachable", code, body)
	}
	wg.Wait()
	close(codesSeen)
	counts := map[codes.Code]int{}
	for c := range codesSeen {
		counts[c]++
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("the storm took %s to drain, want every call ended by the server's bounds", elapsed)
	}
	if counts[codes.OK] > 0 || counts[codes.Unavailable]+counts[codes.DeadlineExceeded] != storm {
		t.Errorf("storm outcomes %v, want all UNAVAILABLE or DEADLINE_EXCEEDED while the table is locked", counts)
	}
	t.Logf("storm outcomes: %v", counts)
	unlock()
	testwait.ForState(t, 10*time.Second, "ListMessages after the lock", func() (bool, string) {
		_, err := client.ListMessages(withToken(context.Background(), readerToken), &controlv1.ListMessagesRequest{PageSize: 10})
		return err == nil, fmt.Sprint(err)
	})
}

// A reader token reads but may not mutate: PERMISSION_DENIED, and the audit line names the role
// and the caller. The operator token still does everything.
func TestReaderAndOperatorRoles(t *testing.T) {
	e := newEnv(t)
	e.startControl(t)
	client := controlv1.NewControlServiceClient(e.grpcConn(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := client.GetStatus(withToken(ctx, readerToken), &controlv1.GetStatusRequest{}); err != nil {
		t.Errorf("reader GetStatus: %v", err)
	}
	if _, err := client.ListRequests(withToken(ctx, readerToken), &controlv1.ListRequestsRequest{}); err != nil {
		t.Errorf("reader ListRequests: %v", err)
	}
	replay := &controlv1.ReplayRequest{MsgIds: []int64{1}, Comment: "e2e roles", DryRun: true}
	_, err := client.Replay(withToken(ctx, readerToken), replay)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reader Replay: %v, want PERMISSION_DENIED", err)
	}
	if _, err := client.SeedCutover(withToken(ctx, readerToken), &controlv1.SeedCutoverRequest{Mode: controlv1.SeedMode_SEED_MODE_ZERO, Comment: "x"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("reader SeedCutover: %v, want PERMISSION_DENIED", err)
	}
	if _, err := client.Replay(withToken(ctx, e.token), replay); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
		t.Errorf("operator Replay refused: %v", err)
	}
	testwait.ForState(t, 5*time.Second, "the audit line of the refused Replay", func() (bool, string) {
		for _, line := range strings.Split(e.stack.Output("control"), "\n") {
			if strings.Contains(line, `"audit":true`) && strings.Contains(line, `"code":"PermissionDenied"`) &&
				strings.Contains(line, `"role":"reader"`) && strings.Contains(line, `"token":"reader-token"`) {
				return true, ""
			}
		}
		return false, "no audit line with role reader and PermissionDenied"
	})
}

// Thousands of health Watch streams without a token on one connection are refused past the
// limits: the server keeps its goroutines and memory bounded. An 8 MB authorization header is
// refused too, and the server keeps serving.
func TestStreamFloodAndHugeHeaderAreRefused(t *testing.T) {
	e := newEnv(t)
	admin := e.startControl(t)
	pid := e.stack.PID("control")
	before := rss(t, pid)
	conn := e.grpcConn(t)
	health := healthpb.NewHealthClient(conn)

	const flood = 3000
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	var mu sync.Mutex
	outcome := map[string]int{}
	var wg sync.WaitGroup
	for range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				outcome["open"]++
				return
			}
			outcome[status.Code(err).String()]++
		}()
	}
	// Wait until every stream is either open or refused, then measure with the flood live.
	testwait.ForState(t, 8*time.Second, "every stream answered", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range outcome {
			n += v
		}
		return n >= flood-100 || outcome["open"] >= 100, fmt.Sprint(outcome)
	})
	goroutines := metric(t, admin, "go_goroutines")
	during := rss(t, pid)
	cancel()
	wg.Wait()
	t.Logf("flood of %d Watch streams: %v; goroutines %v; RSS %d MiB before, %d MiB during", flood, outcome, goroutines, before>>20, during>>20)
	if outcome["open"] > 100+20 {
		t.Errorf("%d streams open on one connection, want at most the stream limit", outcome["open"])
	}
	if outcome[codes.ResourceExhausted.String()] == 0 {
		t.Errorf("no stream was refused RESOURCE_EXHAUSTED: %v", outcome)
	}
	if goroutines > 600 {
		t.Errorf("%v goroutines during the flood, want bounded by the stream limit", goroutines)
	}
	if during > before+40<<20 {
		t.Errorf("RSS grew from %d MiB to %d MiB during the flood", before>>20, during>>20)
	}

	client := controlv1.NewControlServiceClient(conn)
	huge := strings.Repeat("x", 8<<20)
	hctx, hcancel := context.WithTimeout(withToken(context.Background(), huge), 10*time.Second)
	defer hcancel()
	if _, err := client.GetStatus(hctx, &controlv1.GetStatusRequest{}); err == nil {
		t.Error("an 8 MB authorization header was accepted")
	} else {
		t.Logf("8 MB header: %v", clip(err.Error()))
	}
	if _, err := e.status(context.Background()); err != nil {
		t.Errorf("control stopped serving after the flood: %v", err)
	}
	// Refusals are summarised, not logged once each.
	if n := strings.Count(e.stack.Output("control"), "control API refused a call"); n > 5 {
		t.Errorf("%d refusal lines for one flood, want one per interval", n)
	}
}

// A flood of bodies that can never fit is 413 before they are read; a flood of large bodies
// that fit is served a few at a time (the rest 503 with Retry-After), and ingest's memory stays
// well under the chart's limit (512 Mi).
func TestCompatFloodStaysBounded(t *testing.T) {
	e := newEnv(t)
	// The longest inbox call allowed: a shared test machine writes 8 MiB rows slowly.
	if err := e.stack.Start("ingest", nil, "MSGX_HTTP_MAX_IN_FLIGHT=4", "MSGX_INBOX_TIMEOUT=8s"); err != nil {
		t.Fatal(err)
	}
	post := func(body io.Reader, n int64, expect bool) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+e.httpAddr+"/cminmsgs/send", body)
		req.ContentLength = n
		req.Header.Set("Authorization", "bearer "+e.token) // lower-case scheme, as curl users write it
		req.Header.Set("Content-Type", "application/xml")
		if expect {
			req.Header.Set("Expect", "100-continue")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, res.Header.Get("Retry-After"), nil
	}
	testwait.ForState(t, 30*time.Second, "the compat entry", func() (bool, string) {
		code, _, err := post(strings.NewReader("<MSG/>"), 6, false)
		return code == http.StatusOK, fmt.Sprint(code, err)
	})
	pid := e.stack.PID("ingest")

	const parallel = 20
	var wg sync.WaitGroup
	results := make(chan string, parallel)
	huge := int64(31 << 20)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, err := post(io.LimitReader(zeros{}, huge), huge, true)
			results <- fmt.Sprint(code, err)
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r != "413 <nil>" {
			t.Errorf("31 MB body: %s, want 413", r)
		}
	}

	body := append(append([]byte("<MSG>"), bytes.Repeat([]byte("x"), 8<<20)...), "</MSG>"...)
	results = make(chan string, parallel)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, retry, err := post(bytes.NewReader(body), int64(len(body)), false)
			switch {
			case err != nil:
				results <- err.Error()
			case code == http.StatusServiceUnavailable && retry == "":
				results <- "503 without Retry-After"
			default:
				results <- strconv.Itoa(code)
			}
		}()
	}
	wg.Wait()
	close(results)
	counts := map[string]int{}
	for r := range results {
		counts[r]++
	}
	peak := peakRSS(t, pid)
	t.Logf("20 parallel 8 MiB bodies: %v; ingest peak RSS %d MiB", counts, peak>>20)
	if counts["200"] == 0 || counts["200"]+counts["503"] != parallel {
		t.Errorf("outcomes %v, want only 200 and 503 with Retry-After, at least one 200", counts)
	}
	// In flight at most 4 × (body + text + driver buffer) ≈ 100 MiB for 8 MiB bodies.
	if peak > 300<<20 {
		t.Errorf("ingest peak RSS %d MiB, want under 300 MiB", peak>>20)
	}
}

// TestCompatEscapedBodyIsNeverRetryable reproduces the probe of a body the driver's escaping
// would double: 16,711,680 bytes (http.max-body) of `\` inside <MSG>. The body is a bound
// parameter of a prepared statement, so it goes to the inbox as it is: stored, or 413 when the
// inbox cannot take it, never the 503 a sender retries for ever. 4 of them in parallel and a
// repeated flood keep ingest's peak RSS (VmHWM) under the bound docs/security.md gives.
func TestCompatEscapedBodyIsNeverRetryable(t *testing.T) {
	e := newEnv(t)
	if err := e.stack.Start("ingest", nil, "MSGX_HTTP_MAX_IN_FLIGHT=4", "MSGX_INBOX_TIMEOUT=8s"); err != nil {
		t.Fatal(err)
	}
	post := func(body []byte) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+e.httpAddr+"/cminmsgs/send", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.token)
		req.Header.Set("Content-Type", "application/xml")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, strings.TrimSpace(string(b)), nil
	}
	testwait.ForState(t, 30*time.Second, "the compat entry", func() (bool, string) {
		code, msg, err := post([]byte("<MSG/>"))
		return code == http.StatusOK, fmt.Sprint(code, msg, err)
	})
	pid := e.stack.PID("ingest")
	const maxBody = 16711680 // http.max-body's default
	body := func(n int) []byte {
		return append(append([]byte("<MSG>"), bytes.Repeat([]byte(`\`), n-len("<MSG></MSG>"))...), "</MSG>"...)
	}
	stored := func() int {
		var n int
		if err := e.my.Admin.QueryRowContext(t.Context(), `SELECT count(*) FROM cminmsgs WHERE length(CMINMSGS_CLOB_MSG) > 1000000`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	one := body(maxBody)
	code, msg, err := post(one)
	if err != nil || code != http.StatusOK {
		t.Fatalf("one %d-byte `\\` body: %d %s %v, want 200 (stored as it is)", len(one), code, msg, err)
	}
	var got int
	if err := e.my.Admin.QueryRowContext(t.Context(), `SELECT length(CMINMSGS_CLOB_MSG) FROM cminmsgs ORDER BY CMINMSGS_ID DESC LIMIT 1`).Scan(&got); err != nil || got != len(one) {
		t.Fatalf("the stored row has %d bytes (%v), want %d", got, err, len(one))
	}
	afterOne := peakRSS(t, pid)

	// flood sends n bodies from n clients at once, each retrying a 503 after its Retry-After
	// as a sender would, until every one has its final answer.
	flood := func(n int) map[string]int {
		var mu sync.Mutex
		counts := map[string]int{}
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					code, msg, err := post(one)
					if err == nil && code == http.StatusServiceUnavailable && strings.Contains(msg, "in flight") {
						mu.Lock()
						counts["503 busy, retried"]++
						mu.Unlock()
						time.Sleep(time.Second)
						continue
					}
					mu.Lock()
					counts[fmt.Sprint(code, " ", err)]++
					mu.Unlock()
					if code != http.StatusOK && code != http.StatusRequestEntityTooLarge {
						t.Errorf("a %d-byte `\\` body: %d %s %v, want 200 or 413", len(one), code, msg, err)
					}
					return
				}
			}()
		}
		wg.Wait()
		return counts
	}
	parallel := flood(4)
	afterParallel := peakRSS(t, pid)
	var repeated []map[string]int
	for range 2 {
		repeated = append(repeated, flood(8))
	}
	peak := peakRSS(t, pid)
	t.Logf("one %d-byte body: peak RSS %d MiB; 4 in parallel %v: %d MiB; 2 floods of 8 %v: %d MiB; %d large rows stored",
		len(one), afterOne>>20, parallel, afterParallel>>20, repeated, peak>>20, stored())
	if n := stored(); n != 1+4+2*8 {
		t.Errorf("%d large rows stored, want %d", n, 1+4+2*8)
	}
	// docs/security.md: in flight at most 4 × 4 × the body (256 MiB) and the runtime's own.
	if peak > 300<<20 {
		t.Errorf("ingest peak RSS %d MiB, want under 300 MiB", peak>>20)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// A password in a connection string that does not parse never reaches the output, and a
// missing connection string stops the service naming the variable.
func TestSecretsNeverReachTheOutput(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		role, secret, must string
		env                []string
	}{
		{"pump", "S3cretRD", "MSGX_REDIS_URL", []string{"MSGX_REDIS_URL=redis://:S3cretRD@127.0.0.1:notaport/0"}},
		{"control", "PgS3cretX", "MSGX_PG_DSN", []string{"MSGX_PG_DSN=postgres://msgx:PgS3cretX@127.0.0.1:notaport/msgx"}},
		{"backfill", "", "MSGX_PG_DSN", []string{"MSGX_PG_DSN="}},
		{"dispatcher", "", "MSGX_MYSQL_DSN", []string{"MSGX_MYSQL_DSN="}},
	}
	for _, c := range cases {
		if err := e.stack.Start(c.role, nil, c.env...); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		code, out := e.exited(t, 20*time.Second, c.role)
		if code == 0 {
			t.Errorf("%s exited 0 with a bad connection string", c.role)
		}
		if c.secret != "" && strings.Contains(out, c.secret) {
			t.Errorf("%s printed the password:\n%s", c.role, out)
		}
		if !strings.Contains(out, c.must) {
			t.Errorf("%s's error does not name %s:\n%s", c.role, c.must, out)
		}
	}
}

// runtimeRole creates a login role that is a member of msgx_app (the DML-only runtime role
// the migration grants) and returns a DSN for it on db.
func runtimeRole(t *testing.T, db *pgtest.DB) string {
	t.Helper()
	name := "msgx_e2e_" + strings.ReplaceAll(strings.ToLower(db.Name), "-", "_")
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'e2e-pw' IN ROLE msgx_app`, pgx.Identifier{name}.Sanitize())); err != nil {
		t.Fatalf("create the runtime login role: %v", err)
	}
	t.Cleanup(func() {
		_, _ = db.Pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, name)
		_, _ = db.Pool.Exec(context.Background(), fmt.Sprintf(`DROP ROLE IF EXISTS %s`, pgx.Identifier{name}.Sanitize()))
	})
	u, err := url.Parse(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, "e2e-pw")
	return u.String()
}

// The five services run the pipeline as the DML-only runtime role, and that role can create,
// drop or truncate nothing.
func TestServicesRunAsTheDMLOnlyRole(t *testing.T) {
	e := newEnv(t)
	dsn := runtimeRole(t, e.pg)
	for _, r := range []string{"ingest", "pump", "dispatcher", "backfill", "control"} {
		if err := e.stack.Start(r, nil, "MSGX_PG_DSN="+dsn); err != nil {
			t.Fatal(err)
		}
	}
	msgs := scenario("E2E-DML")
	e.insert(t, msgs)
	for _, m := range msgs {
		testwait.ForState(t, 60*time.Second, fmt.Sprintf("the five facts of %d", m.id), func() (bool, string) {
			f := e.facts(t, m.id)
			return f.terminal && f.marked && f.delivered && f.state == m.want, f.String()
		})
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, ddl := range []string{
		`CREATE TABLE msgx_evil (i int)`,
		`DROP TABLE proc_state`,
		`ALTER TABLE proc_state ADD COLUMN evil int`,
		`TRUNCATE msg_event`,
		`DELETE FROM goose_db_version`,
	} {
		_, err := conn.Exec(context.Background(), ddl)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "42501" && pe.Code != "42P17") {
			t.Errorf("%s as the runtime role: %v, want insufficient_privilege (42501)", ddl, err)
		}
	}
	if out := e.stack.Output("pump"); strings.Contains(out, "permission denied") {
		t.Errorf("the pump hit a missing grant:\n%s", out)
	}
}

// rss is a process's current resident set, in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := readRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readRSS is a process's resident set in bytes, from /proc.
func readRSS(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// metric reads one unlabelled gauge from a service's /metrics.
func metric(t *testing.T, admin, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}
