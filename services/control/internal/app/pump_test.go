package app_test

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/mysqltest"
	"github.com/msgexchange/msgexchange/pkg/pgtest"
	"github.com/msgexchange/msgexchange/pkg/redistest"
	"github.com/msgexchange/msgexchange/pkg/testwait"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// syncBuffer is a process's output, written by exec's copier and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startPump runs the real msgx-pump binary against the test's databases until the test ends.
func startPump(t *testing.T, db *pgtest.DB, my *mysqltest.DB, rd *redistest.Redis) *syncBuffer {
	t.Helper()
	cmd := exec.Command(bin(t, "msgx-pump"))
	cmd.Env = append(os.Environ(),
		"MSGX_PG_DSN="+db.DSN,
		"MSGX_MYSQL_DSN="+my.ServiceDSN,
		"MSGX_REDIS_URL="+rd.URL,
		"MSGX_REDIS_PREFIX="+rd.Prefix,
		"MSGX_ADMIN_ADDR=127.0.0.1:0",
		"MSGX_INSTANCE=pump-under-test",
		"MSGX_SHUTDOWN_TIMEOUT=5s",
	)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("msgx-pump output:\n%s", out.String())
		}
	})
	return out
}

// TestReplayMakesThePumpProcessAgain replays a DEAD(EXHAUSTED) message through the API while a
// real msgx-pump runs: the pump takes it as its head again and processes it to a new terminal
// state, with the flight change and its events.
func TestReplayMakesThePumpProcessAgain(t *testing.T) {
	t.Parallel()
	db, my, rd := pgtest.New(t), mysqltest.New(t), redistest.New(t)
	raw, err := os.ReadFile("testdata/adft.xml")
	if err != nil {
		t.Fatal(err)
	}
	received := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	id := my.InsertInbox(t, string(raw), &received)
	// The message was discovered and then exhausted its attempts (an outage, say).
	now := time.Now()
	if err := cursor.Save(t.Context(), db.Pool, id, nil, now); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO proc_state (msg_id, state, error_class, last_error, attempts, received_at, enqueued_at,
		finished_at, backfill_next_at, updated_at)
		VALUES ($1, 'DEAD', 'EXHAUSTED', 'redis: connection refused', 5, $2, $3, $3, $3, $3)`, id, received, now.Add(-30*time.Minute))

	pump := startPump(t, db, my, rd)
	in := startWith(t, db, "control-pump", now, func(cfg *config.Config) { cfg.MySQLDSN = my.ServiceDSN }, nil)
	waitActive(t, in)
	// The pump leaves the DEAD message alone: wait until it holds its role, then check.
	testwait.For(t, 60*time.Second, "the pump to hold its role", func() bool {
		st, err := in.client.GetStatus(withToken(callCtx(t), token), &controlv1.GetStatusRequest{})
		return err == nil && roleOf(st, "pump").GetActive()
	})
	if st, _ := stateOf(t, db, id); st != "DEAD" {
		t.Fatalf("before the replay the pump changed the DEAD message to %s", st)
	}

	resp, err := in.client.Replay(withToken(callCtx(t), token), &controlv1.ReplayRequest{MsgIds: []int64{id}, Comment: "after the Redis outage"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetReplayed() != 1 {
		t.Fatalf("replay = %v, want the message replayed", resp)
	}
	var state string
	testwait.For(t, 60*time.Second, "the pump to process the replayed message", func() bool {
		state, _ = stateOf(t, db, id)
		return state == "SUCCEEDED" || state == "SKIPPED" || state == "DEAD"
	})
	if state != "SUCCEEDED" {
		t.Fatalf("after the replay the message is %s, want SUCCEEDED\n%s", state, pump.String())
	}
	got, err := in.client.GetMessage(withToken(callCtx(t), token), &controlv1.GetMessageRequest{MsgId: id})
	if err != nil {
		t.Fatal(err)
	}
	m := got.GetMessage()
	if m.GetErrorClass() != controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED || m.GetAttempts() != 0 || m.GetMsgType() != "SCHD" ||
		len(got.GetEvents()) == 0 || got.GetRawStatus() != controlv1.RawStatus_RAW_STATUS_OK {
		t.Errorf("processed again = %v with %d events, want SUCCEEDED without error class, type SCHD, events and the raw text",
			m, len(got.GetEvents()))
	}
}
