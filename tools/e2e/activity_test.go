package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// activity samples what the services' lock connections are doing in PostgreSQL
// (pg_stat_activity of the env's database) every activityEvery while a bench runs, so that a
// latency tail can be set beside what the pipeline's backends waited on meanwhile: a WAL flush,
// a lock, or nothing (working, or waiting for their service). One small query per sample on a
// connection of its own.
type activity struct {
	mu      sync.Mutex
	samples []activitySample
	stop    chan struct{}
	done    chan struct{}
}

const activityEvery = 20 * time.Millisecond

type activitySample struct {
	at   time.Time
	role string // the role of the lock connection (pkg/leader names it "msgx-leader <role> …")
	wait string // what it waits on: wal-flush, notify-lock, lock, io or none
}

// waitClass sorts a backend's wait event into what a latency tail is read against. A
// transaction that sends NOTIFY takes the database's notify lock (Lock:object) at its commit and
// holds it through the commit's WAL flush, so notifying commits queue behind each other there.
func waitClass(typ, event string) string {
	switch {
	case typ == "IO" && strings.HasPrefix(event, "WAL"), typ == "LWLock" && strings.HasPrefix(event, "WAL"):
		return "wal-flush"
	case typ == "Lock" && event == "object":
		return "notify-lock"
	case typ == "Lock", typ == "LWLock":
		return "lock"
	case typ == "IO":
		return "io"
	}
	return "none"
}

func watchActivity(tb testing.TB, dsn string) *activity {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	a := &activity{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		defer func() { _ = conn.Close(context.Background()) }()
		tick := time.NewTicker(activityEvery)
		defer tick.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-tick.C:
			}
			rows, err := conn.Query(context.Background(), `SELECT split_part(application_name, ' ', 2), coalesce(wait_event_type, ''),
					coalesce(wait_event, '')
				FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'msgx-leader %' AND state = 'active'`)
			if err != nil {
				continue // a missed sample; the shares are read over hundreds
			}
			now := time.Now()
			for rows.Next() {
				var role, typ, event string
				if rows.Scan(&role, &typ, &event) == nil {
					a.mu.Lock()
					a.samples = append(a.samples, activitySample{now, role, waitClass(typ, event)})
					a.mu.Unlock()
				}
			}
			rows.Close()
		}
	}()
	tb.Cleanup(a.end)
	return a
}

func (a *activity) end() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

// busy is, for role, the time its backend was found running a statement between from and to,
// and the share of it spent waiting on each class (classes in order).
func (a *activity) busy(role string, from, to time.Time, classes []string) (time.Duration, []float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	counts := map[string]int{}
	n := 0
	for _, s := range a.samples {
		if s.role == role && !s.at.Before(from) && !s.at.After(to) {
			counts[s.wait]++
			n++
		}
	}
	shares := make([]float64, len(classes))
	for i, c := range classes {
		if n > 0 {
			shares[i] = float64(counts[c]) / float64(n)
		}
	}
	return time.Duration(n) * activityEvery, shares
}

// describe says, per role, how long its backend ran statements in the window (as a share of
// the window) and what it waited on meanwhile.
func (a *activity) describe(from, to time.Time, roles ...string) string {
	classes := []string{"wal-flush", "notify-lock", "lock", "io"}
	var parts []string
	for _, r := range roles {
		busy, shares := a.busy(r, from, to, classes)
		var waits []string
		for i, c := range classes {
			if shares[i] > 0 {
				waits = append(waits, fmt.Sprintf("%s %.0f %%", c, 100*shares[i]))
			}
		}
		if len(waits) == 0 {
			waits = []string{"no wait"}
		}
		parts = append(parts, fmt.Sprintf("%s in a statement %.0f %% of the time (of which %s)", r,
			100*busy.Seconds()/to.Sub(from).Seconds(), strings.Join(waits, ", ")))
	}
	return strings.Join(parts, "; ")
}
