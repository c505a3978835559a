package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/clock"
)

// Kind is a kind of fault.
type Kind string

// The short faults, each a real mechanism on the local servers or processes.
const (
	KillService Kind = "kill -9 service"      // SIGKILL of a service process, restarted after a pause
	PGTerminate Kind = "pg_terminate_backend" // every backend of the services' database
	MySQLKill   Kind = "mysql KILL"           // every session of the services' MySQL account
	RedisPause  Kind = "redis CLIENT PAUSE"   // CLIENT PAUSE <ms> ALL, short: it pauses every client of the server
	BrokerKill  Kind = "kill -9 broker"       // SIGKILL of the broker process, restarted on its data
	InboxLock   Kind = "inbox LOCK TABLES"    // another session holding LOCK TABLES cminmsgs WRITE
)

// ShortKinds lists the short faults in the summary's order.
var ShortKinds = []Kind{KillService, PGTerminate, MySQLKill, RedisPause, BrokerKill, InboxLock}

// longKind names the long outage of a dependency.
func longKind(d Dep) Kind { return Kind("long outage " + string(d)) }

// dependsOn is the dependency a short fault takes down (none for a process kill); a short
// fault of a dependency in a long outage is skipped, it could only shorten or blur the outage.
var dependsOn = map[Kind]Dep{PGTerminate: DepPG, MySQLKill: DepInbox, RedisPause: DepRedis, BrokerKill: DepKafka, InboxLock: DepInbox}

// weights of the short faults after every kind had its turn.
var weights = map[Kind]int{KillService: 3, PGTerminate: 2, MySQLKill: 2, RedisPause: 1, BrokerKill: 2, InboxLock: 2}

// redisPauseEvery spaces the Redis pauses: CLIENT PAUSE stops every client of the server, so the
// harness pauses rarely and briefly even on a server of its own.
const redisPauseEvery = 15 * time.Second

// tally counts the faults of one kind.
type tally struct {
	n, failed int
	units     int           // backends terminated, connections killed
	down      time.Duration // total time the thing was down, paused or locked
	targets   map[string]int
	lastErr   error
	// work is, for a long outage, the most that was waiting on the dependency as it began or
	// shortly before it ended (unfinished messages for the inbox and Redis, pending events
	// for the broker); -1 where nothing is sampled.
	work int
}

// injector applies faults to the chaos stack and restores them.
type injector struct {
	logf     func(format string, args ...any)
	services []string
	sup      *supervisor
	restart  func(name string) error // starts a service or the broker again (and waits for the broker)
	stop     func(name string, crash bool)

	pg       *pgxpool.Pool // the services' database, as the harness
	pgAdmin  *pgxpool.Pool // the maintenance database of the services' server
	pgDB     string        // the services' database
	lockDB   *sql.DB       // admin on the inbox database, no idle connections (a closed connection releases its table lock)
	myAdmin  *sql.DB       // admin on the inbox database, for KILL
	myUser   string        // the services' MySQL account
	redis    *redis.Client // admin
	ha       *redisHA      // Redis under Sentinel, nil for one server
	pgha     *pgHA         // PostgreSQL replicated, nil for one server
	redisACL string        // the services' Redis user

	mu        sync.Mutex
	counts    map[Kind]*tally
	long      map[Dep]bool // dependencies in a long outage now
	open      int          // late-arrival inserts held open now
	lastPause time.Time
	brokerMu  sync.Mutex // one broker kill at a time
	// brokerKills counts the broker's SIGKILLs, short faults and long outage alike, whether or
	// not its restart then succeeded.
	brokerKills int
	// kc is set on a cluster: its faults take the place of the broker's (cluster.go).
	kc *clusterFaults
}

func (in *injector) count(k Kind) *tally {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.counts[k] == nil {
		in.counts[k] = &tally{targets: map[string]int{}, work: -1}
	}
	return in.counts[k]
}

func (in *injector) record(k Kind, target string, units int, down time.Duration, err error) {
	t := in.count(k)
	in.mu.Lock()
	defer in.mu.Unlock()
	if err != nil {
		t.failed++
		t.lastErr = err
		in.logf("%s FAILED: %v", k, err)
		return
	}
	t.n++
	t.units += units
	t.down += down
	if target != "" {
		t.targets[target]++
	}
}

func (in *injector) inLong(d Dep) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.long[d]
}

func (in *injector) setLong(d Dep, on bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.long[d] = on
}

// holding counts a late-arrival insert held open (on) or committed (off). LOCK TABLES waits
// for an open transaction on the table, and every statement on it queues behind the waiting
// lock: the inbox lock is held back meanwhile, or it would fail after lock_wait_timeout and
// stall discovery all that time.
func (in *injector) holding(on bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if on {
		in.open++
	} else {
		in.open--
	}
}

// pumpSpared reports whether a long outage that the pump meets is on: the inbox or Redis.
// Then the pump is left alone. An interrupted attempt is not counted (docs/pump.md), so a
// kill or a terminated lock connection would stretch the pump's budget past the outage.
func (in *injector) pumpSpared() bool { return in.inLong(DepInbox) || in.inLong(DepRedis) }

// blocked reports whether k cannot run now.
func (in *injector) blocked(k Kind) bool {
	if d, ok := dependsOn[k]; ok && in.inLong(d) {
		return true
	}
	if k == PGTerminate && (in.pumpSpared() || in.pgFailingOver()) {
		return true
	}
	if k == InboxLock {
		in.mu.Lock()
		open := in.open
		in.mu.Unlock()
		if open > 0 {
			return true
		}
	}
	if k == RedisPause && in.failingOver() {
		return true
	}
	if k == RedisPause {
		in.mu.Lock()
		defer in.mu.Unlock()
		return !in.lastPause.IsZero() && time.Since(in.lastPause) < redisPauseEvery
	}
	return false
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// shortFaults injects short faults one after another until ctx ends: first every kind once
// in a shuffled order, then kinds drawn by weight, with 1.5–4 s between them.
func (in *injector) shortFaults(ctx context.Context, r *rand.Rand) {
	todo := slices.Clone(in.kinds())
	r.Shuffle(len(todo), func(i, j int) { todo[i], todo[j] = todo[j], todo[i] })
	if !clock.Sleep(ctx, 2*time.Second) {
		return
	}
	for ctx.Err() == nil {
		k, ok := in.next(r, &todo)
		if ok {
			in.short(ctx, r, k)
		}
		if !clock.Sleep(ctx, between(r, 1500*time.Millisecond, 4*time.Second)) {
			return
		}
	}
}

// next picks the next short fault: the first kind still owed its first turn that can run
// now, else one drawn by weight among those that can.
func (in *injector) next(r *rand.Rand, todo *[]Kind) (Kind, bool) {
	for i, k := range *todo {
		if !in.blocked(k) {
			*todo = slices.Delete(*todo, i, i+1)
			return k, true
		}
	}
	var pool []Kind
	for _, k := range in.kinds() {
		if !in.blocked(k) {
			for range weights[k] {
				pool = append(pool, k)
			}
		}
	}
	if len(pool) == 0 {
		return "", false
	}
	return pool[r.IntN(len(pool))], true
}

// killBroker kills the broker with SIGKILL and counts the kill.
func (in *injector) killBroker() {
	in.stop(brokerName, true)
	in.mu.Lock()
	in.brokerKills++
	in.mu.Unlock()
}

// short runs one short fault to its end, restoring what it broke.
func (in *injector) short(ctx context.Context, r *rand.Rand, k Kind) {
	began := time.Now()
	switch k {
	case KillService:
		pool := in.services
		if in.pumpSpared() {
			pool = slices.DeleteFunc(slices.Clone(pool), func(s string) bool { return s == "pump" })
		}
		svc := pool[r.IntN(len(pool))]
		down := between(r, 200*time.Millisecond, 3*time.Second)
		if !in.sup.hold(svc) {
			return // a long outage has it down already
		}
		in.logf("kill -9 %s, restarted after %s", svc, down.Round(time.Millisecond))
		in.stop(svc, true)
		clock.Sleep(ctx, down)
		err := in.restart(svc)
		in.sup.release(svc)
		in.record(k, svc, 1, down, err)
	case PGTerminate:
		n, err := in.terminate(ctx, false)
		in.logf("pg_terminate_backend: %d backends of the services", n)
		in.record(k, "", n, 0, err)
	case MySQLKill:
		n, err := in.killMySQL(ctx)
		in.logf("mysql KILL: %d connections of %s", n, in.myUser)
		in.record(k, "", n, 0, err)
	case RedisPause:
		d := between(r, 300*time.Millisecond, in.maxPause())
		in.mu.Lock()
		in.lastPause = time.Now()
		in.mu.Unlock()
		in.logf("redis CLIENT PAUSE %d ALL", d.Milliseconds())
		err := in.redis.Do(ctx, "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err()
		clock.Sleep(ctx, d)
		in.record(k, "", 0, d, err)
	case BrokerKill:
		if !in.brokerMu.TryLock() {
			return
		}
		defer in.brokerMu.Unlock()
		down := between(r, time.Second, 5*time.Second)
		in.logf("kill -9 broker, restarted after %s", down.Round(time.Millisecond))
		in.killBroker()
		clock.Sleep(ctx, down)
		// The broker's own start (a JVM, its log recovery) adds to the pause: the down time
		// counted is until it answers again.
		err := in.restart(brokerName)
		in.record(k, "", 1, time.Since(began), err)
	case LeaderKill, CoordinatorKill:
		in.killNode(ctx, r, k)
	case InboxLock:
		d := between(r, time.Second, 4*time.Second)
		in.logf("LOCK TABLES cminmsgs WRITE for %s", d.Round(time.Millisecond))
		held, err := in.lockInbox(ctx, d, "", nil)
		in.record(k, "", 0, held, err)
	}
}

// outage keeps dep down for d (or until ctx ends) and brings it back.
func (in *injector) outage(ctx context.Context, dep Dep, d time.Duration) {
	k := longKind(dep)
	in.setLong(dep, true)
	defer in.setLong(dep, false)
	began := time.Now()
	var err error
	switch dep {
	case DepInbox:
		// LOCK TABLES stops upstream's inserts and ingest's reads as well as the pump's. A
		// pump that had just drained its queue would sit the outage out idle and prove
		// nothing, so the pump is killed until ingest has enqueued work, and restarted into
		// the locked inbox with a head to read.
		in.logf("long outage of the inbox: pump killed until work is queued, then LOCK TABLES cminmsgs WRITE for %s", d)
		// A short kill holds the pump for at most a few seconds.
		held := in.sup.holdWait("pump", 10*time.Second)
		if held {
			in.stop("pump", true)
			in.awaitWork(ctx, 20*time.Second)
		}
		restart := func() {
			if !held {
				return
			}
			held = false
			if err := in.restart("pump"); err != nil {
				in.logf("restarting the pump into the locked inbox FAILED: %v", err)
			}
			in.sup.release("pump")
		}
		var locked time.Duration
		locked, err = in.lockInbox(ctx, d, dep, restart)
		restart() // the lock failed before it ran: the pump comes back all the same
		in.logf("%s over after %s", k, locked.Round(time.Millisecond))
		in.record(k, "", 1, locked, err)
		return
	case DepRedis:
		in.logf("long outage of Redis: user %s off and its connections killed for %s", in.redisACL, d)
		err = in.redisOff(ctx, d)
	case DepPG:
		in.logf("long outage of PostgreSQL: database %s refuses connections, its backends terminated, for %s", in.pgDB, d)
		err = in.pgOff(ctx, d)
	case DepKafka:
		in.brokerMu.Lock()
		defer in.brokerMu.Unlock()
		if in.kc != nil {
			err = in.twoDown(ctx, d)
			break
		}
		in.logf("long outage of the broker: killed (SIGKILL) for %s", d)
		in.killBroker()
		in.waitOut(ctx, dep, d)
		err = in.restart(brokerName)
	}
	in.logf("%s over after %s", k, time.Since(began).Round(time.Millisecond))
	in.record(k, "", 1, time.Since(began), err)
}

// sampleBefore is how long before a long outage ends the harness looks at the work waiting.
const sampleBefore = 2 * time.Second

// waitOut waits d (or until ctx ends) and records, as it begins and shortly before the end,
// the work waiting on dep: the faults check wants every long outage to have met messages, not
// an idle stack. Work queued before an outage can be gone by its end (a message the outage
// made DEAD), work that arrives during it is not there at its start: the larger count counts.
func (in *injector) waitOut(ctx context.Context, dep Dep, d time.Duration) {
	in.sampleWork(ctx, dep)
	if d > sampleBefore && clock.Sleep(ctx, d-sampleBefore) {
		in.sampleWork(ctx, dep)
		d = sampleBefore
	}
	clock.Sleep(ctx, d)
}

// sampleWork counts what waits on dep: unfinished messages for the inbox and Redis, pending
// events for the broker. PostgreSQL is itself what the count needs, and is not sampled.
func (in *injector) sampleWork(ctx context.Context, dep Dep) {
	q := `SELECT count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED')`
	switch dep {
	case DepKafka:
		q = `SELECT count(*) FROM msg_event WHERE state = 'PENDING'`
	case DepPG:
		return
	}
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	var n int
	if err := in.pg.QueryRow(ctx, q).Scan(&n); err != nil {
		in.logf("counting the work waiting on %s: %v", dep, err)
		return
	}
	t := in.count(longKind(dep))
	in.mu.Lock()
	t.work = max(t.work, n)
	in.mu.Unlock()
	in.logf("%s: %d waiting", longKind(dep), n)
}

// awaitWork waits, at most d, until the queue holds a few unfinished messages.
func (in *injector) awaitWork(ctx context.Context, d time.Duration) {
	const want = 3
	if in.awaitUnfinished(ctx, want, d) >= want || ctx.Err() != nil {
		return
	}
	in.logf("fewer than %d messages queued after %s; the inbox outage starts anyway", want, d)
}

// restoreTimeout bounds every statement that undoes a fault; it runs under
// context.WithoutCancel so that a cancelled run still restores.
const restoreTimeout = 10 * time.Second

func restoreCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
}

// terminate ends the backends of the services' database: all of them during an outage,
// otherwise all but the harness's own (application_name msgx-chaos).
func (in *injector) terminate(ctx context.Context, all bool) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	var n int
	err := in.pgAdmin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid() AND ($2 OR coalesce(application_name, '') <> $3)`,
		in.pgDB, all, harnessApp).Scan(&n)
	return n, err
}

// pgOff makes the services' database refuse connections and ends every backend on it for d.
func (in *injector) pgOff(ctx context.Context, d time.Duration) error {
	ident := pgx.Identifier{in.pgDB}.Sanitize()
	actx, cancel := context.WithTimeout(ctx, restoreTimeout)
	_, err := in.pgAdmin.Exec(actx, "ALTER DATABASE "+ident+" WITH ALLOW_CONNECTIONS false")
	cancel()
	defer func() {
		rctx, cancel := restoreCtx(ctx)
		defer cancel()
		if _, err := in.pgAdmin.Exec(rctx, "ALTER DATABASE "+ident+" WITH ALLOW_CONNECTIONS true"); err != nil {
			in.logf("restoring ALLOW_CONNECTIONS on %s FAILED: %v", in.pgDB, err)
		}
	}()
	if err != nil {
		return err
	}
	end := time.Now().Add(d)
	// A connection that was being set up when the database stopped accepting new ones can
	// still finish; ending the backends every second keeps the outage whole.
	for time.Now().Before(end) {
		if _, err := in.terminate(ctx, true); err != nil && ctx.Err() == nil {
			in.logf("terminating backends during the outage: %v", err)
		}
		if !clock.Sleep(ctx, min(time.Second, time.Until(end))) {
			break
		}
	}
	return nil
}

// killMySQL kills every session of the services' MySQL account.
func (in *injector) killMySQL(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	rows, err := in.myAdmin.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?`, in.myUser)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		// A session that ended in the meantime is what we wanted anyway.
		if _, err := in.myAdmin.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err == nil {
			n++
		}
	}
	return n, nil
}

// lockInbox holds LOCK TABLES cminmsgs WRITE on its own session for d and returns how long
// the lock was held. Every other session's statement on the table waits meanwhile, as on an
// inbox whose table is locked by a DBA's maintenance. locked runs once the lock is held; for
// a long outage (dep set) the work waiting is sampled before the end.
func (in *injector) lockInbox(ctx context.Context, d time.Duration, dep Dep, locked func()) (time.Duration, error) {
	cctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	conn, err := in.lockDB.Conn(cctx)
	cancel()
	if err != nil {
		return 0, err
	}
	// lockDB keeps no idle connections, so closing this one ends the session and with it the
	// lock even if UNLOCK TABLES failed.
	defer conn.Close()
	// The lock waits for open transactions on the table (a late commit, a marker write);
	// bounded, so a lock that cannot be had is a failed fault, not a stuck harness. A try that
	// times out names the sessions whose transactions it waited for, and the lock is tried
	// again: one make chaos run under load failed the long inbox outage so, with nothing in its
	// log to say what held the table.
	const tries = 3
	for try := 1; ; try++ {
		err := lockTables(ctx, conn)
		if err == nil {
			break
		}
		in.logf("LOCK TABLES cminmsgs WRITE, try %d of %d: %v; open transactions: %s", try, tries, err, in.openTransactions(ctx))
		if try == tries || ctx.Err() != nil {
			return 0, err
		}
	}
	began := time.Now()
	if locked != nil {
		locked()
	}
	if dep != "" {
		in.waitOut(ctx, dep, d)
	} else {
		clock.Sleep(ctx, d)
	}
	rctx, rcancel := restoreCtx(ctx)
	defer rcancel()
	if _, err := conn.ExecContext(rctx, "UNLOCK TABLES"); err != nil {
		return time.Since(began), fmt.Errorf("unlock tables: %w", err)
	}
	return time.Since(began), nil
}

// lockTables takes LOCK TABLES cminmsgs WRITE on conn, waiting at most 10 s for the
// transactions that hold the table.
func lockTables(ctx context.Context, conn *sql.Conn) error {
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(lctx, "SET SESSION lock_wait_timeout = 10"); err != nil {
		return err
	}
	_, err := conn.ExecContext(lctx, "LOCK TABLES cminmsgs WRITE")
	return err
}

// openTransactions describes the server's sessions that have a transaction open, for the log.
func (in *injector) openTransactions(ctx context.Context) string {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := in.lockDB.QueryContext(qctx, `SELECT p.ID, p.USER, p.COMMAND, p.TIME, COALESCE(p.STATE, ''),
			x.trx_state, TIMESTAMPDIFF(SECOND, x.trx_started, NOW()), x.trx_rows_locked, x.trx_rows_modified,
			COALESCE(LEFT(x.trx_query, 80), '')
		FROM information_schema.INNODB_TRX x JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, secs, age, locked, modified int64
		var user, command, state, trx, query string
		if err := rows.Scan(&id, &user, &command, &secs, &state, &trx, &age, &locked, &modified, &query); err != nil {
			return err.Error()
		}
		out = append(out, fmt.Sprintf("[thread %d %s %s %ds %q, transaction %s for %ds, %d rows locked, %d modified, %q]",
			id, user, command, secs, state, trx, age, locked, modified, query))
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

// redisOff switches the services' Redis user off and kills its connections for d: Redis is
// gone for the services and nobody else.
func (in *injector) redisOff(ctx context.Context, d time.Duration) error {
	actx, cancel := context.WithTimeout(ctx, restoreTimeout)
	err := in.redisUser(actx, false)
	cancel()
	defer func() {
		rctx, cancel := restoreCtx(ctx)
		defer cancel()
		if err := in.redisUser(rctx, true); err != nil {
			in.logf("switching Redis user %s back on FAILED: %v", in.redisACL, err)
		}
	}()
	if err != nil {
		return err
	}
	end := time.Now().Add(d)
	in.sampleWork(ctx, DepRedis)
	sampled := false
	for time.Now().Before(end) {
		if !sampled && time.Until(end) <= sampleBefore {
			in.sampleWork(ctx, DepRedis)
			sampled = true
		}
		kctx, cancel := context.WithTimeout(ctx, restoreTimeout)
		err := in.redisEach(kctx, "CLIENT", "KILL", "USER", in.redisACL)
		cancel()
		// "No such user" only means no connection of it is open.
		if err != nil && ctx.Err() == nil && !errors.Is(err, redis.Nil) && !isNoSuchClient(err) {
			in.logf("killing the services' Redis connections: %v", err)
		}
		if !clock.Sleep(ctx, min(time.Second, time.Until(end))) {
			break
		}
	}
	return nil
}

func isNoSuchClient(err error) bool {
	return err != nil && (containsAny(err.Error(), "No such user", "No such client"))
}
