package leader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/pgfence"
	"github.com/msgexchange/msgexchange/pkg/secret"
)

// ErrLost is the cause of a work context cancelled because the lock is no longer held, and is
// wrapped by Session errors once the lock connection is gone or the term has ended.
var ErrLost = errors.New("leader: lock lost")

// errTermOver cancels the term's context once work has returned; work never sees it.
var errTermOver = errors.New("leader: term over")

const (
	defaultInterval = time.Second
	minLease        = 2 * time.Second
	connectTimeout  = 10 * time.Second
)

// Config configures an Elector. Zero values mean the defaults.
type Config struct {
	DSN           string
	Role          Role                  // one of Roles
	Instance      string                // human-readable instance id; default host-pid
	Clock         clock.Clock           // default clock.Real
	Logger        *slog.Logger          // default slog.Default()
	Registerer    prometheus.Registerer // may be nil; gauge msgx_leader_active{role}, counter msgx_leader_acquired_total{role}
	RetryInterval time.Duration         // standby poll, default 1s
	CheckInterval time.Duration         // holder's connection check, default 1s
}

// Elector runs one instance's candidacy for one role.
type Elector struct {
	cfg Config
	key int64
	// lease is the lock session's idle timeouts: how long PostgreSQL keeps the lock of a holder
	// that stopped talking. checkTimeout bounds one check, and the cancel request after it.
	lease        time.Duration
	checkTimeout time.Duration
	log          *slog.Logger

	activeGauge     prometheus.Gauge
	acquiredCounter prometheus.Counter

	running atomic.Bool
	mu      sync.Mutex
	cur     *Session // the held term, nil while standing by
}

// New returns an elector. It panics when DSN is empty or Role is not one of Roles: that is a
// wiring mistake, not a condition to handle at run time.
func New(cfg Config) *Elector {
	if cfg.DSN == "" || !cfg.Role.Known() {
		panic(fmt.Sprintf("leader: Config.DSN is required and Config.Role must be one of leader.Roles (got %q)", cfg.Role))
	}
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = cmp.Or(host, "unknown") + "-" + strconv.Itoa(os.Getpid())
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.RetryInterval = cmp.Or(cfg.RetryInterval, defaultInterval)
	cfg.CheckInterval = cmp.Or(cfg.CheckInterval, defaultInterval)

	e := &Elector{
		cfg:   cfg,
		key:   Key(cfg.Role),
		lease: max(10*cfg.CheckInterval, minLease),
		log:   cfg.Logger.With("role", cfg.Role, "instance", cfg.Instance),
	}
	e.checkTimeout = e.lease / 4
	e.activeGauge, e.acquiredCounter = e.metrics(cfg.Registerer)
	return e
}

// Run stands by until it holds the lock, runs work for the term, and repeats until ctx ends.
//
// work's context is cancelled when the lock is lost (cause ErrLost) or ctx ends (ctx's cause).
// Run waits for work to return before it releases the lock: a work that ignores its context
// keeps the term open, though its fenced writes fail once the lock is lost. When work returns
// an error it is logged and the term resigned; when it returns nil before ctx ends the term is
// resigned too. Either way the elector stands by again after RetryInterval, which gives another
// replica the chance to take over.
//
// Run returns nil when ctx is done, and an error only when it cannot start: the DSN does not
// parse, or Run is already running on this elector.
func (e *Elector) Run(ctx context.Context, work func(ctx context.Context, s *Session) error) error {
	if work == nil {
		return errors.New("leader: Run needs a work function")
	}
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("leader: Run is already running on this elector")
	}
	defer e.running.Store(false)
	connCfg, err := e.connConfig()
	if err != nil {
		return err
	}
	for {
		conn := e.standby(ctx, connCfg)
		if conn == nil {
			return nil
		}
		e.hold(ctx, conn, work)
		if !clock.Sleep(ctx, e.cfg.RetryInterval) {
			return nil
		}
	}
}

func (e *Elector) connConfig() (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(e.cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("leader: parse dsn: %w", secret.ParseError(e.cfg.DSN, err, func(s string) error {
			_, err := pgx.ParseConfig(s)
			return err
		}))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	// A role is never taken on an old primary that came back after a failover (D-21).
	pgfence.Apply(&cfg.Config)
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		// Operators find the lock connections in pg_stat_activity by this name.
		name := "msgx-leader " + string(e.cfg.Role) + " " + e.cfg.Instance
		cfg.RuntimeParams["application_name"] = strings.ToValidUTF8(name[:min(len(name), 63)], "")
	}
	// pgx's default answer to a cancelled context is to cut the connection, which on this
	// connection means giving up the lock. A query timeout inside Session.Do, or a shutdown in
	// the middle of a transaction, should instead cancel the query and keep the term; only when
	// the cancel request gets no answer within checkTimeout is the connection cut.
	deadlineDelay := e.checkTimeout
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: deadlineDelay}
	}
	return cfg, nil
}

// standby polls for the lock until it has it (and returns the connection holding it) or ctx
// ends (nil). It keeps one connection across polls and replaces it when a poll fails.
func (e *Elector) standby(ctx context.Context, cfg *pgx.ConnConfig) *pgx.Conn {
	var (
		conn      *pgx.Conn
		failing   bool // log the first failure of a run of them, and the recovery
		announced bool
	)
	fail := func(op string, err error) {
		if !failing {
			e.log.Warn("leader: standby cannot reach the database; retrying", "op", op, "err", err)
		} else {
			e.log.Debug("leader: standby still cannot reach the database", "op", op, "err", err)
		}
		failing = true
	}
	for {
		if conn == nil {
			c, err := pgx.ConnectConfig(ctx, cfg.Copy())
			if err != nil && ctx.Err() == nil {
				fail("connect", err)
			}
			conn = c
		}
		if conn != nil {
			got, err := e.tryLock(ctx, conn)
			switch {
			case err != nil:
				// Close even when the server may have granted the lock as the call failed:
				// ending the session is what guarantees this instance does not hold it.
				e.closeConn(conn)
				conn = nil
				if ctx.Err() == nil {
					fail("pg_try_advisory_lock", err)
				}
			case got:
				if failing {
					e.log.Info("leader: database reachable again")
				}
				return conn
			default:
				if failing {
					e.log.Info("leader: database reachable again")
					failing = false
				}
				if !announced {
					e.log.Info("leader: standing by; another instance holds the role")
					announced = true
				}
			}
		}
		if !clock.Sleep(ctx, e.cfg.RetryInterval) {
			if conn != nil {
				e.closeConn(conn)
			}
			return nil
		}
	}
}

func (e *Elector) tryLock(ctx context.Context, conn *pgx.Conn) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, e.checkTimeout)
	defer cancel()
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", e.key).Scan(&got); err != nil {
		return false, fmt.Errorf("leader: try lock: %w", err)
	}
	return got, nil
}

// hold runs one term on conn, which holds the lock, and ends with the lock released and conn
// closed.
func (e *Elector) hold(ctx context.Context, conn *pgx.Conn, work func(context.Context, *Session) error) {
	termCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(errTermOver)
	s := &Session{
		role:         e.cfg.Role,
		conn:         conn,
		pid:          conn.PgConn().PID(),
		since:        e.cfg.Clock.Now(),
		sem:          make(chan struct{}, 1),
		checkTimeout: e.checkTimeout,
	}
	s.lose = func(err error) {
		cancel(err)
		e.leave(s)
	}
	log := e.log.With("pid", s.pid)

	prevHeartbeat, err := e.begin(termCtx, s)
	if err != nil {
		if ctx.Err() == nil { // otherwise this is only shutdown arriving with the lock
			log.Error("leader: cannot record the term; resigning", "err", err)
		}
		e.resign(s, log)
		return
	}
	e.mu.Lock()
	e.cur = s
	e.mu.Unlock()
	e.activeGauge.Set(1)
	e.acquiredCounter.Inc()
	log.Info("leader: acquired the role", "since", s.since)

	checked := make(chan struct{})
	go func() {
		defer close(checked)
		e.check(termCtx, s)
	}()

	var werr error
	if e.awaitPredecessor(termCtx, prevHeartbeat) {
		werr = work(termCtx, s)
	}
	cause := context.Cause(termCtx) // ErrLost, ctx's cause, or nil when work returned by itself
	cancel(errTermOver)
	<-checked
	e.leave(s)

	switch {
	case errors.Is(cause, ErrLost):
		log.Warn("leader: lost the role", "cause", cause, "work_err", werr)
		s.end(log)
		e.closeConn(conn)
	case werr != nil && ctx.Err() == nil:
		log.Error("leader: work failed; resigning", "err", werr)
		e.resign(s, log)
	case ctx.Err() != nil:
		log.Info("leader: stopping; resigning", "work_err", werr)
		e.resign(s, log)
	default:
		log.Info("leader: work returned; resigning")
		e.resign(s, log)
	}
}

// leave marks s as no longer held, once: from the checker or a failed Session call as soon as
// the loss is seen, or from hold at the end of the term. The comparison keeps a late call from
// an old session off a newer term.
func (e *Elector) leave(s *Session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == s {
		e.cur = nil
		e.activeGauge.Set(0)
	}
}

// begin sets the lock session's lease, reads when the previous holder last proved it was
// alive, and records this term. The previous heartbeat is zero when there was none.
func (e *Elector) begin(ctx context.Context, s *Session) (time.Time, error) {
	var prev time.Time
	err := s.Do(ctx, func(conn *pgx.Conn) error {
		ms := strconv.FormatInt(e.lease.Milliseconds(), 10)
		for _, set := range []string{
			"SET idle_session_timeout = " + ms,
			"SET idle_in_transaction_session_timeout = " + ms,
		} {
			if _, err := conn.Exec(ctx, set); err != nil {
				return fmt.Errorf("set lease: %w", err)
			}
		}
		err := conn.QueryRow(ctx, "SELECT heartbeat_at FROM role_holder WHERE role = $1", e.cfg.Role).Scan(&prev)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read previous holder: %w", err)
		}
		return e.heartbeat(ctx, conn, s)
	})
	return prev, err
}

// heartbeat upserts this term's role_holder row, but only while this session holds the lock:
// zero rows written means the lock is gone (someone ran pg_advisory_unlock on the connection).
func (e *Elector) heartbeat(ctx context.Context, conn *pgx.Conn, s *Session) error {
	tag, err := conn.Exec(ctx, `INSERT INTO role_holder (role, instance, backend_pid, since, heartbeat_at)
		SELECT $1, $2, pg_backend_pid(), $3, $4
		WHERE EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND pid = pg_backend_pid() AND classid = $5 AND objid = $6 AND objsubid = 1)
		ON CONFLICT (role) DO UPDATE SET instance = excluded.instance, backend_pid = excluded.backend_pid,
			since = excluded.since, heartbeat_at = excluded.heartbeat_at,
			-- A new term starts unblocked: a blocked mark of a dead holder would mislead.
			blocked_on = CASE WHEN role_holder.since = excluded.since AND role_holder.backend_pid = excluded.backend_pid
				THEN role_holder.blocked_on END,
			blocked_since = CASE WHEN role_holder.since = excluded.since AND role_holder.backend_pid = excluded.backend_pid
				THEN role_holder.blocked_since END`,
		e.cfg.Role, e.cfg.Instance, s.since, e.cfg.Clock.Now(), keyHigh(e.key), keyLow(e.key))
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errors.New("advisory lock is no longer held by this session")
	}
	return nil
}

// check proves the lock every CheckInterval until the term ends, and ends the term on the first
// failure.
func (e *Elector) check(ctx context.Context, s *Session) {
	t := time.NewTicker(e.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.Do(ctx, func(conn *pgx.Conn) error {
			ctx, cancel := context.WithTimeout(ctx, e.checkTimeout)
			defer cancel()
			return e.heartbeat(ctx, conn, s)
		})
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return // the term is ending anyway; the failure is ours, not the lock's
		}
		if !errors.Is(err, ErrLost) {
			err = fmt.Errorf("%w: check: %w", ErrLost, err)
		}
		// A check that timed out may have left the session alive and the lock held. Cut the
		// socket now rather than when work returns: the server then ends the session, which
		// releases the lock and fences any write the work still attempts.
		s.cut()
		s.lose(err)
		return
	}
}

// awaitPredecessor delays the new term's work until the previous holder must have noticed its
// loss (see the package documentation). It returns false when the term ends first.
func (e *Elector) awaitPredecessor(ctx context.Context, prevHeartbeat time.Time) bool {
	if prevHeartbeat.IsZero() {
		return true
	}
	window := 2 * e.cfg.CheckInterval
	wait := min(prevHeartbeat.Add(window).Sub(e.cfg.Clock.Now()), window)
	if wait <= 0 {
		return true
	}
	e.log.Debug("leader: waiting for the previous holder to stop", "wait", wait)
	return clock.Sleep(ctx, wait)
}

// resign ends the term on a connection that still works: unlock, then close. Closing alone would
// release the lock too; unlocking first makes the release explicit in the server's log and does
// not depend on how fast the backend exits.
func (e *Elector) resign(s *Session, log *slog.Logger) {
	s.end(log)
	if !s.conn.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), e.checkTimeout)
		defer cancel()
		var released bool
		if err := s.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", e.key).Scan(&released); err != nil {
			log.Warn("leader: unlock failed; closing the connection releases the lock", "err", err)
		} else if !released {
			log.Warn("leader: unlock found no lock held by this session")
		}
	}
	e.closeConn(s.conn)
}

func (e *Elector) closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), e.checkTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}

func (e *Elector) metrics(reg prometheus.Registerer) (prometheus.Gauge, prometheus.Counter) {
	active := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "msgx_leader_active",
		Help: "1 while this process holds the role's leader lock, else 0.",
	}, []string{"role"})
	acquired := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "msgx_leader_acquired_total",
		Help: "Terms this process has begun for the role (leader lock acquisitions).",
	}, []string{"role"})
	if reg != nil {
		var err error
		// Several electors in one process (one per role) share the metric families.
		if active, err = register(reg, active); err != nil {
			e.log.Warn("leader: cannot register metrics", "err", err)
		}
		if acquired, err = register(reg, acquired); err != nil {
			e.log.Warn("leader: cannot register metrics", "err", err)
		}
	}
	g := active.WithLabelValues(string(e.cfg.Role))
	g.Set(0)
	return g, acquired.WithLabelValues(string(e.cfg.Role))
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// pg_locks shows a bigint advisory key as classid (high 32 bits) and objid (low 32 bits).
func keyHigh(key int64) uint32 { return uint32(uint64(key) >> 32) }
func keyLow(key int64) uint32  { return uint32(uint64(key)) }
