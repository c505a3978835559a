package chaos

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/msgexchange/msgexchange/testkit/ports"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"

	"github.com/msgexchange/msgexchange/pkg/clock"
)

// Target is one set of real dependencies a stack runs on: its own PostgreSQL database, inbox
// database, Redis key prefix and Kafka broker with the two topics (pgtest, mysqltest,
// redistest and kafkatest give a test such a set).
type Target struct {
	PGDSN           string // the stack's database, with a role that may ALTER DATABASE and terminate backends
	PGAdminDSN      string // another database of the same server (maintenance), for the PostgreSQL faults
	MySQLAdminDSN   string // an account on the inbox database that may LOCK TABLES and KILL sessions
	MySQLServiceDSN string // the restricted account the services use
	RedisURL        string // the server, with a user that may CLIENT PAUSE and manage ACL users
	RedisPrefix     string // every key of the stack goes under it
	// RedisSentinel, in place of RedisURL, is Redis under Sentinel: the Redis failover runs on it.
	RedisSentinel *SentinelTarget
	// PGReplicated is PostgreSQL as a synchronous primary and standby, with PGDSN and
	// PGAdminDSN multi-host: the PostgreSQL failover runs on it.
	PGReplicated *PGTarget
	// Kafka is a broker of the stack's own, running, with the topics TopicMsg and TopicSchd
	// (KAFKA:schd compacted, as in production). The faults kill it; the reference run of
	// ingest and the pump needs none.
	Kafka               Broker
	TopicMsg, TopicSchd string
	// KafkaCluster, in place of Kafka, is a cluster of the stack's own: the faults kill its
	// brokers one or two at a time (cluster.go).
	KafkaCluster Cluster
}

// Broker is a Kafka broker process the harness kills with SIGKILL and starts again on its data
// at the same address (kafkatest.Own's Server).
type Broker interface {
	Addr() string
	Kill()
	// Restart starts the killed broker again and returns once it answers.
	Restart() error
}

// harnessApp is the application_name of the harness's own PostgreSQL connections, which the
// pg_terminate_backend fault spares (the long PostgreSQL outage does not).
const harnessApp = "msgx-chaos"

// brokerName names the broker among the processes the faults take down.
const brokerName = "kafka"

// services are the five roles the chaos stack runs and the kill fault picks from.
var services = stack.Services

// longSlot is a planned long outage, at an offset from the window's start.
type longSlot struct {
	dep     Dep
	at, dur time.Duration
}

// minGap is the least time before, between and after the long outages, so that the stack
// recovers from one before the next.
const minGap = 8 * time.Second

// brokerStart is what a long outage of the broker takes beyond its planned length: the killed
// broker's start (a JVM, its log recovery, its registration), about 5 s on an idle machine of
// two cores and 10-15 s beside make test. Planned after the outage, so that the gap that
// follows is one of a running broker: the short broker kill, which waits for the long outage
// to end, gets its turn in the window.
const brokerStart = 15 * time.Second

// span is how long the long outage of d takes in the plan: its length, and for the broker its
// start after it.
func span(d Dep) time.Duration {
	if d == DepKafka {
		return LongOutage(d) + brokerStart
	}
	return LongOutage(d)
}

// planLong places the long outages in the window in a seeded order with equal gaps, growing
// the window when they do not fit.
func planLong(r *mrand.Rand, window time.Duration, deps []Dep) ([]longSlot, time.Duration) {
	order := append([]Dep(nil), deps...)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var total time.Duration
	for _, d := range order {
		total += span(d)
	}
	gaps := time.Duration(len(order) + 1)
	if window < total+gaps*minGap {
		window = total + gaps*minGap
	}
	gap := (window - total) / gaps
	var slots []longSlot
	at := gap
	for _, d := range order {
		slots = append(slots, longSlot{dep: d, at: at, dur: LongOutage(d)})
		at += span(d) + gap
	}
	return slots, window
}

// harness holds the connections and processes of one run.
type harness struct {
	cfg   Config
	out   io.Writer
	outMu sync.Mutex
	start time.Time // the window's start; log lines are stamped from it

	logFile *os.File
	pg      *pgxpool.Pool // the stack's database, as the harness (spared by pg_terminate_backend)
	pgAdmin *pgxpool.Pool
	pgDB    string
	inbox   *sql.DB // admin on the inbox database: checks, KILL
	// stall is the longest discovery stall sampled so far (the oldest inbox row waiting beyond
	// W, ingest's inbox_cursor.waiting_since), for the report; read on the progress
	// goroutines under outMu.
	stall   time.Duration
	loader  *sql.DB // admin on the inbox database: upstream's inserts
	lockDB  *sql.DB // admin, no idle connections: LOCK TABLES
	myUser  string
	redis   *redis.Client // admin: the server, or the master under Sentinel
	ha      *redisHA      // under Sentinel: the data nodes and the failovers
	pgha    *pgHA         // replicated PostgreSQL: the failovers
	aclUser string
	pumpEnv []string // the pump's own settings on top of the stack's (its lock_timeout)
	dis     *disorder
	grpc    *grpc.ClientConn

	broker    Broker
	cluster   Cluster
	topicMsg  string
	topicSchd string
	st        *stack.Stack
	sup       *supervisor
	rec       *recorder
	inj       *injector
}

func (h *harness) logf(format string, args ...any) {
	line := fmt.Sprintf("%7.1fs  ", time.Since(h.start).Seconds()) + fmt.Sprintf(format, args...)
	h.outMu.Lock()
	defer h.outMu.Unlock()
	fmt.Fprintln(h.out, line)
	if h.logFile != nil {
		fmt.Fprintln(h.logFile, "[chaos] "+line)
	}
}

// Run runs one chaos run on chaos and its fault-free reference on clean, prints the summary
// to out and returns the report. An error means the run could not be carried out; a failed
// check is in the report.
func Run(ctx context.Context, cfg Config, chaos, clean Target, out io.Writer) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	r := mrand.New(mrand.NewPCG(uint64(cfg.Seed), 0x4348414f53)) // "CHAOS"
	h := &harness{cfg: cfg, out: out, start: time.Now()}
	defer h.close()
	if err := h.open(ctx, chaos); err != nil {
		return nil, err
	}
	rep := &Report{Seed: cfg.Seed, LogDir: cfg.LogDir, Planned: cfg.Window}

	msgs := traffic.Day(traffic.Options{Flights: cfg.Flights, Seed: cfg.Seed})
	long, window := planLong(r, cfg.Window, cfg.Long)
	rep.Window, rep.Long = window, long
	plan := planLoad(r, msgs, cfg.Holes, cfg.LateCommits, cfg.LateMax, loadSpan(window, long))
	failovers := planFailovers(window, long, cfg.Failovers)
	planOrder(r, &plan, cfg.LateArrivals, cfg.Replays, append(slices.Clone(long), replaySlots(failovers, cfg.Failovers)...))
	rep.ArrivalsPlanned, rep.ReplaysPlanned = len(plan.arrivals), len(plan.replays)
	h.logf("seed %d: %d messages for %d flights, %d rolled-back inserts, %d late commits, %d late arrivals, %d replays, window %s, long outages %s",
		cfg.Seed, len(msgs), cfg.Flights, len(plan.holes), len(plan.late), len(plan.arrivals), len(plan.replays), window, describeLong(long))

	if err := h.startStack(ctx); err != nil {
		return nil, err
	}
	rep.Setup = time.Since(began)
	h.clusterStarted()

	// The window.
	h.start = time.Now()
	sctx, stopSup := context.WithCancel(ctx)
	defer stopSup()
	go h.sup.run(sctx)
	loadDone := make(chan *loadResult, 1)
	go func() { loadDone <- load(ctx, h.loader, plan, h.dis) }()
	wctx, endWindow := context.WithTimeout(ctx, window)
	defer endWindow()
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); h.failovers(wctx, ctx, failovers) }()
	go func() { defer wg.Done(); h.progressLoop(wctx) }()
	go func() {
		defer wg.Done()
		for _, s := range long {
			if !clock.Sleep(wctx, time.Until(h.start.Add(s.at))) {
				return
			}
			h.inj.outage(ctx, s.dep, s.dur)
		}
	}()
	go func() {
		defer wg.Done()
		h.inj.shortFaults(wctx, mrand.New(mrand.NewPCG(uint64(cfg.Seed), 2)))
	}()
	wg.Wait()
	rep.WindowTook = time.Since(h.start)
	h.logf("window over: faults stop")

	// Drain: the loader finishes, every row becomes terminal, marked and delivered.
	drainStart := time.Now()
	var lr *loadResult
	select {
	case lr = <-loadDone:
	case <-time.After(cfg.DrainTimeout):
		return nil, errors.New("the loader did not finish within the drain timeout")
	}
	if lr.err != nil {
		return nil, fmt.Errorf("loading the traffic: %w", lr.err)
	}
	rep.Messages, rep.RolledBack, rep.Late = len(lr.ids), len(lr.rolledBack), len(lr.late)
	for _, l := range lr.late {
		rep.LateMax = max(rep.LateMax, l.held)
	}
	for _, a := range lr.arrivals {
		if a.released && a.err == nil {
			rep.Arrivals++
			rep.ArrivalMax = max(rep.ArrivalMax, a.held)
		}
	}
	for _, x := range lr.replays {
		if x.made {
			rep.Replays++
			rep.ReplayLater += x.after
		}
	}
	rep.Drained = h.drain(ctx)
	rep.Drain = time.Since(drainStart)
	h.sampleStall(ctx)
	h.outMu.Lock()
	rep.LongestStall = h.stall
	h.outMu.Unlock()
	_ = h.pg.QueryRow(ctx, `SELECT hole_fill_max_seconds FROM inbox_cursor WHERE id = 1`).Scan(&rep.LongestFill)
	// Asked while the broker still runs; the Kafka check shows it when it fails.
	kafkaState := h.rec.diagnose(ctx)
	var clusterCheck func(evidence) Check
	rep.Cluster, clusterCheck = h.clusterDone(ctx)
	stopSup()
	h.st.StopAll(10 * time.Second)
	rep.SelfExits, rep.SettingsRefusedExits, rep.SelfExitLines = h.sup.selfExits()

	snapCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	chaosSnap, err := takeSnapshot(snapCtx, h.pg, h.redis, chaos.RedisPrefix)
	if err != nil {
		return nil, fmt.Errorf("chaos state: %w", err)
	}
	inbox, err := readInbox(snapCtx, h.inbox)
	if err != nil {
		return nil, err
	}
	msg, schd, records, foreign := h.rec.snapshot()
	broken, brokenFirst := h.rec.contractBreaks()
	rep.Records = records

	// The reference: the same inbox rows, same IDs, through a fault-free ingest and pump.
	cleanStart := time.Now()
	cleanSnap, err := h.cleanRun(ctx, clean)
	if err != nil {
		return nil, fmt.Errorf("clean run: %w", err)
	}
	rep.Clean = time.Since(cleanStart)

	rep.Outcomes = map[string]int{}
	for _, o := range chaosSnap.outcomes {
		k := o.State
		if o.Class != "" && o.State != "SUCCEEDED" {
			k += "(" + o.Class + ")"
		}
		rep.Outcomes[k]++
	}
	rep.Faults = h.inj.summary()
	h.inj.mu.Lock()
	rep.BrokerKills = h.inj.brokerKills
	h.inj.mu.Unlock()
	ev := evidence{chaos: chaosSnap, clean: cleanSnap, inbox: inbox, load: lr, msg: msg, schd: schd,
		foreign: foreign, broken: broken, brokenFirst: brokenFirst, kafkaState: kafkaState, faults: h.inj.counts, long: long,
		selfExits: rep.SelfExits, settingsRefused: rep.SettingsRefusedExits, selfExitLines: rep.SelfExitLines, kinds: h.inj.kinds()}
	rep.Checks = runChecks(ev)
	if clusterCheck != nil {
		rep.Checks = append(rep.Checks, clusterCheck(ev))
	}
	rep.Failovers = h.failoverReports(failovers)
	rep.Checks = append(rep.Checks, checkFailovers(rep.Failovers)...)
	rep.Total = time.Since(began)
	rep.Print(out)
	return rep, nil
}

// loadSpan is how long the inserts are spread over: at least three quarters of the window,
// so that the traffic drains while short faults go on, and past the end of the last long
// outage, so that every long outage meets traffic (an outage of an idle stack proves nothing).
func loadSpan(window time.Duration, long []longSlot) time.Duration {
	span := window * 3 / 4
	if n := len(long); n > 0 {
		span = max(span, long[n-1].at+long[n-1].dur+sampleBefore)
	}
	return min(span, window)
}

func describeLong(long []longSlot) string {
	if len(long) == 0 {
		return "none"
	}
	var parts []string
	for _, l := range long {
		parts = append(parts, fmt.Sprintf("%s %s at %s", l.dep, l.dur, l.at.Round(time.Second)))
	}
	return strings.Join(parts, ", ")
}

// open connects the harness to the chaos target's servers and creates the services' Redis
// user.
func (h *harness) open(ctx context.Context, t Target) error {
	var err error
	if h.logFile, err = os.Create(filepath.Join(h.cfg.LogDir, "chaos.log")); err != nil {
		return err
	}
	pcfg, err := pgxpool.ParseConfig(t.PGDSN)
	if err != nil {
		return fmt.Errorf("pg dsn: %w", err)
	}
	h.pgDB = pcfg.ConnConfig.Database
	pcfg.MaxConns = 3
	pcfg.ConnConfig.RuntimeParams["application_name"] = harnessApp
	pcfg.ConnConfig.ConnectTimeout = 5 * time.Second
	if h.pg, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return err
	}
	if h.pgha, err = h.openPGHA(t); err != nil {
		return err
	}
	acfg, err := pgxpool.ParseConfig(t.PGAdminDSN)
	if err != nil {
		return fmt.Errorf("pg admin dsn: %w", err)
	}
	if acfg.ConnConfig.Database == h.pgDB {
		return fmt.Errorf("the PostgreSQL admin DSN must name another database than the stack's %s: the long outage closes that one", h.pgDB)
	}
	acfg.MaxConns = 2
	acfg.ConnConfig.RuntimeParams["application_name"] = harnessApp
	acfg.ConnConfig.ConnectTimeout = 5 * time.Second
	if h.pgAdmin, err = pgxpool.NewWithConfig(ctx, acfg); err != nil {
		return err
	}

	mcfg, err := mysql.ParseDSN(t.MySQLAdminDSN)
	if err != nil {
		return fmt.Errorf("mysql admin dsn: %w", err)
	}
	scfg, err := mysql.ParseDSN(t.MySQLServiceDSN)
	if err != nil {
		return fmt.Errorf("mysql service dsn: %w", err)
	}
	if scfg.User == mcfg.User {
		return errors.New("the services' MySQL account must differ from the admin's: the KILL fault ends the services' sessions")
	}
	h.myUser = scfg.User
	open := func(params map[string]string, maxOpen, maxIdle int) (*sql.DB, error) {
		c := mcfg.Clone()
		c.ParseTime = true
		c.Timeout = 5 * time.Second
		if c.Params == nil {
			c.Params = map[string]string{}
		}
		for k, v := range params {
			c.Params[k] = v
		}
		conn, err := mysql.NewConnector(c)
		if err != nil {
			return nil, err
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(maxOpen)
		db.SetMaxIdleConns(maxIdle)
		return db, nil
	}
	if h.inbox, err = open(nil, 3, 3); err != nil {
		return err
	}
	// Upstream's inserts wait behind a locked table like any session; bounded above the
	// longest inbox outage so that a lock left behind cannot hang the loader for a day.
	if h.loader, err = open(map[string]string{"lock_wait_timeout": "150"}, 6, 6); err != nil {
		return err
	}
	if h.lockDB, err = open(nil, 2, 0); err != nil {
		return err
	}
	if err := h.inbox.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}

	// The services get their own Redis user, limited to their prefix: switching it off is an
	// outage of Redis for the services alone, where a long CLIENT PAUSE would stop every
	// client of the shared server.
	h.aclUser = fmt.Sprintf("%s%d-%d", aclPrefix, time.Now().Unix(), os.Getpid())
	redisEnv, err := h.openRedis(ctx, t, h.aclUser, randomHex(16))
	if err != nil {
		return err
	}

	if (t.Kafka == nil) == (t.KafkaCluster == nil) || t.TopicMsg == "" || t.TopicSchd == "" {
		return errors.New("the chaos target needs a broker or a cluster of its own, and its two topics")
	}
	h.broker, h.cluster, h.topicMsg, h.topicSchd = t.Kafka, t.KafkaCluster, t.TopicMsg, t.TopicSchd
	grpcPort, err := ports.Free()
	if err != nil {
		return err
	}
	env := []string{
		"MSGX_PG_DSN=" + t.PGDSN,
		"MSGX_MYSQL_DSN=" + t.MySQLServiceDSN,
		"MSGX_REDIS_PREFIX=" + t.RedisPrefix,
		"MSGX_KAFKA_BROKERS=" + strings.Join(h.bootstrap(), ","),
		"MSGX_KAFKA_TOPIC_MSG=" + h.topicMsg,
		"MSGX_KAFKA_TOPIC_SCHD=" + h.topicSchd,
		"MSGX_ADMIN_ADDR=127.0.0.1:0",
		"MSGX_HTTP_ADDR=127.0.0.1:0",
		"MSGX_GRPC_ADDR=127.0.0.1:" + strconv.Itoa(grpcPort),
		"MSGX_CONTROL_TOKEN=" + controlToken,
		"MSGX_PIPELINE_POLL_INTERVAL=100ms",
		"MSGX_PIPELINE_BACKFILL_PERIOD=500ms",
		"MSGX_SCHD_FLUSH_PERIOD=200ms",
		"MSGX_PIPELINE_MAX_COMMIT_DELAY=" + h.cfg.MaxCommitDelay.String(),
		// A late arrival would void the clean-run comparison: look for them often, so that
		// one is found and enqueued (and the check names it) before the drain ends.
		"MSGX_PIPELINE_LATE_DETECT_PERIOD=2s",
		// After an inbox outage the markers that failed back off; the default (30 s doubling
		// to 15 min) would outlast any bounded drain.
		"MSGX_PIPELINE_BACKFILL_BACKOFF=1s",
		"MSGX_PIPELINE_BACKFILL_BACKOFF_CAP=5s",
		"MSGX_SHUTDOWN_TIMEOUT=5s",
		"MSGX_LOG_LEVEL=info",
	}
	env = append(env, redisEnv...)
	// The pump's sessions wait at most pumpLockTimeout for a row lock: a flight row another
	// session holds fails the message's attempt (the replays, docs/chaos.md).
	pumpDSN, err := withLockTimeout(t.PGDSN, pumpLockTimeout)
	if err != nil {
		return err
	}
	h.pumpEnv = []string{"MSGX_PG_DSN=" + pumpDSN}
	if h.dis, h.grpc, err = newDisorder(h.pg, h.logf, "127.0.0.1:"+strconv.Itoa(grpcPort), controlToken); err != nil {
		return err
	}
	h.st = stack.New(h.cfg.Bin, env, h.logFile)
	h.sup = newSupervisor(h.st, services, h.startProc)
	h.inj = &injector{logf: h.logf, services: services, sup: h.sup, restart: h.restartProc, stop: h.stopProc,
		pg: h.pg, pgAdmin: h.pgAdmin, pgDB: h.pgDB, lockDB: h.lockDB, myAdmin: h.inbox, myUser: h.myUser,
		redis: h.redis, ha: h.ha, pgha: h.pgha, redisACL: h.aclUser, counts: map[Kind]*tally{}, long: map[Dep]bool{}}
	h.dis.holding, h.dis.stalled = h.inj.holding, h.inj.pumpSpared
	if h.cluster != nil {
		h.inj.kc = newClusterFaults(h.cluster, h.pg, h.topicMsg, h.topicSchd)
	}
	return nil
}

// controlToken is the control service's operator token in the chaos stack.
const controlToken = "chaos-operator-token-0123456789abcdef"

// aclPrefix names the harness's Redis users; staleACL is how old one must be before a run
// deletes it (left by a run that died before its cleanup).
const (
	aclPrefix = "msgx-chaos-"
	staleACL  = 3 * time.Hour
)

func sweepACLUsers(ctx context.Context, rdb *redis.Client) {
	users, err := rdb.Do(ctx, "ACL", "USERS").StringSlice()
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-staleACL).Unix()
	for _, u := range users {
		rest, ok := strings.CutPrefix(u, aclPrefix)
		if !ok {
			continue
		}
		stamp, _, _ := strings.Cut(rest, "-")
		if ts, err := strconv.ParseInt(stamp, 10, 64); err == nil && ts < cutoff {
			_ = rdb.Do(ctx, "ACL", "DELUSER", u).Err()
		}
	}
}

// stopProc stops a process of the stack: SIGKILL (a crash) or SIGTERM. The broker is always
// killed with SIGKILL, in the middle of whatever transaction a dispatcher has open: the
// transaction the killed broker held open must not stall read_committed consumers, since a new
// dispatcher term's fence or the transaction timeout aborts it.
func (h *harness) stopProc(name string, crash bool) {
	switch {
	case name == brokerName:
		h.broker.Kill()
	case crash:
		h.st.Kill(name)
	default:
		h.st.Stop(name, 10*time.Second)
	}
}

// startProc starts a process of the stack; the broker also waits until it answers.
func (h *harness) startProc(name string) error {
	switch name {
	case brokerName:
		return h.broker.Restart()
	case "pump":
		return h.st.Start(name, nil, h.pumpEnv...)
	}
	return h.st.Start(name, nil)
}

func (h *harness) restartProc(name string) error { return h.startProc(name) }

// startStack starts the consumer and the five services on the running broker and waits until
// every role has an active holder.
func (h *harness) startStack(ctx context.Context) error {
	var err error
	if h.rec, err = startRecorder(h.bootstrap(), h.topicMsg, h.topicSchd); err != nil {
		return err
	}
	for _, s := range services {
		if err := h.startProc(s); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		var n int
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := h.pg.QueryRow(qctx, `SELECT count(DISTINCT h.role) FROM role_holder h
			JOIN pg_locks l ON l.pid = h.backend_pid AND l.locktype = 'advisory' AND l.granted`).Scan(&n)
		cancel()
		if err == nil && n == len(services) {
			return nil
		}
		for _, s := range services {
			if code, exited := h.st.Exited(s); exited {
				return fmt.Errorf("%s exited with %d before the run started (logs: %s)", s, code, h.logFile.Name())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d roles active after 90s (err %v; logs: %s)", n, len(services), err, h.logFile.Name())
		}
		if !clock.Sleep(ctx, 300*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// progressLoop prints the pipeline's progress every ten seconds.
// sampleStall keeps the longest time the oldest row beyond W has waited for discovery, as
// ingest records it each round. Sampled with the progress (every 10 s), so it is a lower bound
// by up to one sample.
func (h *harness) sampleStall(ctx context.Context) {
	var since *time.Time
	if err := h.pg.QueryRow(ctx, `SELECT waiting_since FROM inbox_cursor WHERE id = 1`).Scan(&since); err != nil || since == nil {
		return
	}
	h.outMu.Lock()
	h.stall = max(h.stall, time.Since(*since))
	h.outMu.Unlock()
}

func (h *harness) progressLoop(ctx context.Context) {
	for clock.Sleep(ctx, 10*time.Second) {
		h.printProgress(ctx)
	}
}

func (h *harness) printProgress(ctx context.Context) {
	h.sampleStall(ctx)
	p, err := readProgress(ctx, h.pg, h.inbox)
	if err != nil {
		if ctx.Err() == nil {
			h.logf("progress unavailable: %v", short(err.Error()))
		}
		return
	}
	h.logf("%s · received %d", p, h.rec.count())
}

// drain waits, bounded by DrainTimeout, until every inbox row is terminal and marked (or
// abandoned, which the checks report), no event is pending and the consumer received every
// sent one. It reports whether that happened.
func (h *harness) drain(ctx context.Context) bool {
	deadline := time.Now().Add(h.cfg.DrainTimeout)
	last := time.Now()
	for {
		p, err := readProgress(ctx, h.pg, h.inbox)
		if err == nil && p.enqueued == p.inbox && p.terminal == p.inbox && p.backfilled+p.abandoned == p.inbox &&
			p.marked+p.abandoned == p.inbox && p.pending == 0 {
			sent, err := sentEvents(ctx, h.pg)
			if err == nil && len(h.rec.missing(sent)) == 0 {
				h.logf("drained: %s · received %d", p, h.rec.count())
				return true
			}
		}
		if time.Now().After(deadline) {
			h.logf("NOT drained after %s: %s (err %v)", h.cfg.DrainTimeout, p, err)
			return false
		}
		if time.Since(last) >= 10*time.Second {
			h.printProgress(ctx)
			last = time.Now()
		}
		if !clock.Sleep(ctx, 500*time.Millisecond) {
			return false
		}
	}
}

// close stops what the run started and removes the services' Redis user. Every fault
// restores itself; this is the last line for a run cut short.
func (h *harness) close() {
	if h.st != nil {
		h.st.StopAll(10 * time.Second)
	}
	if h.inj != nil && h.inj.kc != nil && h.inj.kc.elections != nil {
		h.inj.kc.elections.cancel() // a run cut short; clusterDone stopped it otherwise
	}
	if h.rec != nil {
		h.rec.close()
	}
	if h.grpc != nil {
		_ = h.grpc.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	if h.pgAdmin != nil && h.pgDB != "" {
		_, _ = h.pgAdmin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{h.pgDB}.Sanitize()+" WITH ALLOW_CONNECTIONS true")
	}
	if h.redis != nil {
		if h.aclUser != "" {
			_ = h.redis.Do(ctx, "ACL", "DELUSER", h.aclUser).Err()
		}
		_ = h.redis.Close()
	}
	if h.ha != nil {
		h.ha.close()
	}
	for _, db := range []*sql.DB{h.inbox, h.loader, h.lockDB} {
		if db != nil {
			_ = db.Close()
		}
	}
	if h.pg != nil {
		h.pg.Close()
	}
	if h.pgAdmin != nil {
		h.pgAdmin.Close()
	}
	if h.logFile != nil {
		_ = h.logFile.Close()
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
