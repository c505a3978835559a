package aodb_test

import (
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
)

// A text the driver's escaping would double past max_allowed_packet is stored as it is (it
// is a bound parameter); one the server cannot take even unescaped is refused as too large
// before it is sent, and the pool stays usable: never an error that reads as an outage.
func TestInsertSizesTheTextNotItsEscaping(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	in := openInbox(t, my, 20*time.Second)
	ctx := t.Context()
	var maxPacket int
	if err := my.Admin.QueryRowContext(ctx, `SELECT @@max_allowed_packet`).Scan(&maxPacket); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		text     string
		tooLarge bool
	}{
		{"backslashes whose escaping passes the limit", "<MSG>" + strings.Repeat(`\`, maxPacket/2+1<<20) + "</MSG>", false},
		{"quotes and backslashes", "<MSG>" + strings.Repeat(`'\"`, maxPacket/6) + "</MSG>", false},
		{"the limit itself", strings.Repeat("x", maxPacket), true},
	}
	for _, tc := range tests {
		id, err := in.Insert(ctx, tc.text, at)
		switch {
		case tc.tooLarge && !aodb.TooLarge(err):
			t.Errorf("%s (%d bytes): %v, want too large", tc.name, len(tc.text), err)
		case tc.tooLarge:
			if aodb.Rejected(err) {
				t.Errorf("%s: a too large text is also classified as rejected: %v", tc.name, err)
			}
		case err != nil:
			t.Errorf("%s (%d bytes): %v, want stored", tc.name, len(tc.text), err)
		default:
			var got string
			if err := my.Admin.QueryRowContext(ctx, `SELECT CMINMSGS_CLOB_MSG FROM cminmsgs WHERE CMINMSGS_ID = ?`, id).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.text {
				t.Errorf("%s: stored %d bytes, want the %d sent unchanged", tc.name, len(got), len(tc.text))
			}
		}
	}
	if _, err := in.Insert(ctx, "<MSG/>", at); err != nil {
		t.Errorf("a small message after the refusals: %v", err)
	}
}
