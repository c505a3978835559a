package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// rotation tracks which node is the primary now through a run of failovers, where KillPrimary
// and Promote stay with the setup's names (one failover, as the e2e tests make).
type rotation struct {
	mu               sync.Mutex
	primary, standby *Node // nil until the first FailoverCurrent: the setup's Primary and Standby
	killed           *Node // killed and not rebuilt yet
}

func (r *Replicated) roles() (primary, standby *Node) {
	if r.rot.primary == nil {
		r.rot.primary, r.rot.standby = r.Primary, r.Standby
	}
	return r.rot.primary, r.rot.standby
}

// KillCurrent kills the node that is primary now with SIGKILL (every process of it) and
// returns its address. Unlike KillPrimary it returns errors rather than failing the test: a
// long run (tools/chaos) calls it from a goroutine of its own, and may fail over again after
// Rebuild.
func (r *Replicated) KillCurrent(ctx context.Context) (string, error) {
	r.rot.mu.Lock()
	defer r.rot.mu.Unlock()
	if r.rot.killed != nil {
		return "", fmt.Errorf("%s was killed and not rebuilt: no standby to fail over to", r.rot.killed.Name)
	}
	p, _ := r.roles()
	p.kill()
	r.rot.killed = p
	return p.addr(), nil
}

// PromoteCurrent promotes the standby of the primary KillCurrent killed (pg_ctl promote),
// waits until it accepts writes and returns its address.
func (r *Replicated) PromoteCurrent(ctx context.Context) (string, error) {
	r.rot.mu.Lock()
	defer r.rot.mu.Unlock()
	if r.rot.killed == nil {
		return "", errors.New("no primary killed: promoting the standby would make two primaries")
	}
	_, s := r.roles()
	if err := r.runErr(ctx, "pg_ctl", "promote", "-D", s.data, "-w", "-t", "60"); err != nil {
		return "", err
	}
	if err := s.awaitWritable(ctx); err != nil {
		return "", err
	}
	r.rot.primary, r.rot.standby = s, r.rot.killed
	return s.addr(), nil
}

// awaitWritable waits until the node, just promoted, accepts writes.
func (n *Node) awaitWritable(ctx context.Context) error {
	return testwait.Until(ctx, n.Name+" to accept writes", 5*time.Second, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, n.DSN())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var ro string
		if err := conn.QueryRow(ctx, `SHOW transaction_read_only`).Scan(&ro); err != nil {
			return err
		}
		if ro != "off" {
			return errors.New("still read-only")
		}
		return nil
	})
}

// Rebuild makes the node KillCurrent killed a standby of the promoted one again: its data
// directory replaced by a pg_basebackup -R of the new primary, started, and in Sync mode made
// the new primary's synchronous standby. It returns once the node streams in the cluster's
// mode; then another failover can follow. The old data is discarded, not rewound: it may hold
// the old timeline's tail past the promotion, which pg_rewind would need the primary's
// wal_log_hints for.
func (r *Replicated) Rebuild(ctx context.Context) error {
	r.rot.mu.Lock()
	defer r.rot.mu.Unlock()
	k := r.rot.killed
	if k == nil || r.rot.standby != k {
		return errors.New("no killed node whose standby was promoted")
	}
	p := r.rot.primary
	if err := os.RemoveAll(k.data); err != nil {
		return err
	}
	if err := r.runErr(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "replicator",
		"-D", k.data, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"); err != nil {
		return err
	}
	// The copy carries the new primary's postgresql.auto.conf, which names this node as its
	// synchronous standby after an earlier Rebuild: promoted one day, the node would wait for
	// itself. Cleared in the file, not with -c, so that ALTER SYSTEM on it still takes effect.
	if err := appendFile(filepath.Join(k.data, "postgresql.auto.conf"), "synchronous_standby_names = ''\n"); err != nil {
		return err
	}
	k.extra = []string{"cluster_name=" + k.Name}
	if err := k.startErr(); err != nil {
		return err
	}
	if r.Mode == Sync {
		conn, err := pgx.Connect(ctx, multiURL("postgres", p.addr()))
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (` + k.Name + `)'`, `SELECT pg_reload_conf()`} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
	}
	want := map[Mode]string{Sync: "sync", Async: "async"}[r.Mode]
	err := testwait.Until(ctx, k.Name+" streaming in "+want+" mode", 5*time.Second, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, multiURL("postgres", p.addr()))
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var state, sync string
		if err := conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`, k.Name).Scan(&state, &sync); err != nil {
			return err
		}
		if state != "streaming" || sync != want {
			return fmt.Errorf("%s %s, %s", k.Name, state, sync)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.rot.killed = nil
	return nil
}
