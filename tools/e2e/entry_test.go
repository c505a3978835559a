package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/service"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// A Redis password holding a character URL parsers split at (/ # ? @ %) reaches no output of
// pump, control or backfill, whole or in part, set directly or through MSGX_REDIS_URL_FILE; the
// start-up error names the variable.
func TestRedisPasswordPiecesNeverReachTheOutput(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	type run struct{ name, pw string }
	var runs []run
	for i, pw := range []string{"Sec/retPart1x", "Sec#retPart2x", "Sec?retPart3x", "Sec%retPart4x", "12345/retPart5x"} {
		for _, role := range []string{"pump", "control", "backfill"} {
			u := "redis://:" + pw + "@127.0.0.1:6379/0"
			name := fmt.Sprintf("%s-%d-env", role, i)
			if err := e.stack.StartBinary(name, "msgx-"+role, nil, "MSGX_REDIS_URL="+u); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run{name, pw})
			file := filepath.Join(dir, fmt.Sprintf("redis-%s-%d", role, i))
			if err := os.WriteFile(file, []byte(u+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			name = fmt.Sprintf("%s-%d-file", role, i)
			if err := e.stack.StartBinary(name, "msgx-"+role, nil, "MSGX_REDIS_URL=", "MSGX_REDIS_URL_FILE="+file); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run{name, pw})
		}
	}
	// '@' parses (the user info ends at the last '@'): an unparsable database number stops the
	// service there, and its error quotes the path, not the password.
	for _, role := range []string{"pump", "control", "backfill"} {
		name := role + "-at"
		if err := e.stack.StartBinary(name, "msgx-"+role, nil, "MSGX_REDIS_URL=redis://:Sec@retPart6x@127.0.0.1:6379/notadb"); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{name, "Sec@retPart6x"})
	}
	leaks := 0
	for _, r := range runs {
		code, out := e.exited(t, 60*time.Second, r.name)
		if code == 0 {
			t.Errorf("%s exited 0 with a bad Redis URL", r.name)
		}
		pieces := strings.FieldsFunc(r.pw, func(c rune) bool { return strings.ContainsRune("/#?@%", c) })
		for _, p := range append(pieces, r.pw, url.QueryEscape(r.pw), "%re") {
			if strings.Contains(out, p) {
				leaks++
				t.Errorf("%s printed %q of the password %q:\n%s", r.name, p, r.pw, out)
			}
		}
		if !strings.Contains(out, "MSGX_REDIS_URL") {
			t.Errorf("%s's error does not name MSGX_REDIS_URL:\n%s", r.name, out)
		}
	}
	t.Logf("%d runs (pump, control, backfill × 5 passwords × env and _FILE, + '@'): %d leaked a piece of the password", len(runs), leaks)
}

// The probe on /readyz: a flood of anonymous requests from 16 clients for 5 s. Each round
// of the readiness checks (PostgreSQL and MySQL pings) serves its verdict for 1 s and only one
// runs at a time, so the flood costs at most one round a second, and a compat POST meanwhile
// takes about as long as before it.
func TestReadyzFloodChecksOncePerSecond(t *testing.T) {
	e := newEnv(t)
	admin := freePort(t)
	if err := e.stack.Start("ingest", nil, "MSGX_ADMIN_ADDR="+admin); err != nil {
		t.Fatal(err)
	}
	testwait.ForState(t, 30*time.Second, "ingest to be ready", func() (bool, string) {
		res, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status
	})
	post := func(i int) time.Duration {
		xml := traffic.FLOP(int64(i), time.Now(), fmt.Sprintf("E2E-RDY%d", i), "", "REMC", "<REMC>x</REMC>")
		req, _ := http.NewRequest(http.MethodPost, "http://"+e.httpAddr+"/cminmsgs/send", strings.NewReader(xml))
		req.Header.Set("Content-Type", "application/xml")
		req.Header.Set("Authorization", "Bearer "+e.token)
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("compat POST: %v", err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("compat POST: %s", res.Status)
		}
		return time.Since(start)
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	var before []time.Duration
	for i := range 20 {
		before = append(before, post(i))
	}
	rounds0 := metric(t, admin, "msgx_admin_readiness_checks_total")
	const flood = 5 * time.Second
	var requests atomic.Int64
	stop := time.Now().Add(flood)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 5 * time.Second}
	for range 16 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				res, err := client.Get("http://" + admin + "/readyz")
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				requests.Add(1)
			}
		})
	}
	var during []time.Duration
	for i := 100; time.Now().Before(stop.Add(-200 * time.Millisecond)); i++ {
		during = append(during, post(i))
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	rounds := metric(t, admin, "msgx_admin_readiness_checks_total") - rounds0
	t.Logf("%d /readyz requests in %s: %.0f rounds of checks; compat POST median %s before, %s during (%d posts)",
		requests.Load(), flood, rounds, median(before), median(during), len(during))
	if rounds > flood.Seconds()+2 {
		t.Errorf("%.0f rounds of checks in %s, want at most one a second", rounds, flood)
	}
	if requests.Load() < 1000 {
		t.Errorf("only %d requests: the flood did not happen", requests.Load())
	}
}

// The probe on anonymous calls: 500 reflection calls (with the reader token, which reflection
// needs) and 500 calls without a token, over 100 connections (within each connection's
// unauthenticated budget). Neither writes a line per call at INFO: the access log keeps them at
// DEBUG, the refusal summary writes one WARN line per 10 s, and
// msgx_control_grpc_anonymous_calls_total counts them.
func TestAnonymousCallsAreCountedNotLogged(t *testing.T) {
	e := newEnv(t)
	admin := e.startControl(t)
	before := len(e.stack.Output("control"))
	var reflections, refused atomic.Int64
	var wg sync.WaitGroup
	for c := range 100 {
		wg.Go(func() {
			conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for range 10 {
				if c%2 == 0 {
					if listServices(withToken(ctx, readerToken), conn) == nil {
						reflections.Add(1)
					}
					continue
				}
				_, err := controlv1.NewControlServiceClient(conn).GetStatus(ctx, &controlv1.GetStatusRequest{})
				if status.Code(err) == codes.Unauthenticated {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(e.stack.Output("control")[before:], "\n")
	info, warn := 0, 0
	for _, l := range lines {
		switch {
		case strings.Contains(l, `"level":"INFO"`):
			info++
		case strings.Contains(l, `"level":"WARN"`):
			warn++
		}
	}
	count := func(kind string) float64 {
		return labelled(t, admin, "msgx_control_grpc_anonymous_calls_total", `kind="`+kind+`"`)
	}
	t.Logf("%d reflection calls and %d unauthenticated calls: %d INFO and %d WARN lines; counted reflection %.0f, unauthenticated %.0f",
		reflections.Load(), refused.Load(), info, warn, count("reflection"), count("unauthenticated"))
	if reflections.Load() != 500 || refused.Load() != 500 {
		t.Errorf("%d reflection calls answered and %d refused, want 500 and 500", reflections.Load(), refused.Load())
	}
	if info > 0 || warn > 2 {
		t.Errorf("%d INFO and %d WARN lines for anonymous calls, want none and at most one summary per 10 s:\n%s",
			info, warn, strings.Join(lines, "\n"))
	}
	if count("reflection") < 500 || count("unauthenticated") < 500 {
		t.Errorf("the metric counted %.0f reflection and %.0f unauthenticated calls, want 500 each", count("reflection"), count("unauthenticated"))
	}
}

// listServices is one server reflection call (what grpcurl list makes).
func listServices(ctx context.Context, conn *grpc.ClientConn) error {
	stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != io.EOF {
		return fmt.Errorf("reflection stream did not end: %v", err)
	}
	return nil
}

// labelled reads one labelled sample from a service's /metrics, 0 when it is absent.
func labelled(t *testing.T, admin, name, label string) float64 {
	t.Helper()
	res, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+"{"+label+"} "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// The probe on tokens: a token shorter than 32 characters (or, for compat, whitespace
// only) stops control and ingest at start-up with an error naming its variable.
func TestShortTokensAreStartupErrors(t *testing.T) {
	e := newEnv(t)
	short := "0123456789abcdef0123456789abcde" // 31
	cases := []struct{ name, role, env, must string }{
		{"control-short-operator", "control", "MSGX_CONTROL_TOKEN=" + short, "MSGX_CONTROL_TOKEN is 31 characters"},
		{"control-short-reader", "control", "MSGX_CONTROL_READER_TOKEN=reader", "MSGX_CONTROL_READER_TOKEN is 6 characters"},
		{"ingest-short-http", "ingest", "MSGX_HTTP_TOKEN=" + short, "MSGX_HTTP_TOKEN is 31 characters"},
		{"ingest-blank-http", "ingest", "MSGX_HTTP_TOKEN=   ", "MSGX_HTTP_TOKEN is 0 characters"},
	}
	for _, c := range cases {
		if err := e.stack.StartBinary(c.name, "msgx-"+c.role, nil, c.env); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		code, out := e.exited(t, 30*time.Second, c.name)
		if code == 0 || !strings.Contains(out, c.must) {
			t.Errorf("%s: exit %d, want an error with %q:\n%s", c.name, code, c.must, out)
		}
		if strings.Contains(out, short) {
			t.Errorf("%s printed the token:\n%s", c.name, out)
		}
		t.Logf("%s: exit %d, %q", c.name, code, c.must)
	}
}

// The probe on bad settings: refused credentials or an unknown database, in PostgreSQL,
// MySQL and Redis, stop the pump at start-up naming the variable; an unreachable PostgreSQL or
// Redis (a transport failure) keeps it running and retrying. A '#' in a PostgreSQL URL password
// is kept whole: the pump connects with it.
func TestBadSettingsAreStartupErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// A login role whose password holds '#' and '?'.
	role := "msgx_e2e_pw_" + strings.ReplaceAll(strings.ToLower(e.pg.Name), "-", "_")
	const rightPW = "ri#ght?Pw-e2e"
	if _, err := e.pg.Pool.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE msgx_app`, pgx.Identifier{role}.Sanitize(), rightPW)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.pg.Pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
		_, _ = e.pg.Pool.Exec(context.Background(), fmt.Sprintf(`DROP ROLE IF EXISTS %s`, pgx.Identifier{role}.Sanitize()))
	})
	pgURL := func(user, pw, db string) string {
		u, err := url.Parse(e.pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, pw)
		if db != "" {
			u.Path = "/" + db
		}
		return u.String()
	}
	mycfg, err := mysql.ParseDSN(e.my.ServiceDSN)
	if err != nil {
		t.Fatal(err)
	}
	myDSN := func(edit func(*mysql.Config)) string {
		c := mycfg.Clone()
		edit(c)
		return c.FormatDSN()
	}
	redisAddr := startRedisWithPassword(t, "e2e-redis-right")

	// A dependency's refusal exits ExitSettingsRefused (3), a DSN that does not parse 1.
	stopping := []struct {
		name, env, must string
		exit            int
	}{
		// The local server trusts loopback, so it checks no password: an unknown role is its
		// authentication failure (SQLSTATE 28000), as a wrong password (28P01) is elsewhere.
		{"pg-unknown-role", "MSGX_PG_DSN=" + pgURL("msgx_no_such_role", "wrong-pw", ""), "MSGX_PG_DSN", service.ExitSettingsRefused},
		{"pg-unknown-database", "MSGX_PG_DSN=" + pgURL(role, rightPW, "msgx_no_such_db"), "MSGX_PG_DSN", service.ExitSettingsRefused},
		{"mysql-wrong-password", "MSGX_MYSQL_DSN=" + myDSN(func(c *mysql.Config) { c.Passwd = "wrong-pw" }), "MSGX_MYSQL_DSN", service.ExitSettingsRefused},
		{"mysql-unknown-database", "MSGX_MYSQL_DSN=" + myDSN(func(c *mysql.Config) { c.DBName = "msgx_no_such_db" }), "MSGX_MYSQL_DSN", service.ExitSettingsRefused},
		{"mysql-dsn-does-not-parse", "MSGX_MYSQL_DSN=root@tcp(127.0.0.1:3306)", "MSGX_MYSQL_DSN does not parse", 1},
		{"redis-wrongpass", "MSGX_REDIS_URL=redis://:e2e-redis-wrong@" + redisAddr + "/0", "MSGX_REDIS_URL", service.ExitSettingsRefused},
		{"redis-no-password", "MSGX_REDIS_URL=redis://" + redisAddr + "/0", "MSGX_REDIS_URL", service.ExitSettingsRefused},
	}
	running := []struct{ name, env string }{
		{"pg-unreachable", "MSGX_PG_DSN=postgres://msgx:pw@127.0.0.1:1/msgx?connect_timeout=1"},
		{"redis-unreachable", "MSGX_REDIS_URL=redis://127.0.0.1:1/0"},
		{"pg-hash-in-password", "MSGX_PG_DSN=" + pgURL(role, rightPW, "")},
	}
	started := time.Now()
	for _, c := range stopping {
		if err := e.stack.StartBinary(c.name, "msgx-pump", nil, c.env); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range running {
		if err := e.stack.StartBinary(c.name, "msgx-pump", nil, c.env); err != nil {
			t.Fatal(err)
		}
	}
	// Control only reports what Redis holds: a Redis refusing its password leaves those parts
	// unread and control serving (RedisOptional), on an address of its own beside the env's.
	if err := e.stack.StartBinary("control-redis-wrongpass", "msgx-control", nil,
		"MSGX_REDIS_URL=redis://:e2e-redis-wrong@"+redisAddr+"/0", "MSGX_GRPC_ADDR="+freePort(t)); err != nil {
		t.Fatal(err)
	}
	running = append(running, struct{ name, env string }{"control-redis-wrongpass", ""})
	// Operator subjects without mTLS: control refuses them.
	if err := e.stack.StartBinary("control-subjects-without-tls", "msgx-control", nil, "MSGX_CONTROL_OPERATOR_SUBJECTS=CN=ops,O=Airport"); err != nil {
		t.Fatal(err)
	}
	stopping = append(stopping, struct {
		name, env, must string
		exit            int
	}{"control-subjects-without-tls", "", "MSGX_CONTROL_OPERATOR_SUBJECTS", 1})
	for _, c := range stopping {
		code, out := e.exited(t, 30*time.Second, c.name)
		if code != c.exit || !strings.Contains(out, c.must) || strings.Contains(out, "wrong-pw") || strings.Contains(out, "e2e-redis-wrong") {
			t.Errorf("%s: exit %d, want %d and a start-up error naming %s (and no password):\n%s", c.name, code, c.exit, c.must, out)
		}
		t.Logf("%s: exit %d after %s", c.name, code, time.Since(started).Round(10*time.Millisecond))
	}
	time.Sleep(5 * time.Second)
	for _, c := range running {
		if !e.stack.Running(c.name) {
			t.Errorf("%s exited; want it running and retrying:\n%s", c.name, e.stack.Output(c.name))
		}
	}
	testwait.ForState(t, 20*time.Second, "the pump with a '#' in its password to take its role", func() (bool, string) {
		return strings.Contains(e.stack.Output("pg-hash-in-password"), "acquired the role"), "not yet"
	})
	t.Logf("after %s: %d settings refused at start-up, %d transport failures still retrying, '#' password connected",
		time.Since(started).Round(time.Second), len(stopping), len(running)-1)
}

// startRedisWithPassword runs a second redis-server on a free loopback port that requires
// password, and stops it when the test ends.
func startRedisWithPassword(t *testing.T, password string) string {
	t.Helper()
	addr := freePort(t)
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--requirepass", password,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server (installed with the Redis the tests need): %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testwait.ForState(t, 10*time.Second, "the second redis-server", func() (bool, string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false, err.Error()
		}
		_ = c.Close()
		return true, ""
	})
	return addr
}
