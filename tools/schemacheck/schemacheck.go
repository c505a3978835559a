// Package schemacheck checks the migration files against the rules that keep the previous
// release working on a new schema (R-SCHEMA-1): the chart's migration Job runs while the old
// binaries still serve, so a migration only expands what they use, and a contraction waits for
// a later release and says so.
package schemacheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Baseline is the last migration written before these rules; older files are history and are
// not checked (they ran on every database long ago).
const Baseline = "00017_expect.sql"

// ContractMarker, in a comment line right before a statement, marks a deliberate contraction
// (a drop, a type change, a new NOT NULL) and says why the previous release no longer needs what
// it removes.
const ContractMarker = "-- contract:"

// Problem is one refused statement.
type Problem struct {
	File, Statement, Why string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s: %s: %s", p.File, p.Why, oneLine(p.Statement))
}

var rules = []struct {
	re       *regexp.Regexp
	why      string
	contract bool // allowed behind ContractMarker
}{
	{regexp.MustCompile(`(?i)\bRENAME\b`), "a rename breaks the release that still uses the old name: add the new name, copy, and drop the old one a release later", false},
	{regexp.MustCompile(`(?i)\bDROP\s+(COLUMN|TABLE|INDEX|VIEW|FUNCTION)\b`), "a drop breaks the release that still uses it: drop only what the previous release no longer uses, and say so with " + ContractMarker, true},
	{regexp.MustCompile(`(?i)\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b`), "a type change breaks the release that writes the old type", true},
	{regexp.MustCompile(`(?i)\bSET\s+NOT\s+NULL\b`), "a new NOT NULL breaks the release that does not write the column", true},
}

// addNotNull is an ADD COLUMN that is NOT NULL without a DEFAULT: the previous release's
// inserts, which do not name it, would fail.
var (
	addColumn = regexp.MustCompile(`(?i)\bADD\s+COLUMN\b[^,;]*`)
	notNull   = regexp.MustCompile(`(?i)\bNOT\s+NULL\b`)
	hasDef    = regexp.MustCompile(`(?i)\bDEFAULT\b`)
)

// Check checks the Up section of one migration file.
func Check(file, text string) []Problem {
	up := text
	if i := strings.Index(up, "-- +goose Down"); i >= 0 {
		up = up[:i]
	}
	var out []Problem
	for _, stmt := range statements(up) {
		body, marked := stmt.sql, stmt.contract
		for _, r := range rules {
			if r.re.MatchString(body) && !(r.contract && marked) {
				out = append(out, Problem{File: file, Statement: body, Why: r.why})
			}
		}
		for _, add := range addColumn.FindAllString(body, -1) {
			if notNull.MatchString(add) && !hasDef.MatchString(add) && !marked {
				out = append(out, Problem{File: file, Statement: body,
					Why: "a new column NOT NULL without a DEFAULT breaks the release whose inserts do not name it"})
			}
		}
	}
	return out
}

type statement struct {
	sql      string
	contract bool
}

// statements splits SQL on semicolons outside dollar-quoted bodies and drops comment lines,
// noting a ContractMarker comment before a statement.
func statements(sql string) []statement {
	var out []statement
	var cur strings.Builder
	contract, inDollar := false, false
	for _, line := range strings.Split(sql, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			if strings.HasPrefix(trimmed, ContractMarker) {
				contract = true
			}
			continue
		}
		if strings.Count(line, "$$")%2 == 1 {
			inDollar = !inDollar
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if !inDollar && strings.HasSuffix(trimmed, ";") {
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, statement{sql: s, contract: contract})
			}
			cur.Reset()
			contract = false
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, statement{sql: s, contract: contract})
	}
	return out
}

// CheckDir checks every migration in dir after Baseline.
func CheckDir(dir string) ([]Problem, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []Problem
	for _, f := range files {
		if filepath.Base(f) <= Baseline {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, Check(filepath.Base(f), string(b))...)
	}
	return out, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}
