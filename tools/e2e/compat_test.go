package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// TestCompatHTTPMessageTakesTheUpstreamPath posts a GBK-encoded message to ingest's compat
// HTTP entry (R-INGEST-12): it lands in the inbox as characters and then goes through the same
// five facts as a row AODB wrote, with its Chinese text intact in the flight state.
// Guards R-INV-4.
func TestCompatHTTPMessageTakesTheUpstreamPath(t *testing.T) {
	e := newEnv(t)
	e.startAll(t)
	msgs := scenario("E2E-HTTP")
	e.insert(t, msgs[:1]) // the flight, written upstream
	remark := "航班延误"
	xml := traffic.FLOP(50, time.Date(2026, 11, 30, 7, 0, 0, 0, time.FixedZone("CST", 8*3600)), "E2E-HTTP", "",
		"REMC", "<REMC>"+remark+"</REMC>")
	xml = `<?xml version="1.0" encoding="GBK"?>` + xml[len(`<?xml version="1.0" encoding="UTF-8"?>`):]
	body, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(xml))
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	testwait.ForState(t, 30*time.Second, "ingest's compat HTTP to accept the message", func() (bool, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+e.httpAddr+"/cminmsgs/send", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/xml; charset=GBK")
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var out struct{ ID int64 }
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
			return false, resp.Status
		}
		id = out.ID
		return true, ""
	})
	testwait.ForState(t, 60*time.Second, "the five facts of the posted message", func() (bool, string) {
		f := e.facts(t, id)
		return f.inInbox && f.terminal && f.marked && f.delivered && f.state == "SUCCEEDED", f.String()
	})
	var remc string
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT remc FROM flight_schd WHERE flid = 'E2E-HTTP'`).Scan(&remc); err != nil {
		t.Fatal(err)
	}
	if remc != remark {
		t.Errorf("flight_schd.remc = %q, want %q (no mojibake)", remc, remark)
	}
}
