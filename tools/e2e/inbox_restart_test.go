package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// TestInboxServerRestart stops and starts the inbox's MariaDB server itself under traffic: once
// cleanly (SIGTERM, as an upgrade or a node drain would) and once by a crash (SIGKILL), each
// with a backlog in flight and each longer than the services' whole retry budget. An outage is
// never the message's fault (R-PUMP-7): no row may be lost or end DEAD, every row ends
// SUCCEEDED with its marker and its events delivered, and every flight ends as the rows give it
// in ID order, one version per message.
//
// The server is one of the test's own (mysqltest.Own), so the fault never reaches the shared
// server the other packages use.
func TestInboxServerRestart(t *testing.T) {
	server := mysqltest.Own(t)
	e := newEnvOn(t, binaries(t), server.New(t))
	extra := []string{
		// A retry budget of 1.5 s against outages of 4 s.
		"MSGX_PIPELINE_BACKOFF=100ms,200ms,300ms,400ms,500ms", "MSGX_PIPELINE_BACKOFF_CAP=500ms",
		"MSGX_INBOX_TIMEOUT=1s",
	}
	for _, r := range stack.Services {
		if err := e.stack.Start(r, nil, extra...); err != nil {
			t.Fatal(err)
		}
	}
	e.waitAllRolesActive(t)

	w := e.newInboxWriter(t, "MDB", 1800)
	flights, nFlights := w.flights, len(w.flights)

	// What GetStatus reported while the server was down.
	watch := e.watchBlocked(t.Context())
	ctx, stop := context.WithCancel(t.Context())
	defer stop()

	pause, wrote := w.background(ctx, t, 300)
	pause(2 * time.Second)
	for _, fault := range []struct {
		name string
		down func()
	}{{"stopped (SIGTERM)", server.Stop}, {"killed (SIGKILL)", server.Kill}} {
		// A backlog the pump is still working through when the server goes away.
		w.burst <- 40
		<-w.burstDone
		fault.down()
		t.Logf("inbox server %s", fault.name)
		pause(4 * time.Second)
		server.Start()
		t.Logf("inbox server started again")
		pause(3 * time.Second)
	}
	if err := wrote(); err != nil {
		t.Fatal(err)
	}
	if w.failed == 0 {
		t.Fatal("the writer never met the stopped server: the faults did not happen")
	}
	t.Logf("the writer wrote %d rows; %d inserts failed while the server was down", w.written, w.failed)

	e.checkInOrder(t, flights, nFlights+w.written, false)
	seen := watch.stop()
	t.Logf("GetStatus showed blocked: %v", seen)
	// Discovery reads the inbox every poll, so it meets each outage whatever the pump was doing.
	if !seen["ingest:inbox"] {
		t.Errorf("GetStatus never showed ingest blocked on the inbox; saw %v", seen)
	}
	if n := strings.Count(e.stack.Output("ingest"), "dependency does not answer"); n != 2 {
		t.Errorf("ingest logged the start of an inbox outage %d times, want 2 (once per outage)", n)
	}
}

// checkInOrder checks the end of a run of inboxWriter traffic over flights whose inbox should
// hold rows rows: every row processed, SUCCEEDED (an outage is never the message's fault,
// R-PUMP-7), marked and delivered, and every flight as the rows give it in ID order, one
// version per message: the state a clean in-order run gives. With floored, a version floor
// (R-RESTORE-1) may have raised a flight's version: it must be at least the clean run's.
func (e *env) checkInOrder(t *testing.T, flights []traffic.Flight, rows int, floored bool) {
	t.Helper()
	// The rows as the inbox holds them, in ID order: what in-order processing gives.
	inbox, err := e.my.Admin.QueryContext(t.Context(), `SELECT CMINMSGS_ID, CMINMSGS_CLOB_MSG FROM cminmsgs ORDER BY CMINMSGS_ID`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	last := map[string]string{}
	changes := map[string]int{}
	for inbox.Next() {
		var id int64
		var xml string
		if err := inbox.Scan(&id, &xml); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if m := remarkOf.FindStringSubmatch(xml); m != nil {
			last[m[1]], changes[m[1]] = m[2], changes[m[1]]+1
		}
	}
	if err := inbox.Err(); err != nil {
		t.Fatal(err)
	}
	inbox.Close()
	if got := len(ids); got != rows {
		t.Fatalf("the inbox holds %d rows, %d were written: a row was lost or written twice", got, rows)
	}

	for _, id := range ids {
		testwait.ForState(t, 2*time.Minute, fmt.Sprintf("the five facts of message %d", id), func() (bool, string) {
			f := e.facts(t, id)
			return f.terminal && f.marked && f.delivered, f.String()
		})
	}
	var notSucceeded int
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_state WHERE state <> 'SUCCEEDED'`).Scan(&notSucceeded); err != nil {
		t.Fatal(err)
	}
	if notSucceeded != 0 {
		t.Errorf("%d messages did not end SUCCEEDED: an outage was made the message's fault", notSucceeded)
	}
	var enqueued int
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_state`).Scan(&enqueued); err != nil {
		t.Fatal(err)
	}
	if enqueued != len(ids) {
		t.Errorf("%d messages enqueued, the inbox holds %d", enqueued, len(ids))
	}
	for _, f := range flights {
		var remc string
		var version int
		if err := e.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(remc, ''), state_version FROM flight_schd WHERE flid = $1`, f.FLID).
			Scan(&remc, &version); err != nil {
			t.Fatal(err)
		}
		if want := 1 + changes[f.FLID]; remc != last[f.FLID] || version < want || (!floored && version != want) {
			t.Errorf("flight %s: REMC %q version %d, want %q and %d (each message applied once, in ID order)",
				f.FLID, remc, version, last[f.FLID], 1+changes[f.FLID])
		}
	}
}

// remarkOf finds the flight and the remark of a FLOP the inboxWriter wrote.
var remarkOf = regexp.MustCompile(`(?s)<FLID>([^<]+)</FLID>.*<REMC>(W[0-9]+)</REMC>`)

// inboxWriter is upstream writing FLOPs at 20 a second, each with a remark of its own. It goes
// on through the server's outages as upstream would: an insert that fails is tried again until
// it is in, and since a failed insert may still have been committed (the server went away after
// the commit), it first looks whether the row is there.
type inboxWriter struct {
	db      *mysqltest.DB
	flights []traffic.Flight
	dttm    time.Time
	seq     int64
	// burst asks for n rows at once, without the pause; burstDone answers when they are in.
	burst     chan int
	burstDone chan struct{}

	written, failed int
}

// newInboxWriter creates five flights, FLIDs prefix-0 … prefix-4 and flight numbers from
// CA<flno>, each with an ADFT in the inbox, and returns a writer of FLOPs for them.
func (e *env) newInboxWriter(t *testing.T, prefix string, flno int) *inboxWriter {
	t.Helper()
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	dttm := day.Add(6 * time.Hour)
	flights := make([]traffic.Flight, 5)
	for i := range flights {
		flights[i] = traffic.Flight{FLID: fmt.Sprintf("%s-%d", prefix, i), ALCD: "CA", FLNO: fmt.Sprintf("CA%d", flno+i), MVIN: "D",
			SODT: day.Add(9 * time.Hour), FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
		now := time.Now()
		e.my.InsertInbox(t, traffic.ADFT(int64(i+1), dttm, flights[i]), &now)
	}
	return &inboxWriter{db: e.my, flights: flights, dttm: dttm, seq: int64(len(flights)), burst: make(chan int), burstDone: make(chan struct{})}
}

// background runs the writer for n rows until ctx ends. pause waits d and fails the test if
// the writer ended meanwhile (the faults must meet it running); wrote waits for its end.
func (w *inboxWriter) background(ctx context.Context, t *testing.T, n int) (pause func(d time.Duration), wrote func() error) {
	done := make(chan error, 1)
	go func() { done <- w.run(ctx, n) }()
	pause = func(d time.Duration) {
		t.Helper()
		select {
		case <-time.After(d):
		case err := <-done:
			t.Fatalf("the writer ended before the faults: %v", err)
		}
	}
	return pause, func() error { return <-done }
}

func (w *inboxWriter) run(ctx context.Context, n int) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < n; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case k := <-w.burst:
			for j := 0; j < k; j++ {
				if err := w.write(ctx, i); err != nil {
					return err
				}
				i++
			}
			w.burstDone <- struct{}{}
		case <-tick.C:
		}
		if err := w.write(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (w *inboxWriter) write(ctx context.Context, i int) error {
	f := w.flights[i%len(w.flights)]
	remark := fmt.Sprintf("W%04d", i)
	w.seq++
	xml := traffic.FLOP(w.seq, w.dttm.Add(time.Duration(i)*time.Second), f.FLID, f.FFID(), "REMC", "    <REMC>"+remark+"</REMC>\n")
	deadline := time.Now().Add(time.Minute)
	for {
		now := time.Now()
		_, err := w.db.TryInsertInbox(ctx, xml, &now)
		if err == nil {
			w.written++
			return nil
		}
		w.failed++
		if time.Now().After(deadline) {
			return fmt.Errorf("row %s: the inbox server did not come back within a minute: %w", remark, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		var in int
		if err := w.db.Admin.QueryRowContext(ctx, `SELECT count(*) FROM cminmsgs WHERE CMINMSGS_CLOB_MSG LIKE ?`, "%<REMC>"+remark+"</REMC>%").Scan(&in); err == nil && in > 0 {
			w.written++
			return nil
		}
	}
}
