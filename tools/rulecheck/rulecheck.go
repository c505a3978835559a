// Package rulecheck keeps docs/rules.md and the code's citations of it in step. The rules of
// msgexchange have stable IDs (R-INGEST-3, R-FLOP-GTDT) defined in docs/rules.md; code and
// docs cite those IDs instead of the design seeds, which live outside the repository and which
// a reader cannot resolve. Check reports, with file and line:
//
//   - a comment or string in a Go file that cites a seed section ("seed NNN §x.y", or a bare
//     section sign with a number) or a DECISION number ("DECISIONS n") instead of a rule ID;
//   - a rule ID, or a group such as "the R-PUMP rules", that docs/rules.md does not define,
//     in a Go file, in docs/*.md or in README.md;
//   - an invariant of docs/rules.md that names no guarding test, names a test function that
//     does not exist in the tree, or names a test whose doc comment does not cite it.
//
// Generated Go files (*.pb.go, or "Code generated … DO NOT EDIT.") and testdata and vendor
// directories are not checked. docs/rules.md is the one place where seed sections and DECISION
// numbers are cited, as the sources of the rules.
package rulecheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// RulesPath is where the rules are defined, relative to the repository root.
const RulesPath = "docs/rules.md"

// Problem is one finding: where, and what to do about it.
type Problem struct {
	File string // relative to the root
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// Rules is what docs/rules.md defines.
type Rules struct {
	IDs        map[string]int // rule ID → line of its definition
	Groups     map[string]bool
	Invariants []Invariant
}

// Invariant is one R-INV rule and the tests it names after "Guarded by".
type Invariant struct {
	ID    string
	Line  int
	Tests []string
}

var (
	// A definition is a list item that starts with the ID in bold.
	definition = regexp.MustCompile(`^- \*\*(R-[A-Z]+-[A-Z0-9]+)\*\*`)
	// A citation is an ID or a group ("R-PUMP") not glued to a longer word.
	citation  = regexp.MustCompile(`(^|[^A-Za-z0-9_-])(R-[A-Z]+(?:-[A-Z0-9]+)?)`)
	testName  = regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")
	seedCite  = regexp.MustCompile(`(?i)\bseeds?(?:\s|//|\*)+\d{3}\b(?:\s*(?:§\s*[0-9.]*[0-9]|[GQ][0-9]+))?`)
	decision  = regexp.MustCompile(`(?i)\bdecisions?(?:\s|//|\*)+\d+\b`)
	section   = regexp.MustCompile(`§\s*\d`)
	docPrefix = regexp.MustCompile(`(\.md|STYLE)\s*$`) // "docs/codec.md §6" names a section of a document, not of a seed
)

// ParseRules reads the definitions and invariants of a rules document.
func ParseRules(path string, text []byte) (Rules, []Problem) {
	r := Rules{IDs: map[string]int{}, Groups: map[string]bool{}}
	var problems []Problem
	var inv *Invariant
	var guarded bool
	finish := func() {
		if inv == nil {
			return
		}
		if !guarded || len(inv.Tests) == 0 {
			problems = append(problems, Problem{path, inv.Line, fmt.Sprintf(
				"invariant %s names no test: end it with \"Guarded by `TestX`.\" naming the tests that fail when it breaks", inv.ID)})
		}
		r.Invariants = append(r.Invariants, *inv)
		inv = nil
	}
	for i, line := range strings.Split(string(text), "\n") {
		n := i + 1
		if strings.HasPrefix(line, "- ") || strings.HasPrefix(line, "#") {
			finish()
		}
		if m := definition.FindStringSubmatch(line); m != nil {
			id := m[1]
			if first, ok := r.IDs[id]; ok {
				problems = append(problems, Problem{path, n, fmt.Sprintf(
					"%s is defined twice (first on line %d): give the new rule the next free number of its group", id, first)})
			} else {
				r.IDs[id] = n
			}
			r.Groups[id[:strings.LastIndex(id, "-")]] = true
			if strings.HasPrefix(id, "R-INV-") {
				inv, guarded = &Invariant{ID: id, Line: n}, false
			}
		}
		if inv != nil {
			rest := line
			if k := strings.Index(rest, "Guarded by"); k >= 0 {
				guarded, rest = true, rest[k:]
			}
			if guarded {
				for _, m := range testName.FindAllStringSubmatch(rest, -1) {
					inv.Tests = append(inv.Tests, m[1])
				}
			}
		}
	}
	finish()
	return r, problems
}

// Check checks the tree under root against its docs/rules.md.
func Check(root string) ([]Problem, error) {
	text, err := os.ReadFile(filepath.Join(root, RulesPath))
	if err != nil {
		return nil, fmt.Errorf("rulecheck: %w", err)
	}
	rules, problems := ParseRules(RulesPath, text)
	tests := map[string][]testFunc{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "vendor", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".pb.go"):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			ps, ts := checkGo(rel, src, rules)
			problems = append(problems, ps...)
			for _, t := range ts {
				tests[t.name] = append(tests[t.name], t)
			}
		case strings.HasSuffix(path, ".md") && (strings.HasPrefix(rel, "docs/") || rel == "README.md"):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(src), "\n") {
				problems = append(problems, citations(rel, i+1, line, rules)...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rulecheck: %w", err)
	}
	problems = append(problems, checkGuards(rules, tests)...)
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].File != problems[j].File {
			return problems[i].File < problems[j].File
		}
		return problems[i].Line < problems[j].Line
	})
	return problems, nil
}

// testFunc is a top-level TestX function of a _test.go file and its doc comment.
type testFunc struct {
	name, file string
	line       int
	doc        string
}

func checkGo(rel string, src []byte, rules Rules) ([]Problem, []testFunc) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
	if err != nil {
		return []Problem{{rel, 1, fmt.Sprintf("cannot parse: %v", err)}}, nil
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	var problems []Problem
	// text is the source of a comment group or a string literal, so that a citation broken
	// over two comment lines ("seed\n// 003") is still one match.
	check := func(pos token.Pos, text string, what string) {
		start := fset.Position(pos).Line
		lineOf := func(off int) int { return start + strings.Count(text[:off], "\n") }
		for _, m := range seedCite.FindAllStringIndex(text, -1) {
			problems = append(problems, Problem{rel, lineOf(m[0]), fmt.Sprintf(
				"%s cites a seed section (%q): cite the rule ID of docs/rules.md instead, or state the rule in words", what, oneLine(text[m[0]:m[1]]))})
		}
		for _, m := range decision.FindAllStringIndex(text, -1) {
			problems = append(problems, Problem{rel, lineOf(m[0]), fmt.Sprintf(
				"%s cites a DECISION number (%q): cite the rule ID of docs/rules.md instead", what, oneLine(text[m[0]:m[1]]))})
		}
		for _, m := range section.FindAllStringIndex(text, -1) {
			line := text[:m[0]]
			if k := strings.LastIndex(line, "\n"); k >= 0 {
				line = line[k+1:]
			}
			if docPrefix.MatchString(line) || seedCite.MatchString(text[max(0, m[0]-24):m[0]]) {
				continue // a document's section, or already reported with its seed
			}
			problems = append(problems, Problem{rel, lineOf(m[0]), fmt.Sprintf(
				"%s cites a section (%q) without naming a document: cite the rule ID of docs/rules.md, or name the doc (docs/x.md §n)", what, text[m[0]:m[1]])})
		}
		for i, line := range strings.Split(text, "\n") {
			problems = append(problems, citations(rel, start+i, line, rules)...)
		}
	}
	for _, g := range f.Comments {
		check(g.Pos(), string(src[fset.Position(g.Pos()).Offset:fset.Position(g.End()).Offset]), "comment")
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			check(lit.Pos(), lit.Value, "string")
		}
		return true
	})
	var tests []testFunc
	if strings.HasSuffix(rel, "_test.go") {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			t := testFunc{name: fn.Name.Name, file: rel, line: fset.Position(fn.Pos()).Line}
			if fn.Doc != nil {
				t.doc = fn.Doc.Text()
			}
			tests = append(tests, t)
		}
	}
	return problems, tests
}

// citations reports the rule IDs and groups on one line that the rules do not define.
func citations(file string, line int, text string, rules Rules) []Problem {
	var problems []Problem
	for _, m := range citation.FindAllStringSubmatch(text, -1) {
		id := m[2]
		switch {
		case strings.Count(id, "-") == 2:
			if _, ok := rules.IDs[id]; !ok {
				problems = append(problems, Problem{file, line, fmt.Sprintf(
					"%s is not defined in %s: cite an ID defined there, or add the rule", id, RulesPath)})
			}
		case !rules.Groups[id]:
			problems = append(problems, Problem{file, line, fmt.Sprintf(
				"%s is not a group of rules in %s: cite an existing group or ID", id, RulesPath)})
		}
	}
	return problems
}

// checkGuards reports the invariants whose tests do not exist or do not cite them.
func checkGuards(rules Rules, tests map[string][]testFunc) []Problem {
	var problems []Problem
	for _, inv := range rules.Invariants {
		for _, name := range inv.Tests {
			defs := tests[name]
			if len(defs) == 0 {
				problems = append(problems, Problem{RulesPath, inv.Line, fmt.Sprintf(
					"%s is guarded by %s, which does not exist: name an existing test (grep 'func Test'), or write it", inv.ID, name)})
				continue
			}
			cited := false
			for _, d := range defs {
				cited = cited || citesID(d.doc, inv.ID)
			}
			if !cited {
				d := defs[0]
				problems = append(problems, Problem{d.file, d.line, fmt.Sprintf(
					"%s guards %s (%s:%d) but its doc comment does not say so: add the line \"// Guards %s.\"", name, inv.ID, RulesPath, inv.Line, inv.ID)})
			}
		}
	}
	return problems
}

// citesID reports whether text cites id itself (R-INV-1 is not cited by R-INV-12).
func citesID(text, id string) bool {
	for _, m := range citation.FindAllStringSubmatch(text, -1) {
		if m[2] == id {
			return true
		}
	}
	return false
}

func oneLine(s string) string {
	return string(bytes.Join(bytes.Fields([]byte(s)), []byte(" ")))
}
