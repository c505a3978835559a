package rulecheck

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// A doc tells a reader to run something: `make bench`, `msgxctl get-status --watch`, or to
// follow a link to a section. Each of these must exist as written, or the reader is left with a
// command that fails or a link that lands nowhere. The checks below read every Markdown file of
// the repository: the commands in its code (fenced and indented blocks, inline code spans), its
// links to headings. What exists is read from the Makefile and from msgxctl itself (its help, so
// the command tree is the one the binary builds from the API's descriptor, not a list kept here).
// A citation of a section by its title (docs/runbooks.md, "Redis lost its data"), in a doc, a
// Go comment, the chart, the SQL or the Makefile, must name a heading (or a paragraph's bold
// lead) of that doc, so a section that moves or is renamed takes its citations along.

// cliTree is what msgxctl accepts: its commands by every name (aliases included) and, per
// command, the flags its help lists; hidden reports whether a flag the help does not list is
// accepted all the same (a hidden alias, kept for old scripts, which docs must not teach).
type cliTree struct {
	commands map[string]*cliCommand // by name and by alias
	global   map[string]bool        // persistent flags: name → takes a value
	hidden   func(command, flag string) bool
}

type cliCommand struct {
	name  string
	flags map[string]bool // long names and shorthands → takes a value
}

// docProblem is one finding of the doc-reference checks.
type docProblem struct {
	file string
	line int
	msg  string
}

func (p docProblem) String() string { return fmt.Sprintf("%s:%d: %s", p.file, p.line, p.msg) }

// snippet is a piece of code a doc shows, with the line it starts on.
type snippet struct {
	line int
	text string
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	inlineCode = regexp.MustCompile("`[^`]+`")
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdLink     = regexp.MustCompile(`\]\(([^)\s]*?\.md)?#([^)\s]+)\)`)
)

// snippets returns the code of a Markdown text: each line of a fenced or indented block, and
// each inline code span (which may run over a line break, as wrapped prose does).
func snippets(text string) (code []snippet, prose []snippet) {
	lines := strings.Split(text, "\n")
	inFence := false
	var para []string
	paraStart := 0
	flush := func() {
		if len(para) == 0 {
			return
		}
		prose = append(prose, snippet{paraStart, strings.Join(para, "\n")})
		para = nil
	}
	prevBlank := true
	for i, l := range lines {
		n := i + 1
		if fence.MatchString(l) {
			flush()
			inFence = !inFence
			prevBlank = false
			continue
		}
		if inFence {
			code = append(code, snippet{n, l})
			continue
		}
		// An indented block: four spaces after a blank line, not a list item's continuation.
		if strings.HasPrefix(l, "    ") && prevBlank && len(para) == 0 && !strings.HasPrefix(strings.TrimSpace(l), "-") {
			code = append(code, snippet{n, l})
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			prevBlank = true
			continue
		}
		prevBlank = false
		if len(para) == 0 {
			paraStart = n
		}
		para = append(para, l)
	}
	flush()
	for _, p := range prose {
		for _, m := range inlineCode.FindAllStringIndex(p.text, -1) {
			span := p.text[m[0]+1 : m[1]-1]
			code = append(code, snippet{p.line + strings.Count(p.text[:m[0]], "\n"), strings.ReplaceAll(span, "\n", " ")})
		}
	}
	return code, prose
}

// shellWords splits a line of code into words up to a comment; a word that ends a command
// (`|`, `;`, `&&`, `>` …) is kept as a separator.
func shellWords(s string) []string {
	var out []string
	for _, w := range strings.Fields(s) {
		if strings.HasPrefix(w, "#") {
			break
		}
		out = append(out, w)
	}
	return out
}

func separator(w string) bool {
	switch w {
	case "|", "||", "&&", ";", "&", ">", ">>", "2>", "2>&1", "<", "then", "do", "\\":
		return true
	}
	return strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>") || strings.HasPrefix(w, "|")
}

var (
	makeTargetWord = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	commandWord    = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	flagWord       = regexp.MustCompile(`^--?[A-Za-z][A-Za-z0-9.-]*(=.*)?$`)
)

// checkSnippet reports the make targets and msgxctl commands and flags a line of code names
// that do not exist.
func checkSnippet(file string, s snippet, targets map[string]bool, cli *cliTree) []docProblem {
	var problems []docProblem
	bad := func(format string, args ...any) {
		problems = append(problems, docProblem{file, s.line, fmt.Sprintf(format, args...)})
	}
	words := shellWords(s.text)
	for i := 0; i < len(words); i++ {
		w := strings.Trim(words[i], "();")
		switch {
		case w == "make" && (i == 0 || separator(words[i-1]) || strings.ContainsAny(words[i-1], "=;(")):
			for j := i + 1; j < len(words) && !separator(words[j]); j++ {
				t := strings.Trim(words[j], "();,")
				if strings.Contains(t, "=") || strings.HasPrefix(t, "-") {
					continue
				}
				if !makeTargetWord.MatchString(t) {
					break
				}
				if !targets[t] {
					bad("`make %s`: the Makefile has no target %s", t, t)
				}
			}
		case w == "msgxctl" || strings.HasSuffix(w, "/msgxctl"):
			j := i + 1
			var cmd *cliCommand
			for ; j < len(words) && !separator(words[j]); j++ {
				t := words[j]
				if strings.HasPrefix(t, "-") {
					takesValue, ok := cli.flag(nil, t)
					if !ok {
						// Whether it takes a value is unknown, so what follows is not read.
						bad("`msgxctl %s`: msgxctl has no global flag %s", t, flagName(t))
						j = len(words)
						break
					}
					if takesValue && !strings.Contains(t, "=") {
						j++
					}
					continue
				}
				if !commandWord.MatchString(t) {
					break // a placeholder, an ellipsis, the end of the span
				}
				cmd = cli.commands[t]
				if cmd == nil {
					bad("`msgxctl %s`: msgxctl has no command %s (`msgxctl --help` lists them)", t, t)
				}
				j++
				break
			}
			for ; cmd != nil && j < len(words) && !separator(words[j]); j++ {
				t := strings.TrimRight(words[j], ",;)`")
				if !flagWord.MatchString(t) {
					continue // a positional argument, a value, a lone -
				}
				if _, ok := cli.flag(cmd, t); ok {
					continue
				}
				name := flagName(t)
				if cli.hidden != nil && cli.hidden(cmd.name, name) {
					bad("`msgxctl %s %s`: %s is a hidden alias; name the flag `msgxctl %s --help` lists", cmd.name, name, name, cmd.name)
				} else {
					bad("`msgxctl %s %s`: %s has no flag %s (`msgxctl %s --help` lists them)", cmd.name, name, cmd.name, name, cmd.name)
				}
			}
			i = j - 1
		}
	}
	return problems
}

// flagName is the flag of a word: --state=dead → --state.
func flagName(w string) string {
	name, _, _ := strings.Cut(w, "=")
	return name
}

// flag looks a flag word up on cmd and among the global flags: whether it takes a value, and
// whether it exists and is listed.
func (c *cliTree) flag(cmd *cliCommand, w string) (takesValue, ok bool) {
	name := strings.TrimLeft(flagName(w), "-")
	if cmd != nil {
		if v, ok := cmd.flags[name]; ok {
			return v, true
		}
	}
	v, ok := c.global[name]
	return v, ok
}

// slug is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	h = strings.NewReplacer("`", "", "**", "").Replace(h)
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && !strings.ContainsRune("→–—…’“”·≤≥×÷①②③", r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the headings of a Markdown text as link targets, numbered as GitHub numbers a
// heading that repeats (-1, -2 …); lines inside fenced blocks are no headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for l := range strings.SplitSeq(text, "\n") {
		if fence.MatchString(l) {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(l)
		if inFence || m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// checkLinks reports the links of a doc to a heading (#anchor, other.md#anchor) that no heading
// of the target doc makes. docs holds every Markdown file by its path from the root.
func checkLinks(file string, prose []snippet, docs map[string]string) []docProblem {
	var problems []docProblem
	for _, p := range prose {
		for _, m := range mdLink.FindAllStringSubmatchIndex(p.text, -1) {
			target := file
			if m[2] >= 0 && strings.Contains(p.text[m[2]:m[3]], "://") {
				continue // a page outside the repository
			}
			if m[2] >= 0 {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(file), p.text[m[2]:m[3]]))
			}
			anchor := p.text[m[4]:m[5]]
			text, ok := docs[target]
			line := p.line + strings.Count(p.text[:m[0]], "\n")
			switch {
			case !ok:
				problems = append(problems, docProblem{file, line, fmt.Sprintf("links to %s, which does not exist", target)})
			case !anchors(text)[anchor]:
				problems = append(problems, docProblem{file, line, fmt.Sprintf("links to %s#%s, which no heading of %s makes", target, anchor, target)})
			}
		}
	}
	return problems
}

// checkDoc runs every doc-reference check over one Markdown file.
func checkDoc(file, text string, docs map[string]string, targets map[string]bool, cli *cliTree) []docProblem {
	code, prose := snippets(text)
	var problems []docProblem
	for _, s := range code {
		problems = append(problems, checkSnippet(file, s, targets, cli)...)
	}
	return append(problems, checkLinks(file, prose, docs)...)
}

// sectionCite is a citation of a doc's section by its title: the doc's path, then the title in
// quotes after a comma or in parentheses, the title possibly wrapped over lines.
var sectionCite = regexp.MustCompile("((?:docs/[a-z0-9-]+|README)\\.md)`?(?:,\\s*|\\s+\\(\\s*)[\"“]([^\"”]+)[\"”]")

// commentMarker is what starts a comment line in the SQL, shell, YAML, proto and Makefile text a
// wrapped citation runs through.
var commentMarker = regexp.MustCompile(`\n[ \t]*(?://|--|#+)[ \t]?`)

// uncomment blanks the comment markers at the starts of lines, keeping the newlines and the
// offsets, so that a title wrapped over comment lines reads as one.
func uncomment(text string) string {
	return commentMarker.ReplaceAllStringFunc(text, func(m string) string { return "\n" + strings.Repeat(" ", len(m)-1) })
}

// sections are the titles a doc's section citations may name: its headings and the bold leads
// of its paragraphs and list items, lower-cased without code and emphasis marks.
func sections(text string) []string {
	var out []string
	inFence := false
	lead := regexp.MustCompile(`^(?:[-*] |\d+\. )?\*\*([^*]+)\*\*`)
	for l := range strings.SplitSeq(text, "\n") {
		if fence.MatchString(l) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := heading.FindStringSubmatch(l); m != nil {
			out = append(out, normTitle(m[2]))
		} else if m := lead.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			out = append(out, normTitle(m[1]))
		}
	}
	return out
}

func normTitle(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(strings.NewReplacer("`", "", "*", "").Replace(s))), " ")
}

// checkCites reports the section citations of text that name no section of the doc they cite;
// lineOf maps an offset of text to its line. A title may stop short of a heading's end (a
// heading "A schedule snapshot (target 3)" is cited as "A schedule snapshot").
func checkCites(file, text string, lineOf func(int) int, docs map[string]string) []docProblem {
	var problems []docProblem
	for _, m := range sectionCite.FindAllStringSubmatchIndex(text, -1) {
		doc, title := text[m[2]:m[3]], normTitle(text[m[4]:m[5]])
		body, ok := docs[doc]
		if !ok {
			problems = append(problems, docProblem{file, lineOf(m[0]), fmt.Sprintf("cites %s, which does not exist", doc)})
			continue
		}
		found := false
		for _, s := range sections(body) {
			if strings.HasPrefix(s, title) {
				found = true
				break
			}
		}
		if !found {
			problems = append(problems, docProblem{file, lineOf(m[0]), fmt.Sprintf("cites %s, %q: no heading of %s starts so (moved or renamed?)", doc, text[m[4]:m[5]], doc)})
		}
	}
	return problems
}

// citeFile reports whether rel is a file other than Markdown and Go whose comments cite docs'
// sections.
func citeFile(rel string) bool {
	switch filepath.Ext(rel) {
	case ".proto", ".sql", ".yaml", ".yml", ".sh", ".tpl", ".txt":
		return true
	}
	return filepath.Base(rel) == "Makefile"
}

// checkTreeCites runs checkCites over every Markdown file, every Go file's comments (string
// literals are the programs' own text) and the comments of the other source files.
func checkTreeCites(t *testing.T, root string, docs map[string]string) []docProblem {
	t.Helper()
	var problems []docProblem
	keep := func(rel string) bool {
		return strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, ".pb.go") || citeFile(rel) || filepath.Ext(rel) == ".md"
	}
	err := walkFiles(root, keep, func(rel string, src []byte) error {
		if !strings.HasSuffix(rel, ".go") {
			text := string(src)
			if filepath.Ext(rel) != ".md" {
				text = uncomment(text)
			}
			problems = append(problems, checkCites(rel, text, func(off int) int { return 1 + strings.Count(text[:off], "\n") }, docs)...)
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		for _, cg := range f.Comments {
			text := cg.Text()
			start := fset.Position(cg.Pos()).Line
			problems = append(problems, checkCites(rel, text, func(off int) int { return start + strings.Count(text[:off], "\n") }, docs)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

// walkFiles calls fn with the path from root and the content of every file under root that keep
// takes, outside the directories no check reads (.git, vendor, testdata, build output).
func walkFiles(root string, keep func(rel string) bool, fn func(rel string, src []byte) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "vendor", "testdata", "node_modules", "bin", ".cache":
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if !keep(rel) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return fn(rel, src)
	})
}

var makeRule = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:([^=]|$)`)

// makeTargets reads the targets a Makefile defines.
func makeTargets(text string) map[string]bool {
	out := map[string]bool{}
	for l := range strings.SplitSeq(text, "\n") {
		m := makeRule.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, t := range strings.Fields(m[1]) {
			if !strings.HasPrefix(t, ".") {
				out[t] = true
			}
		}
	}
	return out
}

var helpFlag = regexp.MustCompile(`^\s+(?:-([A-Za-z]), )?--([A-Za-z0-9][A-Za-z0-9.-]*)(\[=[^\]]*\])?`)

// parseHelp reads a cobra help text: the commands it lists, the aliases, and the flags (local
// and global) with whether each takes a value.
func parseHelp(help string) (commands, aliases []string, flags, global map[string]bool) {
	flags, global = map[string]bool{}, map[string]bool{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		l := sc.Text()
		if l != "" && !strings.HasPrefix(l, " ") {
			section = strings.TrimSuffix(l, ":")
			continue
		}
		switch section {
		case "Available Commands":
			if f := strings.Fields(l); len(f) > 0 {
				commands = append(commands, f[0])
			}
		case "Aliases":
			for a := range strings.SplitSeq(l, ",") {
				if a = strings.TrimSpace(a); a != "" {
					aliases = append(aliases, a)
				}
			}
		case "Flags", "Global Flags":
			m := helpFlag.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			// A value-taking flag prints its type after the name; a bool prints none, and a
			// flag with an optional value prints [=…].
			takes := m[3] == "" && typeWord(l, m[2])
			dst := flags
			if section == "Global Flags" {
				dst = global
			}
			dst[m[2]] = takes
			if m[1] != "" {
				dst[m[1]] = takes
			}
		}
	}
	return commands, aliases, flags, global
}

// typeWord reports whether the flag's help line names a value type right after the flag: two
// or more spaces separate the usage column, so a single word after one space is the type.
func typeWord(l, name string) bool {
	rest := l[strings.Index(l, "--"+name)+len("--"+name):]
	return strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "  ")
}

// msgxctlTree builds msgxctl and reads its command tree from its help.
func msgxctlTree(t *testing.T, root string) *cliTree {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "msgxctl")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./services/control/cmd/msgxctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build msgxctl: %v\n%s", err, out)
	}
	help := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Env = append(os.Environ(), "MSGXCTL_TOKEN=", "MSGXCTL_TOKEN_FILE=")
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	top, _, err := help("--help")
	if err != nil {
		t.Fatalf("msgxctl --help: %v", err)
	}
	// The root's own flags are the persistent ones every command takes.
	names, _, global, _ := parseHelp(top)
	tree := &cliTree{commands: map[string]*cliCommand{}, global: global}
	for _, name := range names {
		out, _, err := help(name, "--help")
		if err != nil {
			t.Fatalf("msgxctl %s --help: %v", name, err)
		}
		_, aliases, flags, _ := parseHelp(out)
		c := &cliCommand{name: name, flags: flags}
		tree.commands[name] = c
		for _, a := range aliases {
			tree.commands[a] = c
		}
	}
	// A flag the help does not list but the parser accepts is hidden: msgxctl then fails on its
	// value or shows the help, where a flag it does not have fails as unknown.
	tree.hidden = func(command, flag string) bool {
		_, stderr, _ := help(command, flag+"=", "--help")
		return !strings.Contains(stderr, "unknown flag") && !strings.Contains(stderr, "unknown shorthand flag")
	}
	status := tree.commands["get-status"]
	if len(tree.commands) < 25 || status == nil || !status.flags["interval"] || !global["addr"] {
		t.Fatalf("msgxctl's help yields %d commands, get-status %+v and global flags %v: the help's layout changed, update parseHelp",
			len(tree.commands), status, global)
	}
	return tree
}

// markdownFiles are the repository's Markdown files by their path from root.
func markdownFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	docs := map[string]string{}
	err := walkFiles(root, func(rel string) bool { return filepath.Ext(rel) == ".md" }, func(rel string, src []byte) error {
		docs[rel] = string(src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if docs["README.md"] == "" || docs["docs/runbooks.md"] == "" {
		t.Fatalf("found %d Markdown files, without README.md or docs/runbooks.md", len(docs))
	}
	return docs
}

// TestDocsNameCommandsThatExist fails when a doc names a make target the Makefile lacks, a
// msgxctl command or flag msgxctl does not have, a hidden alias of a flag (the proto spelling
// msgxctl keeps accepting for old scripts), or links to a heading that no doc has, and when a
// doc or a comment cites a section of a doc by a title that the doc does not have.
func TestDocsNameCommandsThatExist(t *testing.T) {
	root := repo.Root(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := makeTargets(string(mk))
	if !targets["test"] || !targets["demo"] || !targets["bench"] {
		t.Fatalf("the Makefile's targets read as %v: update makeRule", targets)
	}
	cli := msgxctlTree(t, root)
	docs := markdownFiles(t, root)
	files := make([]string, 0, len(docs))
	for f := range docs {
		files = append(files, f)
	}
	slices.Sort(files)
	for _, f := range files {
		for _, p := range checkDoc(f, docs[f], docs, targets, cli) {
			t.Error(p)
		}
	}
	for _, p := range checkTreeCites(t, root, docs) {
		t.Error(p)
	}
}

// TestDocChecksFindEachDefect plants each defect the doc-reference checks look for, and the
// forms they must accept.
func TestDocChecksFindEachDefect(t *testing.T) {
	t.Parallel()
	cli := &cliTree{
		commands: map[string]*cliCommand{},
		global:   map[string]bool{"addr": true, "o": true, "output": true},
		hidden:   func(command, flag string) bool { return command == "list-messages" && flag == "--states" },
	}
	status := &cliCommand{name: "get-status", flags: map[string]bool{"watch": false, "w": false, "interval": true}}
	list := &cliCommand{name: "list-messages", flags: map[string]bool{"state": true, "all": false}}
	history := &cliCommand{name: "get-flight-history", flags: map[string]bool{"all": false}}
	cli.commands["get-status"], cli.commands["list-messages"] = status, list
	cli.commands["get-flight-history"], cli.commands["flight-history"] = history, history
	targets := map[string]bool{"test": true, "bench": true}
	docs := map[string]string{"docs/other.md": "# Other\n\n## A section / with `code`\n\n## Twice\n\n## Twice\n"}
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"good", "Run `make test`, `make bench MSGX_BENCH_BACKLOG=100000`, `msgxctl get-status -w --interval 2s`,\n" +
			"`msgxctl --addr x:9000 list-messages --state=dead --all -o json`, `msgxctl flight-history 12 --all`,\n" +
			"[a](other.md#a-section--with-code), [b](other.md#twice-1), [c](#top).\n\n# Top\n\n" +
			"```sh\nmsgxctl get-status --watch > status.log   # --nothing here\nmake test && msgxctl list-messages --state dead\n```\n", nil},
		{"make target", "`make tests`\n", []string{"doc.md:1: `make tests`: the Makefile has no target tests"}},
		{"make in a block", "x\n\n```\ncd x && make benchmark\n```\n", []string{"doc.md:4: `make benchmark`"}},
		{"command", "text `msgxctl status`\n", []string{"doc.md:1: `msgxctl status`: msgxctl has no command status"}},
		{"flag", "`msgxctl get-status\n--follow`\n", []string{"doc.md:1: `msgxctl get-status --follow`: get-status has no flag --follow"}},
		{"hidden alias", "```\nmsgxctl list-messages --states dead\n```\n", []string{"doc.md:2: `msgxctl list-messages --states`: --states is a hidden alias"}},
		{"global flag", "    msgxctl --adress x get-status\n", []string{"doc.md:1: `msgxctl --adress`: msgxctl has no global flag --adress"}},
		{"heading", "[x](other.md#nothing)\n", []string{"doc.md:1: links to docs/other.md#nothing, which no heading"}},
		{"file", "[x](gone.md#a)\n", []string{"doc.md:1: links to docs/gone.md, which does not exist"}},
		{"own heading", "# Here\n\n[x](#there)\n", []string{"doc.md:3: links to docs/doc.md#there"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := map[string]string{"docs/doc.md": tc.text}
			for k, v := range docs {
				d[k] = v
			}
			var got []string
			for _, p := range checkDoc("docs/doc.md", tc.text, d, targets, cli) {
				got = append(got, strings.TrimPrefix(p.String(), "docs/"))
			}
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %q, want one starting %q", got[i], tc.want[i])
				}
			}
		})
	}
}

// TestSectionCitesFindEachDefect plants citations of sections that do not exist, and the forms
// that must pass: a heading, a heading's start, a bold lead, a title wrapped over comment lines.
func TestSectionCitesFindEachDefect(t *testing.T) {
	t.Parallel()
	docs := map[string]string{"docs/ops.md": "# Ops\n\n## Restoring PostgreSQL from a backup\n\n" +
		"**NetworkPolicy** (on by default): …\n\n```\n## Not a heading\n```\n"}
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"good", "see docs/ops.md, \"Restoring PostgreSQL from a\n backup\"; docs/ops.md (\"Restoring PostgreSQL\"), " +
			"`docs/ops.md`, \"NetworkPolicy\" and docs/ops.md, “ops”", nil},
		{"renamed", "x\n(docs/ops.md, \"The restore drill\")", []string{`f:2: cites docs/ops.md, "The restore drill": no heading`}},
		{"in a block", "docs/ops.md, \"Not a heading\"", []string{`f:1: cites docs/ops.md, "Not a heading"`}},
		{"no doc", "docs/gone.md, \"Ops\"", []string{"f:1: cites docs/gone.md, which does not exist"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, p := range checkCites("f", tc.text, func(off int) int { return 1 + strings.Count(tc.text[:off], "\n") }, docs) {
				got = append(got, p.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %q, want one starting %q", got[i], tc.want[i])
				}
			}
		})
	}
	// A wrapped title in a SQL or Makefile comment reads as one once the markers are out.
	sql := "-- the drill (docs/ops.md, \"Restoring PostgreSQL\n-- from a backup\")\n"
	if p := checkCites("f.sql", uncomment(sql), func(int) int { return 1 }, docs); p != nil {
		t.Errorf("a title wrapped over SQL comment lines: %v", p)
	}
}
