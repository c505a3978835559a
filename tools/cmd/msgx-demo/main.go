// Command msgx-demo runs the whole system locally: it prepares a fresh PostgreSQL database, a
// fresh inbox database on MariaDB/MySQL, a Redis prefix and the two topics on the Kafka at
// MSGX_KAFKA_BROKERS (default the local broker of `make deps`, 127.0.0.1:9092), migrates, starts
// the five services, loads a generated day of SIS traffic into cminmsgs — the day's schedule
// snapshot (SCHD DNLD) first, then one schedule request to AODB and its answer, then the day's
// updates — shows progress while it drains, prints a summary with the reason of every SKIPPED
// and DEAD row, reads both topics back and checks every record against the event contract,
// stops everything it started, drops the databases, the inbox account, the Redis
// keys and the topics it made (named for this run; -keep keeps them) and ends with one verdict
// line: PASS, or FAIL with the rows that ended otherwise than the traffic generator expects or
// the records that break the event contract (exit 1).
//
// With -serve DIR (`make run`) it leaves the five services running on the run's data after the
// checks, each on admin and HTTP ports of its own, prints msgxctl's environment, the inbox's
// credentials and a few commands to look around, and writes the environment to DIR/env; it
// stops and cleans up as above on SIGTERM or SIGINT (`make stop`).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/msgexchange/msgexchange/migrations"
	"github.com/msgexchange/msgexchange/pkg/buildinfo"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/ports"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

func main() {
	if err := run(); err != nil {
		var rows *errRows
		if !errors.As(err, &rows) {
			fmt.Fprintln(os.Stderr, "demo failed:", err)
		}
		fmt.Println("FAIL: " + firstLine(err.Error()))
		os.Exit(1)
	}
	fmt.Println("PASS")
}

// errRows is the verdict of a run whose rows did not all end as the generator expects.
type errRows struct{ rows []string }

func (e *errRows) Error() string {
	return fmt.Sprintf("%d rows ended otherwise than the generator expects: %s", len(e.rows), strings.Join(e.rows, "; "))
}

type options struct {
	bin      string
	flights  int
	seed     int64
	timeout  time.Duration
	verbose  bool
	keep     bool
	breakRow bool
	pgAdmin  string
	myAdmin  string
	redisURL string
	brokers  []string
	serve    string
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func run() error {
	if buildinfo.PrintVersion("msgx-demo", os.Args[1:], os.Stdout) {
		return nil
	}
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory with the built binaries")
	flag.IntVar(&o.flights, "flights", 300, "flights in the generated day")
	flag.Int64Var(&o.seed, "seed", 1, "traffic generator seed")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up when the inbox has not drained by then")
	flag.BoolVar(&o.verbose, "v", false, "show the services' logs")
	flag.BoolVar(&o.keep, "keep", false, "keep this run's databases, inbox account, Redis keys and topics (their names are printed)")
	flag.BoolVar(&o.breakRow, "break-row", false, "truncate one message the generator expects to succeed, so the run must FAIL (the demo's own test)")
	flag.StringVar(&o.serve, "serve", "", "after the checks, leave the services running on this run's data until SIGTERM or SIGINT, and write msgxctl's environment and the services' log into this directory (make run)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "msgx-demo: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	o.pgAdmin = env("MSGX_TEST_PG_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	o.myAdmin = env("MSGX_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/")
	o.redisURL = env("MSGX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	o.brokers = strings.Split(env("MSGX_KAFKA_BROKERS", kafkatest.DefaultBrokers), ",")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}

	// Names of this run's own, so that two runs (or a run and a kept one) never share state.
	runID := strconv.FormatInt(time.Now().Unix(), 36) + "_" + strconv.Itoa(os.Getpid())
	// The topics' names mix no '_' with their '.': Kafka's metric names map both to one
	// character, and the broker warns of topics that could collide.
	topicBase := "msgx-demo-" + strings.ReplaceAll(runID, "_", "-")
	names := runNames{pg: "msgx_demo_" + runID, inbox: "msgx_demo_" + runID + "_inbox", account: "msgx_demo_" + runID,
		prefix: "msgx-demo:" + runID + ":", topicMsg: topicBase + ".flight.msg", topicSchd: topicBase + ".flight.schd"}
	step(fmt.Sprintf("preparing fresh databases: PostgreSQL %s, inbox %s (account %s), Redis prefix %s, topics %s and %s on %s",
		names.pg, names.inbox, names.account, names.prefix, names.topicMsg, names.topicSchd, strings.Join(o.brokers, ",")))
	kafka, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...))
	if err != nil {
		return fmt.Errorf("kafka (MSGX_KAFKA_BROKERS): %w", err)
	}
	admin := kadm.NewClient(kafka)
	defer admin.Close()
	defer func() {
		if o.keep {
			step(fmt.Sprintf("kept (-keep): PostgreSQL database %s, inbox database %s and account %s, Redis keys %s*, topics %s and %s",
				names.pg, names.inbox, names.account, names.prefix, names.topicMsg, names.topicSchd))
			return
		}
		if err := dropRun(o, admin, names); err != nil {
			fmt.Fprintln(os.Stderr, "demo: dropping this run's databases and topics:", err)
		} else {
			step("dropped this run's databases, inbox account, Redis keys and topics (-keep keeps them)")
		}
	}()
	if err := createTopics(ctx, admin, names); err != nil {
		return err
	}
	pgDSN, err := freshPG(ctx, o.pgAdmin, names.pg)
	if err != nil {
		return err
	}
	inboxDSN, inboxDB, err := freshInbox(ctx, o.myAdmin, names.inbox, names.account)
	if err != nil {
		return err
	}
	defer inboxDB.Close()
	prefix := names.prefix

	var logs io.Writer = io.Discard
	if o.serve != "" {
		// A served stack runs for hours: its log goes to a file the operator can tail, not
		// into the demo's own output.
		f, err := os.Create(filepath.Join(o.serve, "services.log"))
		if err != nil {
			return fmt.Errorf("-serve: %w", err)
		}
		defer f.Close()
		logs = f
	}
	if o.verbose {
		logs = io.MultiWriter(logs, os.Stdout)
	}
	grpcPort, err := ports.Free()
	if err != nil {
		return err
	}
	grpcAddr := "127.0.0.1:" + strconv.Itoa(grpcPort)
	serviceEnv := []string{
		"MSGX_PG_DSN=" + pgDSN,
		"MSGX_MYSQL_DSN=" + inboxDSN,
		"MSGX_REDIS_URL=" + o.redisURL,
		"MSGX_REDIS_PREFIX=" + prefix,
		"MSGX_KAFKA_BROKERS=" + strings.Join(o.brokers, ","),
		"MSGX_KAFKA_TOPIC_MSG=" + names.topicMsg,
		"MSGX_KAFKA_TOPIC_SCHD=" + names.topicSchd,
		// The run's own: a dispatcher of another run on the same broker never fences it.
		"MSGX_KAFKA_TRANSACTIONAL_ID=" + topicBase,
		"MSGX_ADMIN_ADDR=127.0.0.1:0",
		"MSGX_HTTP_ADDR=127.0.0.1:0",
		"MSGX_GRPC_ADDR=" + grpcAddr,
		"MSGX_CONTROL_TOKEN=" + demoToken,
		"MSGX_PIPELINE_POLL_INTERVAL=200ms",
		"MSGX_PIPELINE_BACKFILL_PERIOD=1s",
		"MSGX_SCHD_FLUSH_PERIOD=500ms",
	}
	// A real Jaeger v2 when `make jaeger` has built one: the services export their spans to it,
	// and the summary says how to find a message's trace.
	var jaeger *stack.Jaeger
	if root, err := stack.Root(); err == nil {
		if _, err := os.Stat(stack.JaegerBinary(root)); err == nil {
			step("starting Jaeger v2 (" + stack.JaegerBinary(root) + ")")
			if jaeger, err = stack.StartJaeger(ctx, root, logs); err != nil {
				return err
			}
			defer jaeger.Stop()
			serviceEnv = append(serviceEnv, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+jaeger.OTLPAddr,
				"OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_BSP_SCHEDULE_DELAY=200")
		}
	}
	st := stack.New(bin, serviceEnv, logs)
	defer st.StopAll(15 * time.Second)

	step("migrating the PostgreSQL schema")
	if out, err := runOnce(ctx, filepath.Join(bin, "msgx-control"), serviceEnv, "migrate"); err != nil {
		return fmt.Errorf("migrate: %w\n%s", err, out)
	}
	step("starting " + strings.Join(stack.Services, ", "))
	// Each service on admin and HTTP ports of its own: the registry's defaults (admin.addr
	// 127.0.0.1:9090, http.addr 127.0.0.1:8080) are one instance's, and five collide.
	admins := map[string]string{}
	for _, s := range stack.Services {
		adminPort, err := ports.Free()
		if err != nil {
			return err
		}
		httpPort, err := ports.Free()
		if err != nil {
			return err
		}
		admins[s] = "127.0.0.1:" + strconv.Itoa(adminPort)
		if err := st.Start(s, nil, "MSGX_ADMIN_ADDR="+admins[s], "MSGX_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(httpPort)); err != nil {
			return err
		}
	}

	dayOpts := traffic.Options{Flights: o.flights, Seed: o.seed, Snapshot: true}
	msgs := traffic.Day(dayOpts)
	if o.breakRow {
		breakOne(msgs)
	}
	step(fmt.Sprintf("loading a generated day of SIS traffic: %d messages for %d flights", len(msgs), o.flights))
	start := time.Now()
	insert := func(text string) (int64, error) {
		res, err := inboxDB.ExecContext(ctx, `INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
			VALUES (?, ?, 'VALID')`, text, time.Now())
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	ids := make([]int64, len(msgs))
	// The day's snapshot first; then the request round trip, so that AODB's answer confirms
	// the snapshot before the day's updates arrive.
	if ids[0], err = insert(msgs[0].XML); err != nil {
		return fmt.Errorf("insert the snapshot: %w", err)
	}
	answer, err := requestRoundTrip(ctx, grpcAddr, demoToken, dayOpts, insert)
	if err != nil {
		return err
	}
	for i := 1; i < len(msgs); i++ {
		if ids[i], err = insert(msgs[i].XML); err != nil {
			return fmt.Errorf("insert message %d: %w", i, err)
		}
	}
	msgs = append(msgs, traffic.Message{Kind: "answer", TYPE: "SCHD", STYP: "RESP", Want: traffic.Succeeded})
	ids = append(ids, answer)

	pool, err := pgxpool.New(ctx, pgDSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	deadline := time.Now().Add(o.timeout)
	var p progress
	var shown time.Time
	for {
		if p, err = readProgress(ctx, pool, inboxDB); err != nil {
			return err
		}
		done := p.inbox == int64(len(ids)) && p.terminal == p.inbox && p.marked == p.inbox && p.pending == 0
		if done || time.Since(shown) >= 2*time.Second {
			fmt.Printf("  %6.1fs  inbox %d · enqueued %d · terminal %d · marked %d · events sent %d, pending %d\n",
				time.Since(start).Seconds(), p.inbox, p.enqueued, p.terminal, p.marked, p.sent, p.pending)
			shown = time.Now()
		}
		if done {
			break
		}
		for _, s := range stack.Services {
			if !st.Running(s) {
				return fmt.Errorf("%s exited; run with -v to see its log", s)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained after %s", o.timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	differ, err := summary(ctx, pool, msgs, ids, p, elapsed)
	if err != nil {
		return err
	}
	read, broken, first, err := checkRecords(ctx, o.brokers, names, p.sent)
	if err != nil {
		return err
	}
	fmt.Printf("Kafka records read back (read_committed) %d, breaking the event contract %d\n", read, broken)
	for _, l := range first {
		fmt.Println("  " + l)
	}
	if jaeger != nil && len(ids) > 0 {
		traces(ctx, jaeger, ids[len(ids)/2])
	}
	var verdict error
	if len(differ) > 0 {
		verdict = &errRows{rows: differ}
	} else if broken > 0 {
		verdict = fmt.Errorf("%d Kafka records break the event contract: %s", broken, first[0])
	}
	if o.serve != "" {
		// A run that failed its checks is served too: looking around is how one finds out why.
		if verdict != nil {
			step("the checks failed (" + firstLine(verdict.Error()) + "); serving anyway")
		} else {
			step("the checks passed (the verdict line follows the stop)")
		}
		if err := serve(ctx, o.serve, served{grpc: grpcAddr, admins: admins, pgDSN: pgDSN, inboxDSN: inboxDSN, names: names,
			bin: bin, sample: ids[len(ids)/2]}); err != nil {
			return err
		}
	}
	return verdict
}

// served is what a served run tells the operator.
type served struct {
	grpc, pgDSN, inboxDSN, bin string
	admins                     map[string]string
	names                      runNames
	sample                     int64
}

// serve prints how to reach the running stack, writes msgxctl's environment to dir/env (for
// `. .cache/run/env` and the test) and waits for SIGTERM or SIGINT.
func serve(ctx context.Context, dir string, s served) error {
	// msgxctl's own variables (services/control/internal/ctl: EnvAddr, EnvToken); the serve
	// test runs msgxctl with exactly this line.
	envLine := "export MSGXCTL_ADDR=" + s.grpc + " MSGXCTL_TOKEN=" + demoToken
	ctlBin := filepath.Join(s.bin, "msgxctl")
	var b strings.Builder
	fmt.Fprintf(&b, "==> serving: the five services run on this run's data until `make stop` (SIGTERM to pid %d)\n", os.Getpid())
	fmt.Fprintf(&b, "msgxctl environment (also in %s):\n  %s\n", filepath.Join(dir, "env"), envLine)
	b.WriteString("look around:\n")
	for _, c := range []string{"get-status", "list-messages --state dead --all", fmt.Sprintf("get-message %d", s.sample),
		"list-requests", "get-status --watch"} {
		fmt.Fprintf(&b, "  %s %s\n", ctlBin, c)
	}
	b.WriteString("admin endpoints (/metrics, /healthz, /readyz):\n")
	for _, svc := range stack.Services {
		fmt.Fprintf(&b, "  %-11s http://%s\n", svc, s.admins[svc])
	}
	inbox, err := mysql.ParseDSN(s.inboxDSN)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "inbox (MariaDB): database %s at %s, account %s, password %s (MSGX_MYSQL_DSN=%s)\n",
		inbox.DBName, inbox.Addr, inbox.User, inbox.Passwd, s.inboxDSN)
	fmt.Fprintf(&b, "PostgreSQL: %s\n", s.pgDSN)
	fmt.Fprintf(&b, "Redis prefix %s; topics %s and %s\n", s.names.prefix, s.names.topicMsg, s.names.topicSchd)
	fmt.Fprintf(&b, "the services' log: %s\n", filepath.Join(dir, "services.log"))
	fmt.Print(b.String())
	// Written after the lines above, and renamed into place: whoever waits for the file (make
	// run) finds the output complete and the file whole.
	tmp := filepath.Join(dir, "env.tmp")
	if err := os.WriteFile(tmp, []byte(envLine+"\n"), 0o600); err != nil {
		return fmt.Errorf("-serve: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "env")); err != nil {
		return fmt.Errorf("-serve: %w", err)
	}
	<-ctx.Done()
	_ = os.Remove(filepath.Join(dir, "env"))
	step("stopping the services")
	return nil
}

// runNames are what one run creates, and drops at its end.
type runNames struct{ pg, inbox, account, prefix, topicMsg, topicSchd string }

// topicPartitions is each topic's partition count; KAFKA:schd is compacted, as production
// creates it (docs/dispatcher.md).
const topicPartitions = 3

// createTopics creates the run's two topics (the broker creates none on its own), each ready
// once every partition has a leader: the dispatcher's first send could meet none otherwise.
func createTopics(ctx context.Context, admin *kadm.Client, n runNames) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, t := range []struct {
		name    string
		configs map[string]string
	}{{n.topicMsg, nil}, {n.topicSchd, map[string]string{"cleanup.policy": "compact"}}} {
		if err := kafkatest.CreateTopic(ctx, admin, t.name, topicPartitions, t.configs); err != nil {
			return fmt.Errorf("kafka (MSGX_KAFKA_BROKERS; make deps starts the local one): %w", err)
		}
	}
	return nil
}

// dropRun drops the run's PostgreSQL database, inbox database and account, Redis keys and
// topics. It runs after the services stopped, on a context of its own: an interrupted run
// cleans up too.
func dropRun(o options, admin *kadm.Client, n runNames) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if conn, err := pgx.Connect(ctx, o.pgAdmin); err != nil {
		errs = append(errs, err)
	} else {
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n.pg}.Sanitize()+" WITH (FORCE)")
		errs = append(errs, err, conn.Close(ctx))
	}
	if cfg, err := mysql.ParseDSN(o.myAdmin); err != nil {
		errs = append(errs, err)
	} else if admin, err := sql.Open("mysql", cfg.FormatDSN()); err != nil {
		errs = append(errs, err)
	} else {
		for _, s := range []string{"DROP DATABASE IF EXISTS " + n.inbox, "DROP USER IF EXISTS '" + n.account + "'@'%'"} {
			if _, err := admin.ExecContext(ctx, s); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, admin.Close())
	}
	errs = append(errs, clearRedis(ctx, o.redisURL, n.prefix))
	if resps, err := admin.DeleteTopics(ctx, n.topicMsg, n.topicSchd); err != nil {
		errs = append(errs, fmt.Errorf("kafka: delete the topics: %w", err))
	} else {
		for _, r := range resps.Sorted() {
			// A topic the run never got to create is no leftover.
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("kafka: delete topic %s: %w", r.Topic, r.Err))
			}
		}
	}
	return errors.Join(errs...)
}

// breakOne truncates the text of the first operational update the generator expects to
// succeed: it cannot be decoded, ends DEAD(MALFORMED), and the run must say FAIL naming it.
func breakOne(msgs []traffic.Message) {
	for i, m := range msgs {
		if m.Kind == traffic.KindFLOP && m.Want == traffic.Succeeded {
			msgs[i].XML = m.XML[:len(m.XML)/2]
			step(fmt.Sprintf("-break-row: the day's message %d (%s %s) truncated; the generator still expects %s", i+1, m.TYPE, m.STYP, m.Want))
			return
		}
	}
}

// traces prints how to find one message's trace through Jaeger's HTTP API, and what it holds.
// Jaeger runs until the demo ends; its UI is at the same address.
func traces(ctx context.Context, j *stack.Jaeger, msgID int64) {
	tags := map[string]string{"msg_id": fmt.Sprint(msgID)}
	fmt.Println("traces (Jaeger v2, stopped with the demo)")
	fmt.Printf("  a message's trace:      curl -s '%s%s'\n", j.QueryURL, stack.TracesPath("msgx-ingest", tags))
	found, err := j.Traces(ctx, "msgx-ingest", tags)
	if err != nil {
		fmt.Printf("  message %d: %v\n", msgID, err)
		return
	}
	for id, spans := range found {
		services := map[string]bool{}
		for _, s := range spans {
			services[s.Service] = true
		}
		fmt.Printf("  message %d: trace %s, %d spans from %d services (%s/trace/%s)\n", msgID, id, len(spans), len(services), j.QueryURL, id)
	}
}

type progress struct {
	inbox, enqueued, terminal, marked, sent, pending int64
}

func readProgress(ctx context.Context, pool *pgxpool.Pool, inbox *sql.DB) (progress, error) {
	var p progress
	if err := inbox.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(CMINMSGS_DATE_PROCESSED) FROM cminmsgs`).Scan(&p.inbox, &p.marked); err != nil {
		return p, fmt.Errorf("read inbox: %w", err)
	}
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM proc_state),
		(SELECT count(*) FROM proc_state WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')),
		(SELECT count(*) FROM msg_event WHERE state = 'SENT'),
		(SELECT count(*) FROM msg_event WHERE state = 'PENDING')`).Scan(&p.enqueued, &p.terminal, &p.sent, &p.pending)
	if err != nil {
		return p, fmt.Errorf("read progress: %w", err)
	}
	return p, nil
}

// summary prints the counts, then every SKIPPED and DEAD row with its reason, and returns the
// rows that ended otherwise than the generator expects.
func summary(ctx context.Context, pool *pgxpool.Pool, msgs []traffic.Message, ids []int64, p progress, elapsed time.Duration) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT msg_id, state, coalesce(error_class, ''), coalesce(last_error, '') FROM proc_state`)
	if err != nil {
		return nil, err
	}
	type outcome struct{ state, class, reason string }
	got := map[int64]outcome{}
	counts := map[string]int{}
	for rows.Next() {
		var id int64
		var o outcome
		if err := rows.Scan(&id, &o.state, &o.class, &o.reason); err != nil {
			return nil, err
		}
		got[id] = o
		key := o.state
		if o.class != "" {
			key += "(" + o.class + ")"
		}
		counts[key]++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	state := func(o outcome) string {
		if o.state == "" {
			return "missing"
		}
		if o.class != "" {
			return o.state + "(" + o.class + ")"
		}
		return o.state
	}
	// The expectation is the generator's (traffic.Message.Want), never the demo's: the rows it
	// expects SKIPPED (re-sends, unsupported kinds, an order-safe supersession) are its to say.
	var mismatches, ended []string
	for i, m := range msgs {
		o := got[ids[i]]
		if o.state != m.Want {
			mismatches = append(mismatches, fmt.Sprintf("msg %d (%s %s %s) %s, expected %s", ids[i], m.Kind, m.TYPE, m.STYP, state(o), m.Want))
		}
		if o.state == traffic.Skipped || o.state == traffic.Dead {
			ended = append(ended, fmt.Sprintf("  msg %-6d %-12s %-10s %-22s %s", ids[i], m.Kind, strings.TrimSpace(m.TYPE+" "+m.STYP), state(o), firstLine(o.reason)))
		}
	}
	fmt.Println("summary")
	fmt.Printf("  rows in the inbox       %d\n", p.inbox)
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %-24s%d\n", k, counts[k])
	}
	if err := scheduleAndRequests(ctx, pool); err != nil {
		return nil, err
	}
	fmt.Printf("  events published        %d\n", p.sent)
	fmt.Printf("  markers written         %d\n", p.marked)
	fmt.Printf("  non-terminal rows       %d\n", p.enqueued-p.terminal)
	fmt.Printf("  elapsed                 %s\n", elapsed.Round(time.Millisecond))
	fmt.Printf("  throughput              %.1f rows/s (inbox insert to marker)\n", float64(p.inbox)/elapsed.Seconds())
	fmt.Printf("SKIPPED and DEAD rows, with their reasons (%d)\n", len(ended))
	for _, l := range ended {
		fmt.Println(l)
	}
	return mismatches, nil
}

// scheduleAndRequests prints the schedule messages and the upstream requests by outcome.
func scheduleAndRequests(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `SELECT 'SCHD-' || msg_styp || ' ' || state || coalesce('(' || error_class || ')', ''), count(*)
		FROM proc_state WHERE msg_type = 'SCHD' GROUP BY 1
		UNION ALL SELECT 'request ' || req_type || ' ' || state, count(*) FROM req_track GROUP BY 1 ORDER BY 1`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		fmt.Printf("  %-24s%d\n", k, n)
	}
	return rows.Err()
}

// requestRoundTrip asks AODB for the day's schedule through control (RequestSchedule), waits
// until the dispatcher has written the RQFD to COUTMSGS, and inserts AODB's answer, a SCHD
// RESP of the day's flights, into the inbox. It returns the answer's inbox ID.
func requestRoundTrip(ctx context.Context, addr, token string, day traffic.Options, insert func(string) (int64, error)) (int64, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	client := controlv1.NewControlServiceClient(conn)
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	d := time.Now().In(airportZone()).Format(time.DateOnly)
	deadline := time.Now().Add(time.Minute)
	var id int64
	for id == 0 {
		resp, err := client.RequestSchedule(ctx, &controlv1.RequestScheduleRequest{FromDay: d, ToDay: d, Comment: "msgx-demo"})
		switch {
		case err == nil:
			id = resp.GetRequest().GetReqId()
		case time.Now().After(deadline):
			return 0, fmt.Errorf("RequestSchedule: %w", err)
		default:
			time.Sleep(200 * time.Millisecond) // control still starting, or not yet holding its role
		}
	}
	for {
		list, err := client.ListRequests(ctx, &controlv1.ListRequestsRequest{State: controlv1.RequestState_REQUEST_STATE_SENT})
		if err != nil {
			return 0, fmt.Errorf("ListRequests: %w", err)
		}
		for _, r := range list.GetRequests() {
			if r.GetReqId() == id {
				step(fmt.Sprintf("schedule request %d for %s written to COUTMSGS (row %d); AODB answers with a SCHD RESP", id, d, r.GetCoutmsgsId()))
				return insert(traffic.RESP(1, time.Now(), traffic.DayFlights(day)))
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("request %d not written to COUTMSGS within a minute", id)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func airportZone() *time.Location {
	if z, err := time.LoadLocation("Asia/Shanghai"); err == nil {
		return z
	}
	return time.FixedZone("CST", 8*3600)
}

func step(s string) { fmt.Println("==> " + s) }

// freshPG drops and recreates the demo database and returns its DSN.
func freshPG(ctx context.Context, adminDSN, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("postgres (MSGX_TEST_PG_DSN): %w", err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop demo database: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("create demo database: %w", err)
	}
	cfg := conn.Config()
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name), nil
}

// freshInbox recreates the demo inbox database from the dev fixture, with a service account
// that may only SELECT, INSERT and UPDATE the two shared tables.
func freshInbox(ctx context.Context, adminDSN, name, account string) (string, *sql.DB, error) {
	cfg, err := mysql.ParseDSN(adminDSN)
	if err != nil {
		return "", nil, err
	}
	cfg.MultiStatements = true
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	defer admin.Close()
	stmts := []string{
		"DROP DATABASE IF EXISTS " + name,
		"CREATE DATABASE " + name + " CHARACTER SET utf8mb4",
		"USE " + name,
		migrations.InboxFixture,
		"DROP USER IF EXISTS '" + account + "'@'%'",
		"CREATE USER '" + account + "'@'%' IDENTIFIED BY 'msgx_demo'",
		"GRANT SELECT, INSERT, UPDATE ON " + name + ".cminmsgs TO '" + account + "'@'%'",
		"GRANT SELECT, INSERT, UPDATE ON " + name + ".coutmsgs TO '" + account + "'@'%'",
	}
	for _, s := range stmts {
		if _, err := admin.ExecContext(ctx, s); err != nil {
			return "", nil, fmt.Errorf("mysql (MSGX_TEST_MYSQL_DSN): %s: %w", firstLine(s), err)
		}
	}
	svc := mysql.NewConfig()
	svc.User, svc.Passwd, svc.Net, svc.Addr, svc.DBName = account, "msgx_demo", cfg.Net, cfg.Addr, name
	svc.ParseTime = true
	svc.Loc, _ = time.LoadLocation("Asia/Shanghai")
	inbox := mysql.NewConfig()
	*inbox = *cfg
	inbox.DBName = name
	inbox.MultiStatements = false
	inbox.ParseTime = true
	inbox.Loc = svc.Loc
	db, err := sql.Open("mysql", inbox.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	return svc.FormatDSN(), db, nil
}

func clearRedis(ctx context.Context, url, prefix string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("redis (MSGX_TEST_REDIS_URL): %w", err)
	}
	return nil
}

func runOnce(ctx context.Context, binary string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// demoToken is the control token of the demo's control instance (at least secret.MinTokenLength
// characters, as control requires).
const demoToken = "demo-operator-token-0123456789abcdef"
