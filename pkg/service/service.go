// Package service is the runtime every msgexchange binary shares: configuration, logger,
// clock, tracer, metrics registry, admin endpoints, the PostgreSQL pool and the role's
// election, built once in main and handed explicitly to the components (the archetype of
// river's baseservice). Main only wires; Run supervises the actors and stops them on SIGTERM
// within the configured shutdown timeout.
package service

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/msgexchange/msgexchange/pkg/admin"
	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/buildinfo"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/logging"
	"github.com/msgexchange/msgexchange/pkg/pgfence"
	"github.com/msgexchange/msgexchange/pkg/secret"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Base is what every component of a service is built from.
type Base struct {
	Role      leader.Role
	Config    config.Config
	Logger    *slog.Logger
	Clock     clock.Clock
	Registry  *prometheus.Registry
	Telemetry *telemetry.Telemetry
	Admin     *admin.Server
	// Pool serves reads and the writes that need no fencing; fenced writes go through the
	// role's leader.Session.
	Pool *pgxpool.Pool

	closers []func()
}

// Main runs a service binary: it answers --help and --version (and refuses any other argument)
// without reading the configuration, else builds the Base for role, calls run, and returns the
// process exit code. run wires the components and returns b.Run(ctx, actors...).
func Main(role leader.Role, run func(ctx context.Context, b *Base) error) int {
	if code, exit := ServiceCommand(string(role)).Args(os.Args[1:], os.Stdout, os.Stderr); exit {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Each service checks only the settings it reads; a role of no service (a test's) checks them all.
	svc, ok := config.ServiceNamed(string(role))
	if !ok {
		svc = config.AllServices
	}
	cfg, err := config.FromEnv(svc)
	// The logger masks every configured credential, so no error below can print one.
	logger := logging.New(os.Stdout, "msgx-"+string(role), cfg.Log.Level, cfg.SecretValues()...)
	aodb.RouteDriverLog(logger)
	if err != nil {
		logger.Error("configuration refused", "err", err)
		return ExitConfig
	}
	setMemoryLimit(logger)
	for _, d := range cfg.Deprecated {
		logger.Warn("configuration uses a renamed key; the old spelling is accepted for one release (docs/environment.md)", "key", d)
	}
	b, err := New(ctx, role, cfg, logger)
	if err != nil {
		logger.Error("start-up failed", "err", err)
		return exitCode(err)
	}
	defer b.Close()
	if err := run(ctx, b); err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("service failed", "err", err)
		return exitCode(err)
	}
	logger.Info("service stopped")
	return 0
}

// setMemoryLimit gives the Go heap a soft limit of 90 % of the container's memory limit (its
// cgroup's), so that near the limit the collector runs harder instead of the kernel killing
// the pod: a burst of garbage, such as answers refused at control's send budget, otherwise
// lets the heap grow to twice what is live before a collection (docs/operations.md,
// "Memory"). GOMEMLIMIT set by hand wins, and AUTOMEMLIMIT=off or a ratio changes it. The
// library reads cgroup v1 and v2 the way the runtime does not (Go 1.25 sizes GOMAXPROCS from
// the cgroup, never the memory limit). Outside a container, or without a limit, nothing is
// set.
func setMemoryLimit(logger *slog.Logger) {
	fromCgroup := func() (uint64, error) {
		limit, err := memlimit.FromCgroup()
		if errors.Is(err, memlimit.ErrNoCgroup) {
			return 0, memlimit.ErrNoLimit
		}
		return limit, err
	}
	_, _ = memlimit.Set(memlimit.WithProvider(fromCgroup), memlimit.WithLogger(logger.With("component", "memlimit")))
}

// exitCode is the process's exit code for the error that ended it.
func exitCode(err error) int {
	if errors.Is(err, ErrSettingsRefused) {
		return ExitSettingsRefused
	}
	return 1
}

// New connects the shared dependencies of a service.
func New(ctx context.Context, role leader.Role, cfg config.Config, logger *slog.Logger) (*Base, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildinfo.Collector())
	tel, err := telemetry.New(ctx, "msgx-"+string(role))
	if err != nil {
		return nil, err
	}
	if cfg.PG.DSN == "" {
		return nil, errors.New("no PostgreSQL connection: set " + config.EnvName("pg.dsn") + " (or " + config.EnvName("pg.dsn") + "_FILE)")
	}
	pcfg, err := pgxpool.ParseConfig(cfg.PG.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres pool (%s): %w", config.EnvName("pg.dsn"), secret.ParseError(cfg.PG.DSN, err, func(s string) error {
			_, err := pgxpool.ParseConfig(s)
			return err
		}))
	}
	// A fixed pool size (pg.max-conns) rather than pgx's CPU-count default, so a database's
	// max_connections can be planned: five services, their standbys, plus one lock connection
	// each.
	pcfg.MaxConns = int32(cfg.PG.MaxConns)
	// Never a write to an old primary that came back after a failover (D-21).
	pgfence.Apply(&pcfg.ConnConfig.Config)
	pgfence.Default.SetLogger(logger)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres pool: %w", secret.DSNError(cfg.PG.DSN, err))
	}
	if err := firstContact(ctx, logger, "PostgreSQL", config.EnvName("pg.dsn"), cfg.PG.DSN, 5*time.Second, pool.Ping, pgSettingsError); err != nil {
		pool.Close()
		return nil, err
	}
	b := &Base{
		Role:      role,
		Config:    cfg,
		Logger:    logger,
		Clock:     clock.Real{},
		Registry:  reg,
		Telemetry: tel,
		Admin:     admin.New(cfg.Admin.Addr, reg, logger),
		Pool:      pool,
	}
	b.Admin.AddCheck("postgres", func(ctx context.Context) error { return pool.Ping(ctx) })
	bi := buildinfo.Get()
	logger.Info("starting", "role", role, "instance", cfg.Instance, "version", bi.Version, "commit", bi.Commit)
	return b, nil
}

// Inbox opens the shared MySQL inbox with the configured call timeout, adds it to the
// readiness checks, and closes it with the Base.
func (b *Base) Inbox() (*aodb.Inbox, error) {
	in, err := aodb.Open(b.Config.MySQL.DSN, b.Config.Inbox.Timeout)
	if err != nil {
		return nil, err
	}
	if err := b.CheckInbox(in); err != nil {
		_ = in.Close()
		return nil, err
	}
	b.Admin.AddCheck("inbox", in.Ping)
	b.closers = append(b.closers, func() { _ = in.Close() })
	return in, nil
}

// Redis connects to the configured Redis (redis.url or redis.sentinel-*), adds it to the readiness checks, and closes it with the
// Base.
func (b *Base) Redis() (*redis.Client, error) {
	rdb, err := b.redis(true)
	if err != nil {
		return nil, err
	}
	b.Admin.AddCheck("redis", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, b.Config.Redis.Timeout)
		defer cancel()
		return rdb.Ping(ctx).Err()
	})
	return rdb, nil
}

// RedisOptional is Redis without the readiness check, for a service that only reports what
// Redis holds (control): a Redis outage must not take it out of its Service, since that is when
// operators need it. Nor do refused credentials stop it (the exception to R-START-2): they are
// logged naming the variable, and the answers that read Redis carry the refusal as their
// reason, as in an outage. A control that exited on them would crash-loop while a Redis user is
// switched off or its password rotates, when operators need it most.
func (b *Base) RedisOptional() (*redis.Client, error) { return b.redis(false) }

// redis connects to the configured Redis: a single server (redis.url) or a master found
// through Sentinel (redis.sentinel-*). A refusal of the settings at first contact stops a
// service that needs Redis (required) and is only logged for one that reports it.
func (b *Base) redis(required bool) (*redis.Client, error) {
	rdb, err := NewRedisClient(b.Config.Redis)
	if err != nil {
		return nil, err
	}
	env, dsn := config.EnvName("redis.url"), b.Config.Redis.URL
	if s := b.Config.Redis.Sentinel; s.Set() {
		// Names no secret: the passwords are settings of their own.
		env, dsn = config.EnvName("redis.sentinel-master"), s.Master
	}
	ping := func(ctx context.Context) error { return rdb.Ping(ctx).Err() }
	if err := firstContact(context.Background(), b.Logger, "Redis", env, dsn, b.Config.Redis.Timeout, ping, redisSettingsError); err != nil {
		if required {
			_ = rdb.Close()
			return nil, err
		}
		b.Logger.Error("Redis refused the settings; serving without what Redis holds until they are fixed", "err", err)
	}
	b.closers = append(b.closers, func() { _ = rdb.Close() })
	return rdb, nil
}

// NewRedisClient builds the client of the configured Redis without contacting it: go-redis's
// failover client when redis.sentinel-master is set (it asks the sentinels for the master and
// follows a failover on its own), else the client of redis.url. Both get the same bounds.
func NewRedisClient(rc config.Redis) (*redis.Client, error) {
	if s := rc.Sentinel; s.Set() {
		fo := &redis.FailoverOptions{
			MasterName:       s.Master,
			SentinelAddrs:    s.Addrs,
			SentinelPassword: s.SentinelPassword,
			Username:         s.Username,
			Password:         s.Password,
			DB:               s.DB,
		}
		if s.TLS {
			fo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		fo.ContextTimeoutEnabled = true
		fo.ReadTimeout, fo.WriteTimeout, fo.DialTimeout = rc.Timeout, rc.Timeout, rc.Timeout
		return redis.NewFailoverClient(fo), nil
	}
	if rc.URL == "" {
		return nil, errors.New("no Redis connection: set " + config.EnvName("redis.url") + " (or " + config.EnvName("redis.url") +
			"_FILE), or " + config.EnvName("redis.sentinel-master") + " and " + config.EnvName("redis.sentinel-addrs"))
	}
	opts, err := redis.ParseURL(rc.URL)
	if err != nil {
		// url.Parse quotes the whole URL, password included, in its error, and a piece of a
		// password it split at '/', '#', '?' or '%'.
		return nil, fmt.Errorf("redis url (%s): %w", config.EnvName("redis.url"), secret.ParseError(rc.URL, err, func(s string) error {
			_, err := redis.ParseURL(s)
			return err
		}))
	}
	// go-redis honours context deadlines only when asked to, and its socket timeouts come from
	// the URL: bound both by redis.timeout, so a Redis that stops answering never holds the
	// lock connection idle past its lease (the pump writes the projection inside its step).
	opts.ContextTimeoutEnabled = true
	opts.ReadTimeout = min(cmp.Or(opts.ReadTimeout, rc.Timeout), rc.Timeout)
	opts.WriteTimeout = min(cmp.Or(opts.WriteTimeout, rc.Timeout), rc.Timeout)
	opts.DialTimeout = min(cmp.Or(opts.DialTimeout, rc.Timeout), rc.Timeout)
	return redis.NewClient(opts), nil
}

// Close releases the connections and flushes spans.
func (b *Base) Close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Telemetry.Shutdown(ctx); err != nil {
		b.Logger.Warn("flushing spans failed", "err", err)
	}
	b.Pool.Close()
}

// Elector builds the role's single-active-instance election (R-LEADER-1).
func (b *Base) Elector() *leader.Elector {
	return leader.New(leader.Config{
		DSN:        b.Config.PG.DSN,
		Role:       b.Role,
		Instance:   b.Config.Instance,
		Clock:      b.Clock,
		Logger:     b.Logger,
		Registerer: b.Registry,
	})
}

// Actor is one long-running part of a service; it returns when ctx ends.
type Actor func(ctx context.Context) error

// Run runs the admin server and the actors until ctx ends or one of them fails, then gives
// the others the configured shutdown timeout to return.
func (b *Base) Run(ctx context.Context, actors ...Actor) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, a := range append([]Actor{b.Admin.Run}, actors...) {
		g.Go(func() error { return a(gctx) })
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		return ignoreStop(err)
	case <-gctx.Done():
		b.Logger.Info("shutting down", "timeout", b.Config.ShutdownTimeout)
	}
	select {
	case err := <-done:
		return ignoreStop(err)
	case <-time.After(b.Config.ShutdownTimeout):
		return fmt.Errorf("shutdown took longer than %s", b.Config.ShutdownTimeout)
	}
}

func ignoreStop(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
