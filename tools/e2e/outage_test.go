package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// TestOutageScenario is the scenario of issue #15 through the five binaries: under steady
// traffic (10 msg/s), Redis stops answering (CLIENT PAUSE … ALL), then the inbox table (another
// session holds LOCK TABLES cminmsgs WRITE), each far longer than the whole retry budget. No
// message may end DEAD, and the final flight state must be what the messages give in ID order
// without any outage: each flight's last remark, one version per message.
func TestOutageScenario(t *testing.T) {
	e := newEnv(t)
	// A Redis of the test's own: pausing the shared one would stall every other test package.
	own := redistest.Own(t)
	extra := []string{
		"MSGX_REDIS_URL=" + own.URL, "MSGX_REDIS_PREFIX=" + own.Prefix,
		// A retry budget of 1.5 s against outages of 5 s.
		"MSGX_PIPELINE_BACKOFF=100ms,200ms,300ms,400ms,500ms", "MSGX_PIPELINE_BACKOFF_CAP=500ms",
		"MSGX_INBOX_TIMEOUT=1s", "MSGX_REDIS_TIMEOUT=500ms",
	}
	for _, r := range stack.Services {
		if err := e.stack.Start(r, nil, extra...); err != nil {
			t.Fatal(err)
		}
	}
	e.waitAllRolesActive(t)

	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	dttm := day.Add(6 * time.Hour)
	const nFlights = 5
	flights := make([]traffic.Flight, nFlights)
	var seq int64
	var ids []int64
	for i := range flights {
		flights[i] = traffic.Flight{FLID: fmt.Sprintf("OUT-%d", i), ALCD: "CA", FLNO: fmt.Sprintf("CA%d", 1700+i), MVIN: "D",
			SODT: day.Add(9 * time.Hour), FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
		seq++
		now := time.Now()
		ids = append(ids, e.my.InsertInbox(t, traffic.ADFT(seq, dttm, flights[i]), &now))
	}

	// What GetStatus reported while the faults were on.
	watch := e.watchBlocked(t.Context())
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	faults := make(chan error, 1)
	go func() { faults <- injectOutages(ctx, own, e.my.AdminDSN) }()

	last := map[string]string{}
	changes := map[string]int{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n := 0; n < 170; n++ { // 17 s at 10 msg/s
		<-tick.C
		f := flights[n%nFlights]
		remark := fmt.Sprintf("R%03d", n)
		seq++
		now := time.Now()
		xml := traffic.FLOP(seq, dttm.Add(time.Duration(n)*time.Second), f.FLID, f.FFID(), "REMC", "    <REMC>"+remark+"</REMC>\n")
		ids = append(ids, e.my.InsertInbox(t, xml, &now))
		last[f.FLID], changes[f.FLID] = remark, changes[f.FLID]+1
	}
	if err := <-faults; err != nil {
		t.Fatal(err)
	}

	for _, id := range ids {
		testwait.ForState(t, 2*time.Minute, fmt.Sprintf("the five facts of message %d", id), func() (bool, string) {
			f := e.facts(t, id)
			return f.terminal && f.marked && f.delivered, f.String()
		})
	}
	seen := watch.stop()
	var dead int
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_state WHERE state <> 'SUCCEEDED'`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead != 0 {
		rows, _ := e.pg.Pool.Query(t.Context(), `SELECT msg_id, state, coalesce(error_class, ''), coalesce(last_error, '') FROM proc_state WHERE state <> 'SUCCEEDED'`)
		for rows.Next() {
			var id int64
			var st, class, reason string
			_ = rows.Scan(&id, &st, &class, &reason)
			t.Errorf("message %d ended %s(%s): %s", id, st, class, reason)
		}
		rows.Close()
	}
	for _, f := range flights {
		var remc string
		var version int
		if err := e.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(remc, ''), state_version FROM flight_schd WHERE flid = $1`, f.FLID).
			Scan(&remc, &version); err != nil {
			t.Fatal(err)
		}
		if remc != last[f.FLID] || version != 1+changes[f.FLID] {
			t.Errorf("flight %s: REMC %q version %d, want %q and %d (each message applied once, in ID order)",
				f.FLID, remc, version, last[f.FLID], 1+changes[f.FLID])
		}
	}
	for _, want := range []string{"pump:redis", "pump:inbox"} {
		if !seen[want] {
			t.Errorf("GetStatus never showed %s blocked; saw %v", want, seen)
		}
	}
}

// injectOutages pauses Redis for 5 s two seconds in, and locks the inbox table for 5 s from one
// second before Redis answers again: the pump, back from the Redis outage with a backlog, meets
// the locked table at its next read.
func injectOutages(ctx context.Context, own *redistest.Redis, adminDSN string) error {
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := sleep(2 * time.Second); err != nil {
		return err
	}
	if err := own.Client.Do(ctx, "CLIENT", "PAUSE", "5000", "ALL").Err(); err != nil {
		return fmt.Errorf("pause redis: %w", err)
	}
	if err := sleep(4 * time.Second); err != nil {
		return err
	}
	db, err := sql.Open("mysql", adminDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "LOCK TABLES cminmsgs WRITE"); err != nil {
		return fmt.Errorf("lock inbox: %w", err)
	}
	err = sleep(5 * time.Second)
	if _, uerr := conn.ExecContext(context.Background(), "UNLOCK TABLES"); uerr != nil {
		return fmt.Errorf("unlock inbox: %w", uerr)
	}
	return err
}

// blockedWatch polls GetStatus every 200 ms and keeps each role:dependency it showed blocked,
// for a test that makes outages and checks an operator would have seen them.
type blockedWatch struct {
	mu     sync.Mutex
	seen   map[string]bool
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *env) watchBlocked(ctx context.Context) *blockedWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &blockedWatch{seen: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			if st, err := e.status(ctx); err == nil {
				for _, r := range st.GetRoles() {
					if b := r.GetBlocked(); b != nil {
						w.mu.Lock()
						w.seen[r.GetRole()+":"+b.GetDependency()] = true
						w.mu.Unlock()
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return w
}

// stop ends the polling and returns what it saw.
func (w *blockedWatch) stop() map[string]bool {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}
