package aodb_test

import (
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/mysqltest"
)

func TestOutbound(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	in := openInbox(t, my, 5*time.Second)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 3, 0, 0, 500_000_000, time.UTC)
	text := "<MSG><META><SEQN>000042</SEQN><TYPE>RQRD</TYPE></META><RQRD><RTYP>GLST</RTYP></RQRD></MSG>\n"

	if _, found, err := in.FindOutbound(ctx, "AODB", text, now); err != nil || found {
		t.Fatalf("FindOutbound on an empty table = %v, %v; want not found", found, err)
	}
	id, err := in.InsertOutbound(ctx, "AODB", text, now)
	if err != nil || id <= 0 {
		t.Fatalf("InsertOutbound = %d, %v", id, err)
	}
	var got, routing string
	var inserted time.Time
	var ackReqd, errFlag int
	if err := my.Admin.QueryRowContext(ctx, `SELECT COUTMSGS_CLOB_MSG, ROUTINGID, COUTMSGS_DATE_INSERTED, COUTMSGS_ACK_REQD, COUTMSGS_ERROR
		FROM coutmsgs WHERE COUTMSGS_ID = ?`, id).Scan(&got, &routing, &inserted, &ackReqd, &errFlag); err != nil {
		t.Fatal(err)
	}
	if got != text || routing != "AODB" || !inserted.Equal(now.Truncate(time.Second)) || ackReqd != 0 || errFlag != 0 {
		t.Errorf("row = %q %q %v ack %d error %d", got, routing, inserted, ackReqd, errFlag)
	}

	// The row inserted in the same second as since (DATETIME has no fraction) is found.
	if fid, found, err := in.FindOutbound(ctx, "AODB", text, now); err != nil || !found || fid != id {
		t.Errorf("FindOutbound = %d, %v, %v; want %d", fid, found, err, id)
	}
	for name, c := range map[string]struct {
		routing, text string
		since         time.Time
	}{
		"other routing":      {"CIIMS", text, now},
		"inserted before":    {"AODB", text, now.Add(2 * time.Second)},
		"differs in case":    {"AODB", strings.ToLower(text), now},
		"trailing space off": {"AODB", strings.TrimSuffix(text, "\n"), now},
	} {
		if fid, found, err := in.FindOutbound(ctx, c.routing, c.text, c.since); err != nil || found {
			t.Errorf("%s: FindOutbound = %d, %v, %v; want not found", name, fid, found, err)
		}
	}
}
