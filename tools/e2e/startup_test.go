package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// startupBackoff is a quick outage backoff (the dispatcher waits for the brokers with it; ingest
// probes at each poll, 100 ms), so that the seconds a test waits are many probes: a log line per
// probe would show as many lines.
var startupBackoff = []string{"MSGX_PIPELINE_BACKOFF=100ms,200ms,300ms,400ms,500ms", "MSGX_PIPELINE_BACKOFF_CAP=500ms"}

// startupReadyz is the admin endpoint's /readyz: its status and body, or -1 and the error while
// nothing answers.
func startupReadyz(admin string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get("http://" + admin + "/readyz")
	if err != nil {
		return -1, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

// waitNotReady waits until the service answers /readyz not ready, naming check.
func waitNotReady(t *testing.T, s *stack.Stack, name, admin, check string) {
	t.Helper()
	testwait.ForState(t, 30*time.Second, name+" to answer /readyz not ready naming "+check, func() (bool, string) {
		if !s.Running(name) {
			t.Fatalf("%s exited while %s is down:\n%s", name, check, s.Output(name))
		}
		code, body := startupReadyz(admin)
		return code == http.StatusServiceUnavailable && strings.Contains(body, check), fmt.Sprintf("%d %q", code, body)
	})
}

// waitBlockedFor waits until the service's outage gauge shows it has waited for dependency at
// least d, and checks that it is still running: with startupBackoff that is several probes.
func waitBlockedFor(t *testing.T, s *stack.Stack, name, admin, gauge, dependency string, d time.Duration) {
	t.Helper()
	testwait.ForState(t, 30*time.Second, fmt.Sprintf("%s to wait for %s %s", name, dependency, d), func() (bool, string) {
		if !s.Running(name) {
			t.Fatalf("%s exited while %s is down:\n%s", name, dependency, s.Output(name))
		}
		v := labelled(t, admin, gauge, `dependency="`+dependency+`"`)
		return v >= d.Seconds(), strconv.FormatFloat(v, 'f', 2, 64) + "s"
	})
}

// waitReady waits until the service answers /readyz ready.
func waitReady(t *testing.T, s *stack.Stack, name, admin string) {
	t.Helper()
	testwait.ForState(t, time.Minute, name+" to answer /readyz ready", func() (bool, string) {
		if !s.Running(name) {
			t.Fatalf("%s exited:\n%s", name, s.Output(name))
		}
		code, body := startupReadyz(admin)
		return code == http.StatusOK, fmt.Sprintf("%d %q", code, body)
	})
}

// onceEach checks that each of lines was logged exactly once by the service: an outage is one
// line when it begins and one when it ends, however many probes it took (R-START-1).
func onceEach(t *testing.T, s *stack.Stack, name string, lines ...string) {
	t.Helper()
	out := s.Output(name)
	for _, l := range lines {
		if n := strings.Count(out, l); n != 1 {
			t.Errorf("%s logged %q %d times, want once:\n%s", name, l, n, out)
		}
	}
}

var probesOf = regexp.MustCompile(`"probes":([0-9]+)`)

// probedAtLeast checks that the line ending the outage counts at least n failed probes: the
// outage's single ERROR line stood for that many tries.
func probedAtLeast(t *testing.T, s *stack.Stack, name, resumed string, n int) {
	t.Helper()
	for _, line := range strings.Split(s.Output(name), "\n") {
		if !strings.Contains(line, resumed) {
			continue
		}
		m := probesOf.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%s: no probe count in %s", name, line)
			return
		}
		if got, _ := strconv.Atoi(m[1]); got < n {
			t.Errorf("%s: the outage ended after %d failed probes, want at least %d: %s", name, got, n, line)
		}
		return
	}
	t.Errorf("%s never logged %q", name, resumed)
}

// TestDispatcherStartsWhileKafkaIsDown: a dispatcher started while its broker is down stays up,
// answers /readyz not ready naming kafka, and logs the outage once however many times it
// probes; once the broker answers it becomes ready and delivers the outbox (R-START-1).
func TestDispatcherStartsWhileKafkaIsDown(t *testing.T) {
	broker := kafkatest.Own(t, nil)
	// The topics exist before the outage: the broker creates none on its own.
	topicMsg := broker.Topic(t, "msgx.flight.msg", 3, nil)
	topicSchd := broker.Topic(t, "msgx.flight.schd", 3, map[string]string{"cleanup.policy": "compact"})
	broker.Stop()

	pg, my, rdb := pgtest.New(t), mysqltest.New(t), redistest.New(t)
	admin := freePort(t)
	s := stack.New(binaries(t), append([]string{
		"MSGX_PG_DSN=" + pg.DSN,
		"MSGX_MYSQL_DSN=" + my.ServiceDSN,
		"MSGX_REDIS_URL=" + rdb.URL,
		"MSGX_REDIS_PREFIX=" + rdb.Prefix,
		"MSGX_KAFKA_BROKERS=" + broker.Addr(),
		"MSGX_KAFKA_TOPIC_MSG=" + topicMsg,
		"MSGX_KAFKA_TOPIC_SCHD=" + topicSchd,
		"MSGX_KAFKA_TRANSACTIONAL_ID=" + kafkatest.Name("msgx-dispatcher"),
		"MSGX_ADMIN_ADDR=127.0.0.1:0",
		"MSGX_PIPELINE_POLL_INTERVAL=100ms",
		"MSGX_SCHD_FLUSH_PERIOD=200ms",
		"MSGX_SHUTDOWN_TIMEOUT=5s",
		"MSGX_LOG_LEVEL=info",
	}, startupBackoff...), nil)
	t.Cleanup(func() {
		s.StopAll(10 * time.Second)
		if t.Failed() {
			for _, r := range []string{"ingest", "pump", "dispatcher"} {
				t.Logf("%s:\n%s", r, s.Output(r))
			}
		}
	})
	if err := s.Start("dispatcher", nil, "MSGX_ADMIN_ADDR="+admin); err != nil {
		t.Fatal(err)
	}
	// Something to deliver meanwhile: ingest and the pump need no broker.
	for _, r := range []string{"ingest", "pump"} {
		if err := s.Start(r, nil); err != nil {
			t.Fatal(err)
		}
	}
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	f := traffic.Flight{FLID: "START-1", ALCD: "CA", FLNO: "CA1951", MVIN: "D", SODT: day.Add(9 * time.Hour),
		FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
	now := time.Now()
	id := my.InsertInbox(t, traffic.ADFT(1, day.Add(6*time.Hour), f), &now)

	waitNotReady(t, s, "dispatcher", admin, "kafka")
	waitBlockedFor(t, s, "dispatcher", admin, "msgx_dispatcher_startup_blocked_seconds", "kafka", 3*time.Second)
	var pending int
	testwait.ForState(t, 30*time.Second, "the message's events to wait in the outbox", func() (bool, string) {
		if err := pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM msg_event WHERE msg_id = $1 AND state = 'PENDING'`, id).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending > 0, strconv.Itoa(pending) + " pending"
	})
	if code, body := startupReadyz(admin); code != http.StatusServiceUnavailable || body != "not ready: kafka" {
		t.Errorf("/readyz during the outage = %d %q, want 503 \"not ready: kafka\"", code, body)
	}

	broker.Start()
	waitReady(t, s, "dispatcher", admin)
	got := map[string]bool{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr()), kgo.ConsumeTopics(topicMsg),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want []string
	testwait.ForState(t, time.Minute, "the message's events to be SENT", func() (bool, string) {
		rows, err := pg.Pool.Query(t.Context(), `SELECT event_id FROM msg_event WHERE msg_id = $1 AND target = 'KAFKA:msg' AND state = 'SENT'`, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		want = want[:0]
		for rows.Next() {
			var eid int64
			if err := rows.Scan(&eid); err != nil {
				t.Fatal(err)
			}
			want = append(want, strconv.FormatInt(eid, 10))
		}
		var left int
		if err := pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM msg_event WHERE msg_id = $1 AND state <> 'SENT'`, id).Scan(&left); err != nil {
			t.Fatal(err)
		}
		return left == 0 && len(want) > 0, fmt.Sprintf("%d KAFKA:msg SENT, %d not SENT", len(want), left)
	})
	testwait.ForState(t, 30*time.Second, "the KAFKA:msg records at the broker", func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if err := contracttest.CheckRecord(outbox.TargetMsg, r); err != nil {
				t.Error(err)
			}
			for _, h := range r.Headers {
				if h.Key == "msgx-event-id" {
					got[string(h.Value)] = true
				}
			}
		})
		for _, w := range want {
			if !got[w] {
				return false, fmt.Sprintf("have %v, want %v", got, want)
			}
		}
		return true, ""
	})
	onceEach(t, s, "dispatcher",
		"kafka brokers do not answer: the dispatcher stays up",
		"kafka brokers answer again: the dispatcher builds its producer",
		"leader: acquired the role")
	probedAtLeast(t, s, "dispatcher", "kafka brokers answer again", 3)

	// While it runs, readiness follows the broker: not ready when no broker answers, ready again
	// when it is back, and the process stays up throughout.
	broker.Stop()
	waitNotReady(t, s, "dispatcher", admin, "kafka")
	broker.Start()
	waitReady(t, s, "dispatcher", admin)
}

// TestIngestStartsWhileTheInboxIsDown: ingest started while its MariaDB is down stays up,
// answers /readyz not ready naming the inbox, and logs the outage once; once the server is
// back it becomes ready and enqueues what the inbox holds (R-START-1).
func TestIngestStartsWhileTheInboxIsDown(t *testing.T) {
	server := mysqltest.Own(t)
	my := server.New(t)
	server.Stop()
	pg := pgtest.New(t)
	admin := freePort(t)
	s := stack.New(binaries(t), append([]string{
		"MSGX_PG_DSN=" + pg.DSN,
		"MSGX_MYSQL_DSN=" + my.ServiceDSN,
		"MSGX_ADMIN_ADDR=" + admin,
		"MSGX_INBOX_TIMEOUT=1s",
		"MSGX_PIPELINE_POLL_INTERVAL=100ms",
		"MSGX_SHUTDOWN_TIMEOUT=5s",
		"MSGX_LOG_LEVEL=info",
	}, startupBackoff...), nil)
	t.Cleanup(func() {
		s.StopAll(10 * time.Second)
		if t.Failed() {
			t.Logf("ingest:\n%s", s.Output("ingest"))
		}
	})
	if err := s.Start("ingest", nil); err != nil {
		t.Fatal(err)
	}
	waitNotReady(t, s, "ingest", admin, "inbox")
	waitBlockedFor(t, s, "ingest", admin, "msgx_ingest_blocked_seconds", "inbox", 3*time.Second)

	server.Start()
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	f := traffic.Flight{FLID: "START-2", ALCD: "CA", FLNO: "CA1952", MVIN: "D", SODT: day.Add(9 * time.Hour),
		FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
	now := time.Now()
	id := my.InsertInbox(t, traffic.ADFT(1, day.Add(6*time.Hour), f), &now)
	waitReady(t, s, "ingest", admin)
	testwait.ForState(t, 30*time.Second, "the inbox row to be enqueued", func() (bool, string) {
		var n int
		if err := pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_state WHERE msg_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1, strconv.Itoa(n) + " rows"
	})
	onceEach(t, s, "ingest",
		"MySQL not reachable at start-up",
		"dependency does not answer: discovery keeps the watermark",
		"dependency answers again: discovery resumes")
	probedAtLeast(t, s, "ingest", "dependency answers again: discovery resumes", 3)
}
