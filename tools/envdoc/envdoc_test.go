// Package envdoc keeps docs/environment.md true to pkg/config: the environment contract is read
// by operators who never open the code, so a parameter added, renamed or re-defaulted in the code
// must fail the build until the page says the same.
package envdoc

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/config"
)

// docPath is relative to this package's directory, where `go test` runs.
const docPath = "../../docs/environment.md"

// emptyDefault is how the page writes a default that is the empty string.
const emptyDefault = "_(empty)_"

// row is one parameter row of a table: | `MSGX_X` | `key` | `default` or _(empty)_ | meaning |.
type row struct {
	line    int
	key     string
	def     string
	defCell string
}

func TestEnvironmentDocMatchesConfig(t *testing.T) {
	rows, others := readDoc(t, filepath.FromSlash(docPath))
	keys := config.Keys()

	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		env := config.EnvName(k)
		r, ok := rows[env]
		if !ok {
			t.Errorf("docs/environment.md has no row for %s; add:\n| `%s` | `%s` | %s | <meaning> |",
				k, env, k, cell(keys[k]))
			continue
		}
		if r.key != k {
			t.Errorf("docs/environment.md:%d: %s names key %q, want %q", r.line, env, r.key, k)
		}
		if r.def != keys[k] {
			t.Errorf("docs/environment.md:%d: %s default is %s, the code's is %s", r.line, env, r.defCell, cell(keys[k]))
		}
	}

	known := map[string]bool{}
	for k := range keys {
		known[config.EnvName(k)] = true
	}
	for env, r := range rows {
		if !known[env] {
			t.Errorf("docs/environment.md:%d: %s is not a parameter of pkg/config (removed or renamed?)", r.line, env)
		}
	}
	// Variables outside the parameter table that the page may name: only those config reads itself.
	for env, line := range others {
		if env != "MSGX_CONFIG_FILE" {
			t.Errorf("docs/environment.md:%d: %s is not read by pkg/config", line, env)
		}
	}
}

// readDoc returns the parameter rows by variable, and every other MSGX_ variable that starts a
// table row, with its line.
func readDoc(t *testing.T, path string) (map[string]row, map[string]int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open the environment contract: %v", err)
	}
	defer f.Close()
	rows := map[string]row{}
	others := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "| `MSGX_") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		env := strings.Trim(cells[0], "`")
		if len(cells) < 4 || !isCode(cells[1]) {
			others[env] = n
			continue
		}
		if prev, dup := rows[env]; dup {
			t.Errorf("docs/environment.md:%d: %s already has a row at line %d", n, env, prev.line)
		}
		r := row{line: n, key: strings.Trim(cells[1], "`"), defCell: cells[2]}
		switch {
		case cells[2] == emptyDefault:
			r.def = ""
		case isCode(cells[2]):
			r.def = strings.Trim(cells[2], "`")
		default:
			t.Errorf("docs/environment.md:%d: default of %s must be `value` or %s, got %q", n, env, emptyDefault, cells[2])
			continue
		}
		rows[env] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows, others
}

func isCode(s string) bool { return len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' }

func cell(def string) string {
	if def == "" {
		return emptyDefault
	}
	return "`" + def + "`"
}
