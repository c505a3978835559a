package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/clock"
)

// FailoverPG kills the PostgreSQL primary with SIGKILL and promotes its synchronous standby
// (pg_ctl promote); the services follow through their multi-host DSN, and the killed node is
// rebuilt as the new primary's synchronous standby.
const FailoverPG Failover = "pg"

// PGTarget is the chaos stack's PostgreSQL as a synchronously replicated pair
// (pgtest.OwnReplicated in Sync mode). Target.PGDSN and Target.PGAdminDSN are then multi-host
// DSNs with target_session_attrs=read-write: the services, the harness and the PostgreSQL
// faults (pg_terminate_backend, the long outage's ALLOW_CONNECTIONS) all reach whichever node
// is the primary now.
type PGTarget struct {
	Nodes PGNodes
}

// PGNodes are the replicated pair's servers, which the failover fault kills, promotes and
// rebuilds.
type PGNodes interface {
	// KillCurrent kills the current primary with SIGKILL and returns its address.
	KillCurrent(ctx context.Context) (string, error)
	// PromoteCurrent promotes the killed primary's standby, waits until it accepts writes
	// and returns its address.
	PromoteCurrent(ctx context.Context) (string, error)
	// Rebuild makes the killed node the new primary's synchronous standby (pg_basebackup -R)
	// and returns once it streams as one.
	Rebuild(ctx context.Context) error
}

// The PostgreSQL failover's bounds: the promotion (pg_ctl promote and the first write),
// the services' roles taken again on the new primary, and the rebuild of the killed node.
const (
	pgPromote  = 60 * time.Second
	pgRoles    = 90 * time.Second
	pgRebuild  = 2 * time.Minute
	pgSettle   = 2 * time.Second // after the roles are back, before the rebuild's base backup
	pgFailName = "pg failover"
)

// pgHA is the harness's hold on the replicated PostgreSQL: the failovers made.
type pgHA struct {
	target *PGTarget

	mu      sync.Mutex
	made    []pgFailoverMade
	failing bool // a failover is under way: no pg_terminate_backend meanwhile
}

// pgFailoverMade is one PostgreSQL failover as it happened.
type pgFailoverMade struct {
	killed, promoted string
	promote          time.Duration // from the kill until the standby accepted writes
	roles            time.Duration // from the kill until every service held its role on the new primary
	pumpRole         time.Duration // from the kill until the pump held its role there
	waiting          int           // unfinished messages at the kill (-1: not sampled)
	rebuilt          bool
	err              error
}

// pgFailingOver reports whether a PostgreSQL failover is under way: pg_terminate_backend
// waits, it would only hit the dying primary or the promotion's first connections.
func (in *injector) pgFailingOver() bool {
	if in.pgha == nil {
		return false
	}
	in.pgha.mu.Lock()
	defer in.pgha.mu.Unlock()
	return in.pgha.failing
}

// openPGHA checks the target for the PostgreSQL failover and returns its hold, nil without it.
func (h *harness) openPGHA(t Target) (*pgHA, error) {
	if !h.cfg.Has(FailoverPG) {
		return nil, nil
	}
	if t.PGReplicated == nil {
		return nil, errors.New("the PostgreSQL failover needs the chaos target's PostgreSQL replicated (Target.PGReplicated) and its DSNs multi-host")
	}
	return &pgHA{target: t.PGReplicated}, nil
}

// failoverKind is the kind of the i-th planned failover: the run's failovers in turn.
func failoverKind(deps []Failover, i int) Failover { return deps[i%len(deps)] }

// plannedOf counts the planned failovers of kind f.
func plannedOf(at []time.Duration, deps []Failover, f Failover) int {
	n := 0
	for i := range at {
		if failoverKind(deps, i) == f {
			n++
		}
	}
	return n
}

// replaySlots is what planOrder keeps the replays clear of among the failovers at: the first
// one (failoverSlots), and every PostgreSQL failover. A replay holds its flight's row on a
// session of the harness's, which dies with the primary: the held message then succeeds
// instead of going DEAD, and the replay is not made (a make chaos run failed so).
func replaySlots(at []time.Duration, deps []Failover) []longSlot {
	out := failoverSlots(at)
	for i, a := range at {
		if i > 0 && failoverKind(deps, i) == FailoverPG {
			out = append(out, longSlot{dep: depFailover, at: a, dur: failoverAwait})
		}
	}
	return out
}

// failover makes the i-th planned failover.
func (h *harness) failover(ctx context.Context, i int) {
	if failoverKind(h.cfg.Failovers, i) == FailoverPG {
		h.inj.failoverPG(ctx)
		return
	}
	h.inj.failoverRedis(ctx)
}

// failoverPG kills the primary with SIGKILL while the pump is projecting, promotes the
// standby, waits until every service holds its role again on the new primary (the services
// find it through the multi-host DSN, with no step of the harness's), and rebuilds the killed
// node as the new synchronous standby, so that the next failover finds a standby to promote.
func (in *injector) failoverPG(ctx context.Context) {
	ha := in.pgha
	ha.mu.Lock()
	ha.failing = true
	ha.mu.Unlock()
	m := pgFailoverMade{waiting: -1}
	defer func() {
		ha.mu.Lock()
		ha.failing = false
		ha.made = append(ha.made, m)
		ha.mu.Unlock()
		if m.err != nil {
			in.logf("%s FAILED: %v", pgFailName, m.err)
		}
	}()
	in.awaitProjecting(ctx, failoverAwait)
	m.waiting = in.awaitUnfinished(ctx, 1, failoverAwait)
	kctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	killed, err := ha.target.Nodes.KillCurrent(kctx)
	cancel()
	if err != nil {
		m.err = fmt.Errorf("kill -9 the primary: %w", err)
		return
	}
	began := time.Now()
	m.killed = killed
	in.logf("%s: kill -9 the primary %s, %d messages unfinished", pgFailName, killed, m.waiting)
	pctx, cancel := context.WithTimeout(ctx, pgPromote)
	m.promoted, err = ha.target.Nodes.PromoteCurrent(pctx)
	cancel()
	if err != nil {
		m.err = fmt.Errorf("promote the standby: %w", err)
		return
	}
	m.promote = time.Since(began)
	in.logf("%s: %s promoted, writable after %s", pgFailName, m.promoted, m.promote.Round(time.Millisecond))
	back, err := in.awaitRoles(ctx, began, pgRoles)
	if err != nil {
		m.err = fmt.Errorf("the services' roles on the new primary: %w", err)
		return
	}
	m.roles = time.Since(began)
	m.pumpRole = back["pump"]
	in.logf("%s: every service holds its role on %s, after %s", pgFailName, m.promoted, describeRoles(in.services, back))
	clock.Sleep(ctx, pgSettle)
	rctx, cancel := context.WithTimeout(ctx, pgRebuild)
	defer cancel()
	if err := ha.target.Nodes.Rebuild(rctx); err != nil {
		m.err = fmt.Errorf("rebuild %s as the new standby: %w", killed, err)
		return
	}
	m.rebuilt = true
	in.logf("%s: %s rebuilt as the synchronous standby of %s after %s", pgFailName, killed, m.promoted, time.Since(began).Round(time.Millisecond))
}

// awaitRoles waits, at most d from began, until each of the five roles has a holder whose
// session holds the role's advisory lock on the server the harness reaches now (the new
// primary), and returns when each role came back, from began. A role that cannot work without
// another dependency (the dispatcher's without the broker, in the long broker outage) comes
// back only with it: the log names the roles still missing every 10 s.
func (in *injector) awaitRoles(ctx context.Context, began time.Time, d time.Duration) (map[string]time.Duration, error) {
	back := map[string]time.Duration{}
	lastLog := time.Now()
	for {
		qctx, cancel := context.WithTimeout(ctx, restoreTimeout)
		rows, err := in.pg.Query(qctx, `SELECT DISTINCT h.role FROM role_holder h
			JOIN pg_locks l ON l.pid = h.backend_pid AND l.locktype = 'advisory' AND l.granted`)
		if err == nil {
			var roles []string
			roles, err = pgx.CollectRows(rows, pgx.RowTo[string])
			for _, r := range roles {
				if _, ok := back[r]; !ok {
					back[r] = time.Since(began)
				}
			}
		}
		cancel()
		if len(back) >= len(in.services) {
			return back, nil
		}
		var missing []string
		for _, s := range in.services {
			if _, ok := back[s]; !ok {
				missing = append(missing, s)
			}
		}
		if time.Since(began) > d {
			return back, fmt.Errorf("%s without a holder after %s (last error: %v)", strings.Join(missing, ", "), d, err)
		}
		if time.Since(lastLog) >= 10*time.Second {
			in.logf("%s: waiting for the roles of %s on the new primary", pgFailName, strings.Join(missing, ", "))
			lastLog = time.Now()
		}
		if !clock.Sleep(ctx, 200*time.Millisecond) {
			return back, ctx.Err()
		}
	}
}

// describeRoles lists when each role came back, in the services' order.
func describeRoles(services []string, back map[string]time.Duration) string {
	var parts []string
	for _, s := range services {
		if d, ok := back[s]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", s, d.Round(100*time.Millisecond)))
		}
	}
	return strings.Join(parts, ", ")
}

// pgFailoverReports is the PostgreSQL failovers' report, none without them.
func (h *harness) pgFailoverReports(planned []time.Duration) []FailoverReport {
	if !h.cfg.Has(FailoverPG) {
		return nil
	}
	r := FailoverReport{Kind: FailoverPG, Planned: plannedOf(planned, h.cfg.Failovers, FailoverPG)}
	if h.pgha == nil {
		return []FailoverReport{r}
	}
	h.pgha.mu.Lock()
	defer h.pgha.mu.Unlock()
	for _, m := range h.pgha.made {
		r.Waiting = max(r.Waiting, m.waiting)
		if m.err != nil {
			r.Failures = append(r.Failures, short(m.err.Error()))
			continue
		}
		if m.rebuilt {
			r.Made++
			r.Promote = append(r.Promote, m.promote)
			r.Roles = append(r.Roles, m.roles)
			r.PumpRole = append(r.PumpRole, m.pumpRole)
		}
		// The kill met the pump's work: messages were unfinished, and the services took their
		// roles again on the new primary.
		if m.waiting > 0 {
			r.Met++
		}
	}
	return []FailoverReport{r}
}

// printPGFailover writes the summary's line of the PostgreSQL failovers.
func printPGFailover(p func(format string, args ...any), f FailoverReport) {
	var promote, roles, pump []string
	for i, d := range f.Promote {
		promote = append(promote, d.Round(100*time.Millisecond).String())
		roles = append(roles, f.Roles[i].Round(100*time.Millisecond).String())
		pump = append(pump, f.PumpRole[i].Round(100*time.Millisecond).String())
	}
	p("  failovers           %s %d of %d planned (kill -9 of the synchronous primary, standby promoted after %s, the pump's role back on it after %s, every role after %s, the killed node rebuilt as the synchronous standby; %d met unfinished messages, up to %d)",
		f.Kind, f.Made, f.Planned, strings.Join(promote, ", "), strings.Join(pump, ", "), strings.Join(roles, ", "), f.Met, f.Waiting)
}
