package aodb_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/logging"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// The driver's own line about a connection the server closed ("[mysql] … closing bad idle
// connection", "broken pipe") goes through the JSON logger, not to stderr.
func TestDriverLinesGoThroughTheJSONLogger(t *testing.T) {
	my := mysqltest.New(t)
	var out testlog.Buffer
	aodb.RouteDriverLog(logging.New(&out, "msgx-test", "info", my.ServiceDSN))
	t.Cleanup(func() { aodb.RouteDriverLog(logging.New(&bytes.Buffer{}, "msgx-test", "info")) })
	in := openInbox(t, my, 5*time.Second)
	if err := in.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(my.ServiceDSN)
	if err != nil {
		t.Fatal(err)
	}
	// The server ends the idle connection, as a restart or wait_timeout would.
	rows, err := my.Admin.Query(`SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?`, cfg.User)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	_ = rows.Close()
	for _, id := range ids {
		if _, err := my.Admin.Exec(`KILL ?`, id); err != nil {
			t.Fatal(err)
		}
	}
	// The ping must meet a connection the server has closed, not one it is still closing.
	testwait.For(t, 10*time.Second, "the killed sessions gone", func() bool {
		var n int
		if err := my.Admin.QueryRow(`SELECT count(*) FROM information_schema.PROCESSLIST WHERE USER = ?`, cfg.User).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if err := in.Ping(t.Context()); err != nil {
		t.Fatalf("ping after the kill: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	found := 0
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if rec["msg"] == "mysql driver" && rec["level"] == "WARN" {
			found++
		}
	}
	t.Logf("killed %d connections; driver lines through the JSON logger: %d: %s", len(ids), found, out.String())
	if found == 0 {
		t.Errorf("no driver line in the JSON log:\n%s", out.String())
	}
}
