// Package pgfence keeps a service's PostgreSQL connections off an old primary that came back
// after a failover (a zombie): a server that accepts writes on a timeline below the highest one
// the process has seen on the same cluster is refused (docs/decisions.md, D-21).
//
// PostgreSQL gives every promotion a new timeline, and a primary that is killed and later
// restarted on its own data recovers onto its old timeline and accepts writes again. pgx's
// target_session_attrs=read-write cannot tell it from the promoted standby; the timeline can.
// The check runs in pgconn's ValidateConnect, per host of a multi-host DSN, so a refused host
// makes pgx try the next one. A process that has seen no timeline of the cluster yet (its
// first connection) first asks every host of the DSN, so a service started after the zombie
// came back does not take it for the primary either.
package pgfence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrOldTimeline marks a server refused as an old primary.
var ErrOldTimeline = errors.New("pgfence: writable server on an old timeline (an old primary after a failover)")

// probeTimeout bounds the first connection's question to each host of the DSN when the DSN
// sets no connect_timeout.
const probeTimeout = 5 * time.Second

// Fence remembers the highest timeline seen per cluster (system identifier).
type Fence struct {
	mu      sync.Mutex
	highest map[string]int64 // system identifier ("" when the role cannot read it) → timeline
	logger  *slog.Logger
	refused map[string]bool // servers (address and timeline) whose refusal was logged
}

// SetLogger makes the fence log a failover it sees (a new timeline) and, once per server and
// timeline, a server it refuses: pgx goes on to the next host without a word, and the
// operator should learn that an old primary is back.
func (f *Fence) SetLogger(l *slog.Logger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logger = l
}

// Default is the process's fence: every connection of a service (pool, lock connection,
// listener, migration) checks against what any of them saw.
var Default = &Fence{}

// Apply installs Default on cfg (see Fence.Apply).
func Apply(cfg *pgconn.Config) { Default.Apply(cfg) }

// Apply makes every connection cfg opens, to each of its hosts, pass the fence after the
// checks cfg already has (target_session_attrs).
func (f *Fence) Apply(cfg *pgconn.Config) {
	prev := cfg.ValidateConnect
	hosts := hostsOf(cfg)
	cfg.ValidateConnect = func(ctx context.Context, conn *pgconn.PgConn) error {
		if prev != nil {
			if err := prev(ctx, conn); err != nil {
				return err
			}
		}
		return f.check(ctx, conn, cfg, hosts)
	}
}

// server is what the fence reads of a server.
type server struct {
	recovery bool
	sysid    string
	timeline int64
}

func (f *Fence) check(ctx context.Context, conn *pgconn.PgConn, cfg *pgconn.Config, hosts []host) error {
	s, err := read(ctx, conn)
	if err != nil {
		return fmt.Errorf("pgfence: read the server's timeline: %w", err)
	}
	if s.recovery {
		// A standby takes no writes; the statements that try fail as on any read-only server.
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.highest == nil {
		f.highest = map[string]int64{}
	}
	if _, seen := f.highest[s.sysid]; !seen && len(hosts) > 1 {
		// The first connection of the process to this cluster: a zombie listed before the
		// promoted server would otherwise set the mark. Ask every host; one that does not
		// answer is skipped (it may be the dead primary).
		for _, h := range hosts {
			if o, err := probe(ctx, cfg, h); err == nil && !o.recovery && o.sysid == s.sysid {
				f.highest[s.sysid] = max(f.highest[s.sysid], o.timeline)
			}
		}
	}
	addr := conn.Conn().RemoteAddr().String()
	high, seen := f.highest[s.sysid]
	if s.timeline < high {
		if k := addr + "/" + strconv.FormatInt(s.timeline, 10); f.logger != nil && !f.refused[k] {
			if f.refused == nil {
				f.refused = map[string]bool{}
			}
			f.refused[k] = true
			f.logger.Error("PostgreSQL: refusing a writable server on an old timeline: an old primary is back after a failover and must be rebuilt as a standby (docs/runbooks.md, PostgreSQL failover)",
				"server", addr, "timeline", s.timeline, "current_timeline", high)
		}
		return fmt.Errorf("%w: %s writes on timeline %d, this process has seen timeline %d of the same cluster",
			ErrOldTimeline, addr, s.timeline, high)
	}
	if seen && s.timeline > high && f.logger != nil {
		f.logger.Warn("PostgreSQL failed over: the writable server is on a new timeline; after an asynchronous failover check for a contract violation (docs/runbooks.md, PostgreSQL failover)",
			"server", addr, "timeline", s.timeline, "previous_timeline", high)
	}
	f.highest[s.sysid] = s.timeline
	return nil
}

// read asks a server whether it is in recovery and, if not, its timeline and system
// identifier. The timeline is that of the WAL file being written: pg_control_checkpoint()
// would name the last checkpoint's, which after a promotion is still the old one until the
// requested checkpoint ends. The system identifier needs pg_control_system(), which a cloud
// service may withhold: without it the timeline alone is compared.
func read(ctx context.Context, conn *pgconn.PgConn) (server, error) {
	var s server
	rows, err := conn.Exec(ctx, `SELECT pg_is_in_recovery(), has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE')`).ReadAll()
	if err != nil {
		return s, err
	}
	if len(rows) != 1 || len(rows[0].Rows) != 1 {
		return s, errors.New("no answer")
	}
	s.recovery = string(rows[0].Rows[0][0]) == "t"
	if s.recovery {
		return s, nil
	}
	q := `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint, ''`
	if string(rows[0].Rows[0][1]) == "t" {
		q = `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint, system_identifier::text FROM pg_control_system()`
	}
	rows, err = conn.Exec(ctx, q).ReadAll()
	if err != nil {
		return s, err
	}
	if len(rows) != 1 || len(rows[0].Rows) != 1 {
		return s, errors.New("no answer")
	}
	if s.timeline, err = strconv.ParseInt(string(rows[0].Rows[0][0]), 10, 64); err != nil {
		return s, err
	}
	s.sysid = string(rows[0].Rows[0][1])
	return s, nil
}

// host is one server of a DSN: the ways pgx would reach it, in order (for sslmode=prefer,
// with TLS then without).
type host []*pgconn.FallbackConfig

// hostsOf lists the distinct servers of cfg in the DSN's order.
func hostsOf(cfg *pgconn.Config) []host {
	index := map[string]int{}
	var out []host
	for _, fb := range append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...) {
		k := net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port)))
		if i, ok := index[k]; ok {
			out[i] = append(out[i], fb)
			continue
		}
		index[k] = len(out)
		out = append(out, host{fb})
	}
	return out
}

// probe connects to one server with cfg's credentials and none of its checks, and reads it.
// It has a deadline of its own (connect_timeout, else probeTimeout), not the caller's: the
// caller's is the connection's being validated, which a dead host must not use up.
func probe(ctx context.Context, cfg *pgconn.Config, h host) (server, error) {
	c := cfg.Copy()
	c.Host, c.Port, c.TLSConfig = h[0].Host, h[0].Port, h[0].TLSConfig
	c.Fallbacks, c.ValidateConnect, c.AfterConnect = h[1:], nil, nil
	timeout := c.ConnectTimeout
	if timeout == 0 {
		timeout = probeTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, c)
	if err != nil {
		return server{}, err
	}
	defer func() { _ = conn.Close(ctx) }()
	return read(ctx, conn)
}
