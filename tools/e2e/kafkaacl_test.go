package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// TestDispatcherWithExactlyTheDocumentedACLs runs the binaries against a broker with
// authorization on (StandardAuthorizer), the dispatcher's principal granted exactly the ACLs of
// docs/dispatcher.md ("Kafka prerequisites") and nothing more: the pipeline delivers. Then each
// ACL is taken away in turn while a message waits to go out, and what the operator sees is
// asserted: a WARN naming the authorization failure, a counter that moves, /readyz still ready
// (a restart would not grant the ACL), and the events PENDING and uncharged, never DEAD. Once
// the ACL is granted again, the message goes out.
func TestDispatcherWithExactlyTheDocumentedACLs(t *testing.T) {
	broker := kafkatest.OwnSecured(t, kafkatest.Authorizer)
	topicMsg := broker.Topic(t, "msgx.flight.msg", 3, nil)
	topicSchd := broker.Topic(t, "msgx.flight.schd", 3, map[string]string{"cleanup.policy": "compact"})
	txnID := kafkatest.Name("msgx-dispatcher")
	acls := []struct {
		name    string
		b       *kadm.ACLBuilder
		counter string // the series that counts the refusal
	}{
		{"Write on the transactional ids", kadm.NewACLs().TransactionalIDs(txnID).ResourcePatternType(kadm.ACLPatternPrefixed).
			Operations(kadm.OpWrite), `msgx_dispatcher_lane_failures_total{reason="fence",target="KAFKA:msg"}`},
		{"Write on the topics", kadm.NewACLs().Topics(topicMsg, topicSchd).Operations(kadm.OpWrite),
			`msgx_dispatcher_unavailable_total{target="KAFKA:msg"}`},
	}
	for _, a := range acls {
		broker.Grant(t, a.b)
	}
	password := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(password, []byte(broker.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	pg, my, rdb := pgtest.New(t), mysqltest.New(t), redistest.New(t)
	admin := freePort(t)
	s := scramStack(t, pg, my, rdb, broker, topicMsg, topicSchd, txnID)
	startPipeline(t, s, admin, "MSGX_KAFKA_SASL_PASSWORD_FILE="+password)
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	next := 0
	send := func() int64 {
		next++
		f := traffic.Flight{FLID: fmt.Sprintf("ACL-%d", next), ALCD: "CA", FLNO: fmt.Sprintf("CA%d", 1900+next), MVIN: "D",
			SODT: day.Add(9 * time.Hour), FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
		now := time.Now()
		return my.InsertInbox(t, traffic.ADFT(int64(next), day.Add(6*time.Hour), f), &now)
	}
	// states is the message's KAFKA:msg events: how many are SENT, PENDING, DEAD, and the
	// attempts charged to them.
	states := func(id int64) (sent, pending, dead, attempts int) {
		t.Helper()
		if err := pg.Pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE state = 'SENT'), count(*) FILTER (WHERE state = 'PENDING'),
			count(*) FILTER (WHERE state = 'DEAD'), coalesce(sum(attempts), 0)
			FROM msg_event WHERE msg_id = $1 AND target = 'KAFKA:msg'`, id).Scan(&sent, &pending, &dead, &attempts); err != nil {
			t.Fatal(err)
		}
		return
	}
	waitSent := func(id int64) {
		t.Helper()
		testwait.ForState(t, 2*time.Minute, fmt.Sprintf("message %d's events to be SENT", id), func() (bool, string) {
			sent, pending, dead, _ := states(id)
			return sent > 0 && pending == 0 && dead == 0, fmt.Sprintf("%d SENT, %d PENDING, %d DEAD", sent, pending, dead)
		})
	}
	waitSent(send())

	for _, a := range acls {
		t.Run("without "+a.name, func(t *testing.T) {
			before, _ := metricValue(scrapeOrEmpty(admin), a.counter)
			logged := strings.Count(s.Output("dispatcher"), "authoriz")
			broker.Revoke(t, a.b)
			id := send()
			testwait.ForState(t, time.Minute, "the refusal to show in "+a.counter+" and the log", func() (bool, string) {
				now, _ := metricValue(scrapeOrEmpty(admin), a.counter)
				more := strings.Count(s.Output("dispatcher"), "authoriz") - logged
				return now > before && more > 0, fmt.Sprintf("%s %v → %v, %d new log lines naming the authorization", a.counter, before, now, more)
			})
			sent, pending, dead, attempts := states(id)
			if sent != 0 || pending == 0 || dead != 0 || attempts != 0 {
				t.Errorf("during the refusal: %d SENT, %d PENDING, %d DEAD, %d attempts charged; want PENDING and uncharged", sent, pending, dead, attempts)
			}
			if code, body := startupReadyz(admin); code != http.StatusOK {
				t.Errorf("/readyz during the refusal = %d %q, want ready: a restart would not grant the ACL", code, body)
			}
			t.Logf("without %s: %s moved, events PENDING uncharged, /readyz ready", a.name, a.counter)
			broker.Grant(t, a.b)
			waitSent(id)
		})
	}
}
