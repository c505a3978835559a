package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// TestDispatcherOverSCRAMAndTLS runs ingest, the pump and the dispatcher against a real broker
// that takes the dispatcher only over TLS with SASL/SCRAM-SHA-512, the password read from a
// mounted file (MSGX_KAFKA_SASL_PASSWORD_FILE), as a production cluster would. A message goes
// through to Kafka; the password shows in no log; and a dispatcher with a wrong password stops
// at start-up naming the setting (R-START-2) instead of waiting as in an outage.
func TestDispatcherOverSCRAMAndTLS(t *testing.T) {
	broker := kafkatest.OwnSecured(t, nil)
	topicMsg := broker.Topic(t, "msgx.flight.msg", 3, nil)
	topicSchd := broker.Topic(t, "msgx.flight.schd", 3, map[string]string{"cleanup.policy": "compact"})
	dir := t.TempDir()
	secret := func(name, value string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pg, my, rdb := pgtest.New(t), mysqltest.New(t), redistest.New(t)
	admin := freePort(t)
	s := scramStack(t, pg, my, rdb, broker, topicMsg, topicSchd, kafkatest.Name("msgx-dispatcher"))
	startPipeline(t, s, admin, "MSGX_KAFKA_SASL_PASSWORD_FILE="+secret("password", broker.Password))
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	f := traffic.Flight{FLID: "SECURE-1", ALCD: "CA", FLNO: "CA1951", MVIN: "D", SODT: day.Add(9 * time.Hour),
		FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
	now := time.Now()
	id := my.InsertInbox(t, traffic.ADFT(1, day.Add(6*time.Hour), f), &now)
	testwait.ForState(t, time.Minute, "the message's events to be SENT", func() (bool, string) {
		var sent, left int
		if err := pg.Pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE state = 'SENT'), count(*) FILTER (WHERE state <> 'SENT')
			FROM msg_event WHERE msg_id = $1`, id).Scan(&sent, &left); err != nil {
			t.Fatal(err)
		}
		return sent > 0 && left == 0, fmt.Sprintf("%d SENT, %d not", sent, left)
	})
	// A consumer of the same principal reads the record, over the same listener.
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.SASL.Addr()), kgo.DialTLSConfig(tlsTo(t, broker.CA)),
		kgo.SASL(scram.Auth{User: broker.User, Pass: broker.Password}.AsSha512Mechanism()),
		kgo.ConsumeTopics(topicMsg), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var flids []string
	testwait.ForState(t, 30*time.Second, "the KAFKA:msg record over SASL_SSL", func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if err := contracttest.CheckRecord(outbox.TargetMsg, r); err != nil {
				t.Error(err)
			}
			flids = append(flids, string(r.Key))
		})
		return len(flids) > 0, strconv.Itoa(len(flids)) + " records"
	})
	if flids[0] != f.FLID {
		t.Errorf("record key %q, want %q", flids[0], f.FLID)
	}
	out := s.Output("dispatcher")
	if strings.Contains(out, broker.Password) {
		t.Error("the dispatcher's log shows the SASL password")
	}
	if !strings.Contains(out, "SASL/SCRAM-SHA-512") {
		t.Errorf("the start-up log does not say how the dispatcher connects:\n%s", out)
	}

	// A wrong password: the brokers answer and refuse, which no wait cures.
	if err := s.StartBinary("dispatcher-wrong-password", "msgx-dispatcher", nil, "MSGX_ADMIN_ADDR=127.0.0.1:0",
		"MSGX_KAFKA_SASL_PASSWORD_FILE="+secret("wrong", "wrong-"+broker.Password)); err != nil {
		t.Fatal(err)
	}
	testwait.ForState(t, time.Minute, "the dispatcher with a wrong password to stop", func() (bool, string) {
		_, exited := s.Exited("dispatcher-wrong-password")
		return exited, "running"
	})
	code, _ := s.Exited("dispatcher-wrong-password")
	wrong := s.Output("dispatcher-wrong-password")
	if code != service.ExitSettingsRefused || !strings.Contains(wrong, "MSGX_KAFKA_SASL_PASSWORD") {
		t.Errorf("exit %d (want %d) with a log that should name MSGX_KAFKA_SASL_PASSWORD:\n%s", code, service.ExitSettingsRefused, wrong)
	}
	if strings.Contains(wrong, broker.Password) {
		t.Error("the refused dispatcher's log shows a password")
	}
}

// scramStack is a stack of the five binaries on the test's databases whose dispatcher logs in to
// broker's SASL listener with SCRAM-SHA-512 over TLS, verifying the broker against its CA; the
// password file is each start's. The processes' output is logged when the test fails.
func scramStack(t *testing.T, pg *pgtest.DB, my *mysqltest.DB, rdb *redistest.Redis, broker *kafkatest.Secured,
	topicMsg, topicSchd, txnID string) *stack.Stack {
	t.Helper()
	s := stack.New(binaries(t), append([]string{
		"MSGX_PG_DSN=" + pg.DSN,
		"MSGX_MYSQL_DSN=" + my.ServiceDSN,
		"MSGX_REDIS_URL=" + rdb.URL,
		"MSGX_REDIS_PREFIX=" + rdb.Prefix,
		"MSGX_ADMIN_ADDR=127.0.0.1:0",
		"MSGX_PIPELINE_POLL_INTERVAL=100ms",
		"MSGX_SCHD_FLUSH_PERIOD=200ms",
		"MSGX_SHUTDOWN_TIMEOUT=5s",
		"MSGX_LOG_LEVEL=info",
		"MSGX_KAFKA_BROKERS=" + broker.SASL.Addr(),
		"MSGX_KAFKA_TOPIC_MSG=" + topicMsg,
		"MSGX_KAFKA_TOPIC_SCHD=" + topicSchd,
		"MSGX_KAFKA_TRANSACTIONAL_ID=" + txnID,
		"MSGX_KAFKA_TLS=true",
		"MSGX_KAFKA_TLS_CA=" + broker.CA,
		"MSGX_KAFKA_SASL_MECHANISM=SCRAM-SHA-512",
		"MSGX_KAFKA_SASL_USERNAME=" + broker.User,
	}, startupBackoff...), nil)
	t.Cleanup(func() {
		s.StopAll(10 * time.Second)
		if t.Failed() {
			for _, r := range []string{"ingest", "pump", "dispatcher", "dispatcher-wrong-password"} {
				t.Logf("%s:\n%s", r, s.Output(r))
			}
		}
	})
	return s
}

// startPipeline starts the dispatcher (its admin endpoint on admin, with dispatcherEnv), ingest
// and the pump, and waits until the dispatcher is ready.
func startPipeline(t *testing.T, s *stack.Stack, admin string, dispatcherEnv ...string) {
	t.Helper()
	if err := s.Start("dispatcher", nil, append([]string{"MSGX_ADMIN_ADDR=" + admin}, dispatcherEnv...)...); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"ingest", "pump"} {
		if err := s.Start(r, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, s, "dispatcher", admin)
}

// tlsTo verifies a broker's certificate against the CA file ca.
func tlsTo(t *testing.T, ca string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
