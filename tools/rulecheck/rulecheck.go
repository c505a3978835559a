// Package rulecheck keeps the repository's citations resolvable inside it. The rules of
// msgexchange have stable IDs (R-INGEST-3, R-FLOP-GTDT) defined in docs/rules.md and the
// product decisions have IDs (D-1) defined in docs/decisions.md; code and docs cite those IDs,
// never the design documents, style guide, decision list or format notes the project was
// written from, which live outside the repository where a reader cannot resolve them (D-17).
// Check reports, with file and line:
//
//   - a citation that does not resolve inside the repository, in a Go comment or string, in
//     any Markdown file, and in the proto, SQL, YAML, shell and build files: a design
//     document's file or section ("seed NNN §x.y", a gap or question number after it), the
//     design documents by their old collective name, a path into the reference folder beside the repository
//     (its README, its seeds, its style guide, its SIS notes), the SIS format notes by their
//     file name, a numbered section of the style guide, a number of the old decision list
//     ("DECISIONS n"), and a D- ID that docs/decisions.md does not define;
//   - in Go, a bare section sign with a number that names no document (docs/x.md §n does);
//   - a rule ID, or a group such as "the R-PUMP rules", that docs/rules.md does not define,
//     in a Go file, in docs/*.md or in README.md;
//   - an invariant of docs/rules.md that names no guarding test, names a test function that
//     does not exist in the tree, or names a test whose doc comment does not cite it;
//   - a decision of docs/decisions.md defined twice.
//
// Generated Go files (*.pb.go, or "Code generated … DO NOT EDIT.") and testdata and vendor
// directories are not checked. The design documents are named in words, without their files
// or sections (docs/decisions.md, "The design documents").
package rulecheck

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// RulesPath is where the rules are defined, relative to the repository root.
const RulesPath = "docs/rules.md"

// DecisionsPath is where the decisions are defined, relative to the repository root.
const DecisionsPath = "docs/decisions.md"

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
	Decisions  map[string]int // decision ID (D-6) → line of its definition
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
	seedCite  = regexp.MustCompile(`(?i)\bseeds?(?:\s|//|\*|#|-)+\d{3}\b(?:\s*(?:§\s*[0-9.]*[0-9]|[GQ][0-9]+))?`)
	decision  = regexp.MustCompile(`(?i)\bdecisions?(?:\s|//|\*|#|-)+\d+\b`)
	section   = regexp.MustCompile(`§\s*\d`)
	docPrefix = regexp.MustCompile(`(\.md|STYLE)\s*$`) // "docs/codec.md §6" names a section of a document, not of a seed

	// The citations of material outside the repository (D-17), each with what to do instead.
	// The patterns are spelled so that their own source does not match them.
	outsideCites = []struct {
		re  *regexp.Regexp
		msg string
	}{
		{seedCite, "cites a design document's file or section (%q): name the document in words (docs/decisions.md, \"The design documents\") or cite the rule ID of docs/rules.md"},
		{regexp.MustCompile(`(?i)\bthe\s+seeds\b|\bseeds'`), "refers to the design seeds (%q), which are outside the repository: name the design document (docs/decisions.md) or cite the rule"},
		{regexp.MustCompile(`(?:^|[^A-Za-z0-9_.-])(?:\.\./)*(?:shared|seeds)[/]\S*`), "cites a path outside the repository (%q): cite the page of docs/ that states it (docs/rules.md, docs/decisions.md, docs/sis-format.md)"},
		{regexp.MustCompile(`\bFORMAT[.]md\b`), "cites the SIS format notes outside the repository (%q): cite docs/sis-format.md"},
		{regexp.MustCompile(`\bSTYLE(?:[.]md\b|\s*§\s*\d+)`), "cites the style guide outside the repository (%q): say why in words, or cite a rule"},
		{decision, "cites the outside decision list (%q): cite the decision's ID of docs/decisions.md (D-n)"},
	}
	decisionID  = regexp.MustCompile(`(^|[^A-Za-z0-9_-])(D-[0-9]+)\b`)
	decisionDef = regexp.MustCompile(`^## (D-[0-9]+)\b`)
)

// ParseDecisions reads the decision IDs a decisions document defines (its "## D-n" headings).
func ParseDecisions(path string, text []byte) (map[string]int, []Problem) {
	ids := map[string]int{}
	var problems []Problem
	for i, line := range strings.Split(string(text), "\n") {
		m := decisionDef.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if first, ok := ids[m[1]]; ok {
			problems = append(problems, Problem{path, i + 1, fmt.Sprintf(
				"%s is defined twice (first on line %d): give the new decision the next free number", m[1], first)})
			continue
		}
		ids[m[1]] = i + 1
	}
	return ids, problems
}

// outside reports the citations in text that do not resolve inside the repository: material
// outside it, and D- IDs that docs/decisions.md does not define. lineOf maps an offset of text
// to its line.
func outside(file, what, text string, lineOf func(int) int, rules Rules) []Problem {
	var problems []Problem
	for _, c := range outsideCites {
		for _, m := range c.re.FindAllStringIndex(text, -1) {
			cite := strings.TrimLeft(text[m[0]:m[1]], " \t\n(`\"'*")
			problems = append(problems, Problem{file, lineOf(m[1] - len(cite)), what + " " + fmt.Sprintf(c.msg, oneLine(cite))})
		}
	}
	for _, m := range decisionID.FindAllStringSubmatchIndex(text, -1) {
		id := text[m[4]:m[5]]
		if _, ok := rules.Decisions[id]; !ok {
			problems = append(problems, Problem{file, lineOf(m[4]), fmt.Sprintf(
				"%s %s is not defined in %s: cite a decision defined there, or add it", what, id, DecisionsPath)})
		}
	}
	return problems
}

// textFile reports whether rel is a file whose text is checked for outside citations.
func textFile(rel string) bool {
	switch filepath.Ext(rel) {
	case ".md", ".proto", ".sql", ".yaml", ".yml", ".sh", ".tpl", ".txt":
		return true
	}
	switch filepath.Base(rel) {
	case "Makefile", "Dockerfile", ".gitignore", ".dockerignore":
		return true
	}
	return false
}

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
	decisions, err := os.ReadFile(filepath.Join(root, DecisionsPath))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("rulecheck: %w", err)
	}
	// Without the file every D- ID is undefined, and each citation says so.
	var ps []Problem
	rules.Decisions, ps = ParseDecisions(DecisionsPath, decisions)
	problems = append(problems, ps...)
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
		case textFile(rel):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			text := string(src)
			problems = append(problems, outside(rel, "text", text, func(off int) int { return 1 + strings.Count(text[:off], "\n") }, rules)...)
			if strings.HasSuffix(rel, ".md") && (strings.HasPrefix(rel, "docs/") || rel == "README.md") {
				for i, line := range strings.Split(text, "\n") {
					problems = append(problems, citations(rel, i+1, line, rules)...)
				}
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
		problems = append(problems, outside(rel, what, text, lineOf, rules)...)
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
	problems = append(problems, contextFreeLogs(rel, fset, f)...)
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

// processing lists the packages that run inside a message's (or an event's) processing, whose
// every log line must carry the message's trace_id (docs/operations.md, "Logs"): the trace is
// in the context, so a line logged without one cannot be joined to the message in Jaeger.
var processing = []string{"services/pump/internal/", "services/dispatcher/internal/"}

// logMethods are slog's context-free calls; each has a …Context form.
var logMethods = map[string]bool{"Debug": true, "Info": true, "Warn": true, "Error": true}

// contextFreeLogs reports, in the non-test files of the processing packages, the calls of the
// form x.Info("message", …) (a logger method whose first argument is a string literal).
func contextFreeLogs(rel string, fset *token.FileSet, f *ast.File) []Problem {
	if strings.HasSuffix(rel, "_test.go") || !slices.ContainsFunc(processing, func(p string) bool { return strings.HasPrefix(rel, p) }) {
		return nil
	}
	var problems []Problem
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !logMethods[sel.Sel.Name] {
			return true
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			problems = append(problems, Problem{rel, fset.Position(call.Pos()).Line, fmt.Sprintf(
				"log call %s(%s, …) without a context in a message-processing package: use %sContext(ctx, …) so the line carries the trace_id",
				sel.Sel.Name, lit.Value, sel.Sel.Name)})
		}
		return true
	})
	return problems
}
