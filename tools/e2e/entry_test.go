package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/testwait"
)

// A Redis password holding a character URL parsers split at (/ # ? @ %) reaches no output of
// pump, control or backfill, whole or in part, set directly or through MSGX_REDIS_URL_FILE; the
// start-up error names the variable.
func TestRedisPasswordPiecesNeverReachTheOutput(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	type run struct{ name, pw string }
	var runs []run
	for i, pw := range []string{"Sec/retPart1x", "Sec#retPart2x", "Sec?retPart3x", "Sec%retPart4x", "12345/retPart5x"} {
		for _, role := range []string{"pump", "control", "backfill"} {
			u := "redis://:" + pw + "@127.0.0.1:6379/0"
			name := fmt.Sprintf("%s-%d-env", role, i)
			if err := e.stack.StartBinary(name, "msgx-"+role, nil, "MSGX_REDIS_URL="+u); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run{name, pw})
			file := filepath.Join(dir, fmt.Sprintf("redis-%s-%d", role, i))
			if err := os.WriteFile(file, []byte(u+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			name = fmt.Sprintf("%s-%d-file", role, i)
			if err := e.stack.StartBinary(name, "msgx-"+role, nil, "MSGX_REDIS_URL=", "MSGX_REDIS_URL_FILE="+file); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run{name, pw})
		}
	}
	// '@' parses (the user info ends at the last '@'): an unparsable database number stops the
	// service there, and its error quotes the path, not the password.
	for _, role := range []string{"pump", "control", "backfill"} {
		name := role + "-at"
		if err := e.stack.StartBinary(name, "msgx-"+role, nil, "MSGX_REDIS_URL=redis://:Sec@retPart6x@127.0.0.1:6379/notadb"); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{name, "Sec@retPart6x"})
	}
	leaks := 0
	for _, r := range runs {
		testwait.ForState(t, 60*time.Second, r.name+" to exit", func() (bool, string) {
			_, exited := e.stack.Exited(r.name)
			return exited, "running"
		})
		code, _ := e.stack.Exited(r.name)
		out := e.stack.Output(r.name)
		if code == 0 {
			t.Errorf("%s exited 0 with a bad Redis URL", r.name)
		}
		pieces := strings.FieldsFunc(r.pw, func(c rune) bool { return strings.ContainsRune("/#?@%", c) })
		for _, p := range append(pieces, r.pw, url.QueryEscape(r.pw), "%re") {
			if strings.Contains(out, p) {
				leaks++
				t.Errorf("%s printed %q of the password %q:\n%s", r.name, p, r.pw, out)
			}
		}
		if !strings.Contains(out, "MSGX_REDIS_URL") {
			t.Errorf("%s's error does not name MSGX_REDIS_URL:\n%s", r.name, out)
		}
	}
	t.Logf("%d runs (pump, control, backfill × 5 passwords × env and _FILE, + '@'): %d leaked a piece of the password", len(runs), leaks)
}
