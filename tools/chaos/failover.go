package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/clock"
)

// Failover is a dependency the run fails over to a standby under traffic (MSGX_CHAOS_FAILOVERS,
// docs/chaos.md, "Failovers"). Each one needs the HA shape of its dependency in the Target.
type Failover string

// FailoverRedis kills the Redis master under Sentinel with SIGKILL; the sentinels promote the
// replica, and the killed node comes back as a replica of the new master.
const FailoverRedis Failover = "redis"

// AllFailovers lists the failovers the harness can make, in the summary's order.
var AllFailovers = []Failover{FailoverRedis, FailoverPG}

// EnvFailovers names the failovers of a run: a comma-separated list of AllFailovers, "all" or
// "none" (the default, which make test runs; make chaos passes every one).
const EnvFailovers = "MSGX_CHAOS_FAILOVERS"

// ParseFailovers reads "all", "none" or a comma-separated list of failovers.
func ParseFailovers(s string) ([]Failover, error) { return parseList(s, AllFailovers, "failover") }

// Has reports whether the run makes failover f.
func (c Config) Has(f Failover) bool { return slices.Contains(c.Failovers, f) }

// SentinelTarget is the chaos stack's Redis under Sentinel (redistest.OwnSentinel): a master,
// its replica and the sentinels, which the services reach through redis.sentinel-*.
type SentinelTarget struct {
	Master string   // redis.sentinel-master
	Addrs  []string // redis.sentinel-addrs
	Nodes  SentinelNodes
}

// SentinelNodes are the data nodes under Sentinel, which the failover fault kills and brings
// back.
type SentinelNodes interface {
	// DataNodes lists every data node's address, alive or killed.
	DataNodes() []string
	// Kill kills the current master with SIGKILL and returns its address.
	Kill(ctx context.Context) (string, error)
	// AwaitFailover waits until the sentinels name a master other than old and it answers as
	// one, and returns it.
	AwaitFailover(ctx context.Context, old string) (string, error)
	// Rejoin starts the killed node at addr again, empty, as a replica of the current master,
	// and returns once the sentinels count it fit to promote.
	Rejoin(ctx context.Context, addr string) error
}

// The failover schedule: one Redis failover per failoverEvery of the window, at least one,
// failoverApart between them (the sentinels refuse to fail the same master over again within
// twice their failover-timeout, and the killed node must be back as a replica first), none in
// the first or last failoverEdge of the window, nor within minGap of a long outage of the
// inbox, Redis or PostgreSQL (failoverReach more before one): the pump is blocked on those,
// and a failover must meet the projection's writes. The broker's outage leaves the pump
// writing and is no obstacle.
const (
	failoverEvery = time.Minute
	failoverApart = 25 * time.Second
	failoverEdge  = 10 * time.Second
	// failoverPromote bounds the sentinels' promotion (down-after-milliseconds, then the
	// vote), failoverRejoin the killed node's start, full sync and the sentinels' view of it.
	failoverPromote = 45 * time.Second
	failoverRejoin  = time.Minute
	// failoverAwait bounds the wait for the pump to be projecting before the kill;
	// failoverReach is how far past its planned time a failover may run until the promotion.
	failoverAwait = 15 * time.Second
	failoverReach = failoverAwait + 5*time.Second
	// pauseUnderSentinel caps the CLIENT PAUSE fault under Sentinel: a master that answers no
	// PING for down-after-milliseconds (1 s in redistest) is failed over, which would be a
	// failover the plan did not make.
	pauseUnderSentinel = 700 * time.Millisecond
)

// planFailovers places the failovers of deps in the window, in the time the long outages leave
// free, evenly spread.
func planFailovers(window time.Duration, long []longSlot, deps []Failover) []time.Duration {
	if len(deps) == 0 {
		return nil
	}
	// The free intervals: the window's inside, less each blocking long outage and its gaps.
	type span struct{ from, to time.Duration }
	free := []span{{failoverEdge, window - failoverEdge}}
	for _, l := range long {
		if l.dep == DepKafka {
			continue
		}
		// A failover may wait failoverAwait for the pump, then the promotion follows the kill:
		// neither may run into the outage.
		from, to := l.at-minGap-failoverReach, l.at+l.dur+minGap
		var next []span
		for _, s := range free {
			if s.from < from {
				next = append(next, span{s.from, min(s.to, from)})
			}
			if s.to > to {
				next = append(next, span{max(s.from, to), s.to})
			}
		}
		free = next
	}
	var total time.Duration
	for _, s := range free {
		total += max(0, s.to-s.from)
	}
	// At least one of each kind (failoverKind takes them in turn), room permitting.
	n := max(len(deps), int(window/failoverEvery))
	// At evenly spaced points of the free time, then dropped where two come too close.
	var out []time.Duration
	for i := range n {
		at := total * time.Duration(2*i+1) / time.Duration(2*n)
		for _, s := range free {
			if d := s.to - s.from; at <= d {
				t := s.from + at
				if len(out) == 0 || t-out[len(out)-1] >= failoverApart {
					out = append(out, t)
				}
				break
			} else {
				at -= d
			}
		}
	}
	return out
}

// depFailover marks a planned failover among the long outages planOrder keeps the replays
// away from; it is no dependency of its own and never has an outage.
const depFailover Dep = "failover"

// failoverSlots is the first of the failovers at as a slot for planOrder: the check wants the
// pump to meet one failover (checkFailovers), and keeping the replays clear of every one would
// leave a run of several no room for a replay.
func failoverSlots(at []time.Duration) []longSlot {
	if len(at) == 0 {
		return nil
	}
	return []longSlot{{dep: depFailover, at: at[0], dur: failoverAwait}}
}

// redisHA is the harness's hold on Redis under Sentinel: a client per data node for what is
// not replicated (the services' ACL user), and the failovers made.
type redisHA struct {
	target  *SentinelTarget
	aclSpec []string // the services' user's ACL SETUSER rules, for a node that rejoins

	// userMu orders switching the services' user on or off with a node's rejoining, so that
	// a node never comes back with the user in another state than the others; off is that
	// state.
	userMu sync.Mutex
	off    bool

	mu      sync.Mutex
	clients map[string]*redis.Client
	down    map[string]bool // nodes killed and not back yet
	made    []failoverMade
	failing bool // a failover is under way: no CLIENT PAUSE meanwhile
}

// failoverMade is one failover as it happened.
type failoverMade struct {
	killed, promoted string
	promote          time.Duration // from the kill until the new master answered
	waiting          int           // unfinished messages at the kill or the promotion (-1: not sampled)
	pumpBlocked      bool          // the pump reported Redis blocked meanwhile: the failover met its writes
	rejoined         bool
	err              error
}

func (ha *redisHA) node(addr string) *redis.Client {
	ha.mu.Lock()
	defer ha.mu.Unlock()
	c := ha.clients[addr]
	if c == nil {
		c = redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2})
		ha.clients[addr] = c
	}
	return c
}

// each runs one command on every data node that is not down: ACL users live on each node
// alone, replication does not carry them.
func (ha *redisHA) each(ctx context.Context, args ...any) error {
	var errs []error
	for _, a := range ha.target.Nodes.DataNodes() {
		ha.mu.Lock()
		down := ha.down[a]
		ha.mu.Unlock()
		if down {
			continue
		}
		if err := ha.node(a).Do(ctx, args...).Err(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}

func (ha *redisHA) close() {
	ha.mu.Lock()
	defer ha.mu.Unlock()
	for _, c := range ha.clients {
		_ = c.Close()
	}
}

// aclRules are the services' Redis user's rules: their key prefix only, no dangerous command
// but INFO, which the backfill reads the server's run_id with to find a failover
// (docs/redis.md, "Sentinel").
func aclRules(prefix, pass string) []any {
	return []any{"reset", "on", ">" + pass, "~" + prefix + "*", "&*", "+@all", "-@dangerous", "+info"}
}

// openRedis connects the harness to the target's Redis as admin, creates the services' user on
// it (on every data node under Sentinel) and returns the services' Redis settings.
func (h *harness) openRedis(ctx context.Context, t Target, user, pass string) ([]string, error) {
	rules := aclRules(t.RedisPrefix, pass)
	if h.cfg.Has(FailoverRedis) && t.RedisSentinel == nil {
		return nil, errors.New("the Redis failover needs the chaos target's Redis under Sentinel (Target.RedisSentinel)")
	}
	if t.RedisSentinel == nil {
		ropts, err := redis.ParseURL(t.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		ropts.PoolSize = 3
		h.redis = redis.NewClient(ropts)
		sweepACLUsers(ctx, h.redis)
		if err := h.redis.Do(ctx, append([]any{"ACL", "SETUSER", user}, rules...)...).Err(); err != nil {
			return nil, fmt.Errorf("redis: create the services' user: %w", err)
		}
		u, err := url.Parse(t.RedisURL)
		if err != nil {
			return nil, err
		}
		u.User = url.UserPassword(user, pass)
		return []string{"MSGX_REDIS_URL=" + u.String()}, nil
	}
	s := t.RedisSentinel
	h.redis = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.Master, SentinelAddrs: s.Addrs, PoolSize: 3})
	h.ha = &redisHA{target: s, clients: map[string]*redis.Client{}, down: map[string]bool{}}
	for _, r := range rules {
		h.ha.aclSpec = append(h.ha.aclSpec, r.(string))
	}
	if err := h.ha.each(ctx, append([]any{"ACL", "SETUSER", user}, rules...)...); err != nil {
		return nil, fmt.Errorf("redis: create the services' user on every node: %w", err)
	}
	return []string{
		"MSGX_REDIS_SENTINEL_MASTER=" + s.Master,
		"MSGX_REDIS_SENTINEL_ADDRS=" + strings.Join(s.Addrs, ","),
		"MSGX_REDIS_SENTINEL_USERNAME=" + user,
		"MSGX_REDIS_SENTINEL_DATA_PASSWORD=" + pass,
	}, nil
}

// redisEach runs an admin command where the services' Redis user lives: the one server, or
// every live data node under Sentinel.
func (in *injector) redisEach(ctx context.Context, args ...any) error {
	if in.ha == nil {
		return in.redis.Do(ctx, args...).Err()
	}
	return in.ha.each(ctx, args...)
}

// redisUser switches the services' Redis user on or off where it lives.
func (in *injector) redisUser(ctx context.Context, on bool) error {
	state := "off"
	if on {
		state = "on"
	}
	if in.ha == nil {
		return in.redis.Do(ctx, "ACL", "SETUSER", in.redisACL, state).Err()
	}
	in.ha.userMu.Lock()
	defer in.ha.userMu.Unlock()
	in.ha.off = !on
	return in.ha.each(ctx, "ACL", "SETUSER", in.redisACL, state)
}

// failingOver reports whether a Redis failover is under way (the CLIENT PAUSE fault waits).
func (in *injector) failingOver() bool {
	if in.ha == nil {
		return false
	}
	in.ha.mu.Lock()
	defer in.ha.mu.Unlock()
	return in.ha.failing
}

// maxPause is the longest CLIENT PAUSE the run makes.
func (in *injector) maxPause() time.Duration {
	if in.ha != nil {
		return pauseUnderSentinel
	}
	return 1500 * time.Millisecond
}

// failovers makes the planned failovers at their offsets from the window's start until wctx
// ends; each runs to its end on ctx.
func (h *harness) failovers(wctx, ctx context.Context, at []time.Duration) {
	for i, a := range at {
		if !clock.Sleep(wctx, time.Until(h.start.Add(a))) {
			return
		}
		h.failover(ctx, i)
	}
}

// failoverRedis kills the master with SIGKILL, waits for the sentinels' promotion, and brings
// the killed node back as a replica with the services' user, so that the next failover finds
// a replica to promote.
func (in *injector) failoverRedis(ctx context.Context) {
	ha := in.ha
	ha.mu.Lock()
	ha.failing = true
	ha.mu.Unlock()
	defer func() {
		ha.mu.Lock()
		ha.failing = false
		ha.mu.Unlock()
	}()
	m := failoverMade{waiting: -1}
	in.awaitProjecting(ctx, failoverAwait)
	// A few messages unfinished at the kill keep the pump writing into the ~2 s without a
	// master; one or two are often done before it (a run's only failover met none).
	in.awaitUnfinished(ctx, 3, failoverAwait)
	defer func() {
		ha.mu.Lock()
		ha.made = append(ha.made, m)
		ha.mu.Unlock()
		if m.err != nil {
			in.logf("redis failover FAILED: %v", m.err)
		}
	}()
	kctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	killed, err := ha.target.Nodes.Kill(kctx)
	cancel()
	if err != nil {
		m.err = fmt.Errorf("kill -9 the master: %w", err)
		return
	}
	began := time.Now()
	m.killed = killed
	ha.mu.Lock()
	ha.down[killed] = true
	ha.mu.Unlock()
	in.logf("redis failover: kill -9 the master %s", killed)
	// Whether the failover met the projection's writes: the pump reports a Redis outage on its
	// role (blocked_on, what GetStatus shows) while the sentinels have no master for it.
	wctx, stopWatch := context.WithCancel(ctx)
	blocked := make(chan bool, 1)
	go func() { blocked <- in.watchPumpBlocked(wctx) }()
	count := func() {
		if n, err := in.unfinished(ctx); err == nil {
			m.waiting = max(m.waiting, n)
		}
	}
	count()
	pctx, cancel := context.WithTimeout(ctx, failoverPromote)
	m.promoted, err = ha.target.Nodes.AwaitFailover(pctx, killed)
	cancel()
	if err == nil {
		m.promote = time.Since(began)
		count()
		// The pump finds the new master at its next probe; its outage is over by then.
		clock.Sleep(ctx, 2*time.Second)
	}
	stopWatch()
	m.pumpBlocked = <-blocked
	if err != nil {
		m.err = err
		return
	}
	in.logf("redis failover: the sentinels promoted %s after %s; %d messages unfinished meanwhile, the pump blocked on Redis: %v",
		m.promoted, m.promote.Round(time.Millisecond), m.waiting, m.pumpBlocked)
	rctx, cancel := context.WithTimeout(ctx, failoverRejoin)
	defer cancel()
	if err := ha.target.Nodes.Rejoin(rctx, killed); err != nil {
		m.err = fmt.Errorf("bring %s back as a replica: %w", killed, err)
		return
	}
	// Back empty: the services' user, as it is now on the others (a node that rejoined during
	// the long Redis outage gets it switched off like them).
	ha.userMu.Lock()
	defer ha.userMu.Unlock()
	spec := slices.Clone(ha.aclSpec)
	if ha.off {
		spec = append(spec, "off")
	}
	args := append([]any{"ACL", "SETUSER", in.redisACL}, toAny(spec)...)
	if err := ha.node(killed).Do(rctx, args...).Err(); err != nil {
		m.err = fmt.Errorf("the services' user on %s: %w", killed, err)
		return
	}
	ha.mu.Lock()
	delete(ha.down, killed)
	ha.mu.Unlock()
	m.rejoined = true
	in.logf("redis failover: %s back as a replica of %s after %s", killed, m.promoted, time.Since(began).Round(time.Millisecond))
}

// awaitProjecting waits, at most d, until the pump is projecting: messages enqueued or one
// finished in the last 2 s, and none failing. A failover while no traffic comes (ingest down,
// the loader between bursts), or while the queue's head waits out the backoff of a failing
// message (a replay's held row, docs/chaos.md), would meet no projection write.
func (in *injector) awaitProjecting(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		qctx, cancel := context.WithTimeout(ctx, restoreTimeout)
		var pending, failed, recent int
		err := in.pg.QueryRow(qctx, `SELECT count(*) FILTER (WHERE state = 'PENDING'), count(*) FILTER (WHERE state = 'FAILED'),
			count(*) FILTER (WHERE finished_at > now() - interval '2 seconds') FROM proc_state`).Scan(&pending, &failed, &recent)
		cancel()
		if err == nil && pending+recent > 0 && failed == 0 {
			return
		}
		if !clock.Sleep(ctx, 200*time.Millisecond) {
			return
		}
	}
	in.logf("failover: the pump was not projecting within %s; the failover starts anyway", d)
}

// awaitUnfinished samples the unfinished messages (PENDING or FAILED) every 50 ms until there
// are at least n, at most d, and returns the last count (-1: never read). A failover is to
// meet the pump's work (the check "every planned failover made"), and between two of ingest's
// batches, or right after another fault killed the pump, there is none: the kill follows the
// sample at once.
func (in *injector) awaitUnfinished(ctx context.Context, n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	got := -1
	for {
		if c, err := in.unfinished(ctx); err == nil {
			got = c
		}
		if got >= n || !time.Now().Before(deadline) || !clock.Sleep(ctx, 50*time.Millisecond) {
			return got
		}
	}
}

// unfinished counts the messages not yet terminal (PENDING or FAILED).
func (in *injector) unfinished(ctx context.Context) (int, error) {
	qctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	var n int
	err := in.pg.QueryRow(qctx, `SELECT count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED')`).Scan(&n)
	return n, err
}

// watchPumpBlocked reports whether the pump's role showed Redis blocked before ctx ended.
func (in *injector) watchPumpBlocked(ctx context.Context) bool {
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		var on *string
		err := in.pg.QueryRow(qctx, `SELECT blocked_on FROM role_holder WHERE role = 'pump'`).Scan(&on)
		cancel()
		if err == nil && on != nil && *on == string(DepRedis) {
			return true
		}
		if !clock.Sleep(ctx, 100*time.Millisecond) {
			return false
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// FailoverReport is what the run's failovers did, for the summary.
type FailoverReport struct {
	Kind    Failover
	Planned int
	Made    int // killed, promoted and the killed node back as a replica
	Promote []time.Duration
	// PostgreSQL: from the kill until every role, and the pump's, was held on the new primary.
	Roles, PumpRole []time.Duration
	// Waiting is the most unfinished messages at a kill or a promotion; Met counts the
	// failovers the pump reported as a Redis outage: they met its projection writes. A
	// failover of an idle stack proves nothing.
	Waiting  int
	Met      int
	Failures []string
}

// failoverReports collects the failovers made against the plan.
func (h *harness) failoverReports(planned []time.Duration) []FailoverReport {
	if !h.cfg.Has(FailoverRedis) {
		return h.pgFailoverReports(planned)
	}
	r := FailoverReport{Kind: FailoverRedis, Planned: plannedOf(planned, h.cfg.Failovers, FailoverRedis)}
	if h.ha != nil {
		h.ha.mu.Lock()
		defer h.ha.mu.Unlock()
		for _, m := range h.ha.made {
			r.Waiting = max(r.Waiting, m.waiting)
			switch {
			case m.err != nil:
				r.Failures = append(r.Failures, short(m.err.Error()))
			case m.rejoined:
				r.Made++
				r.Promote = append(r.Promote, m.promote)
			}
			if m.pumpBlocked {
				r.Met++
			}
		}
	}
	return append([]FailoverReport{r}, h.pgFailoverReports(planned)...)
}

// printFailovers writes the summary's failover line.
func (r *Report) printFailovers(p func(format string, args ...any)) {
	if len(r.Failovers) == 0 {
		p("  failovers           none (%s)", EnvFailovers)
		return
	}
	for _, f := range r.Failovers {
		if f.Kind == FailoverPG {
			printPGFailover(p, f)
			continue
		}
		var took []string
		for _, d := range f.Promote {
			took = append(took, d.Round(100*time.Millisecond).String())
		}
		p("  failovers           %s %d of %d planned (kill -9 of the master under Sentinel, promoted after %s, the killed node back as a replica; %d met the pump's writes, up to %d messages unfinished)",
			f.Kind, f.Made, f.Planned, strings.Join(took, ", "), f.Met, f.Waiting)
	}
}

// CheckFailovers is the check the run adds when it makes failovers.
const CheckFailovers = "every planned failover made"

// checkFailovers passes when every planned failover happened to its end (the master killed, a
// replica promoted, the killed node back as a replica) and the pump met at least one of them
// as a Redis outage. What a failover may break is the other checks' business, which stay as
// they are: a failover changes nothing the run compares with the clean run.
func checkFailovers(reps []FailoverReport) []Check {
	if len(reps) == 0 {
		return nil
	}
	c := Check{Name: CheckFailovers, Pass: true}
	var parts, problems []string
	for _, f := range reps {
		met := "met by the pump as an outage"
		if f.Kind == FailoverPG {
			met = "met unfinished messages at the kill"
		}
		parts = append(parts, fmt.Sprintf("%d %s failovers, %d %s", f.Made, f.Kind, f.Met, met))
		switch {
		case f.Planned == 0:
			problems = append(problems, fmt.Sprintf("%s: no room for a failover in the window between the long outages (a longer %s)", f.Kind, EnvDuration))
		case f.Made < f.Planned:
			problems = append(problems, fmt.Sprintf("%s: %d of %d planned made (%s)", f.Kind, f.Made, f.Planned, strings.Join(f.Failures, "; ")))
		case f.Met == 0:
			problems = append(problems, fmt.Sprintf("%s: the pump met none of the %d failovers (up to %d messages unfinished): they proved nothing", f.Kind, f.Made, f.Waiting))
		}
	}
	c.Detail = strings.Join(parts, "; ")
	if len(problems) > 0 {
		c.Pass = false
		c.Detail = strings.Join(problems, "; ")
	}
	return []Check{c}
}
