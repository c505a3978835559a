package rulecheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// TestTreeFollowsTheRules runs the check on the repository itself: no Go comment, string or
// doc cites material outside the repository, every cited rule ID is defined in docs/rules.md
// and every decision ID in docs/decisions.md, and every invariant names existing tests that
// cite it.
func TestTreeFollowsTheRules(t *testing.T) {
	t.Parallel()
	problems, err := Check(repo.Root(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// The citations the fixtures need are put together at run time, so that this file does not
// cite a seed itself (the tree check above reads it too).
var (
	seed         = "se" + "ed 003 "
	sect         = "\u00a7"
	decisionCite = "DECI" + "SIONS 6"
	unknown      = "R-" + "NOPE-1"
	nogroup      = "R-" + "QUEUE"
	style        = "STY" + "LE "
	sharedDir    = "../sha" + "red/"
	formatNotes  = "FOR" + "MAT.md"
	theSeeds     = "the se" + "eds"
	undefinedD   = "D-" + "99"
)

const fixtureDecisions = "# Decisions\n\n## D-1 Discovery follows a watermark\n\n- **Decision.** W.\n\n" +
	"## D-2 No time-based poison\n\n## D-1 Defined again\n"

const fixtureRules = "# Rules\n\n## Pump\n\n" +
	"- **R-PUMP-1** The head is the smallest unfinished message. Source: the design.\n" +
	"- **R-PUMP-2** One head.\n\n" +
	"## Invariants\n\n" +
	"- **R-INV-1** One head at a time. Guarded by `TestOneHead`,\n" +
	"  `TestMissing`. Source: the design.\n" +
	"- **R-INV-2** Nothing is lost. Guarded by `TestUncited`.\n" +
	"- **R-INV-3** Unguarded.\n"

// TestCheckFindsEachDefect plants one defect of every kind in a small tree (Go comments and
// strings, docs, SQL and YAML) and checks that each is reported at its file and line with what
// to do, and that the clean lines are not (defined decisions, a design named in words, a
// section of a docs/ page).
func TestCheckFindsEachDefect(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, RulesPath, fixtureRules)
	write(t, root, "README.md", "# x\n\nSee R-PUMP-1 and "+unknown+".\n")
	write(t, root, DecisionsPath, fixtureDecisions)
	write(t, root, "docs/pump.md", strings.Join([]string{
		"The R-PUMP rules, " + seed + sect + "5.1 as their source.",
		"Decided in D-1 and D-2 (defined), not in " + undefinedD + "; the implementation design is named.",
		"As " + decisionCite + " says, and " + theSeeds + " leave it open.",
		"The samples of `" + sharedDir + "sis/samples` and the rules of " + sharedDir + "README.md.",
		"The envelope of " + formatNotes + " and " + style + sect + "15.",
		"A citation broken over two lines: " + strings.TrimSpace(seed[:4]),
		"  " + seed[5:] + sect + "9.2. docs/codec.md " + sect + "6 and " + sect + "1 are this repository's.",
	}, "\n")+"\n")
	write(t, root, "migrations/sql/00001_x.sql", "-- Names follow "+seed+sect+"1.3.\nCREATE TABLE x ();\n")
	write(t, root, "deploy/values.yaml", "# by "+theSeeds+"' names\nkey: 1\n")
	write(t, root, "pkg/a/b.go", strings.Join([]string{
		"package a",
		"",
		"// Order follows the example server (" + style + sect + "15); clients retry (" + style + sect + "11).",
		"func Order() {}",
		"",
		"// Samples live in " + sharedDir + "sis/samples (" + formatNotes + ").",
		"const dir = \"" + sharedDir + "sis/samples\"",
		"",
		"// Decided by D-2; " + undefinedD + " is not a decision.",
		"func Decided() {}",
		"",
		"// Spare leaves it to " + theSeeds + ".",
		"func Spare() {}",
	}, "\n")+"\n")
	write(t, root, "pkg/a/a.go", strings.Join([]string{
		"// Package a is a fixture.",
		"package a",
		"",
		"// Head follows R-PUMP-1 (" + seed + sect + "5.1).",
		"func Head() {}",
		"",
		"// Wait follows " + decisionCite + ".",
		"func Wait() {}",
		"",
		"// Broken cites a seed over two lines (" + strings.TrimSpace(seed[:4]),
		"// " + seed[5:] + sect + "9.2).",
		"func Broken() {}",
		"",
		"// Bare cites " + sect + "13.3 without a document; docs/codec.md " + sect + "6 is fine.",
		"func Bare() {}",
		"",
		"// Unknown cites " + unknown + " and the " + nogroup + " rules.",
		"func Unknown() {}",
		"",
		"var reason = \"refused (" + seed + sect + "12.2)\"",
	}, "\n")+"\n")
	write(t, root, "pkg/a/a_test.go", strings.Join([]string{
		"package a",
		"",
		"import \"testing\"",
		"",
		"// TestOneHead guards R-INV-1.",
		"func TestOneHead(t *testing.T) {}",
		"",
		"// TestUncited is the guard of R-INV-12.",
		"func TestUncited(t *testing.T) {}",
	}, "\n")+"\n")
	write(t, root, "services/pump/internal/p/p.go", strings.Join([]string{
		"package p",
		"",
		"func Log(ctx context.Context, l *slog.Logger, t testing.TB) {",
		"	l.Warn(\"no context\", \"k\", 1)",
		"	l.WarnContext(ctx, \"with its context\")",
		"	t.Error(err)",
		"}",
	}, "\n")+"\n")
	write(t, root, "services/pump/internal/p/p_test.go", "package p\n\nfunc f() { l.Info(\"a test may\") }\n")
	write(t, root, "services/ingest/x.go", "package x\n\nfunc f() { l.Info(\"outside the processing packages\") }\n")
	write(t, root, "pkg/a/gen.pb.go", "package a\n\n// "+seed+sect+"1.\nvar x = 1\n")
	write(t, root, "pkg/a/gen.go", "// Code generated by a tool. DO NOT EDIT.\n\npackage a\n\n// "+decisionCite+".\nvar y = 1\n")
	write(t, root, "pkg/a/testdata/x.go", "package x\n\n// "+decisionCite+".\n")

	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ at, says string }{
		{"README.md:3", unknown + " is not defined in docs/rules.md"},
		{"deploy/values.yaml:1", "text refers to the design seeds"},
		{"docs/decisions.md:9", "D-1 is defined twice (first on line 3)"},
		{"docs/pump.md:1", "text cites a design document's file or section (\"" + seed + sect + "5.1\")"},
		{"docs/pump.md:2", "text " + undefinedD + " is not defined in docs/decisions.md"},
		{"docs/pump.md:3", "text cites the outside decision list"},
		{"docs/pump.md:3", "text refers to the design seeds"},
		{"docs/pump.md:4", "text cites a path outside the repository (\"" + sharedDir + "sis/samples`\")"},
		{"docs/pump.md:4", "text cites a path outside the repository (\"" + sharedDir + "README.md.\")"},
		{"docs/pump.md:5", "text cites the SIS format notes outside the repository"},
		{"docs/pump.md:5", "text cites the style guide outside the repository (\"" + style + sect + "15\")"},
		{"docs/pump.md:6", "text cites a design document's file or section"},
		{"migrations/sql/00001_x.sql:1", "text cites a design document's file or section"},
		{"pkg/a/b.go:3", "comment cites the style guide outside the repository (\"" + style + sect + "15\")"},
		{"pkg/a/b.go:3", "comment cites the style guide outside the repository (\"" + style + sect + "11\")"},
		{"pkg/a/b.go:6", "comment cites a path outside the repository"},
		{"pkg/a/b.go:6", "comment cites the SIS format notes outside the repository"},
		{"pkg/a/b.go:7", "string cites a path outside the repository"},
		{"pkg/a/b.go:9", "comment " + undefinedD + " is not defined in docs/decisions.md"},
		{"pkg/a/b.go:12", "comment refers to the design seeds"},
		{"docs/rules.md:10", "R-INV-1 is guarded by TestMissing, which does not exist"},
		{"docs/rules.md:13", "invariant R-INV-3 names no test"},
		{"pkg/a/a.go:4", "comment cites a design document's file or section"},
		{"pkg/a/a.go:7", "comment cites the outside decision list"},
		{"pkg/a/a.go:10", "comment cites a design document's file or section"},
		{"pkg/a/a.go:14", "cites a section (\"" + sect + "1\") without naming a document"},
		{"pkg/a/a.go:17", unknown + " is not defined"},
		{"pkg/a/a.go:17", nogroup + " is not a group of rules"},
		{"pkg/a/a.go:20", "string cites a design document's file or section"},
		{"services/pump/internal/p/p.go:4", "log call Warn(\"no context\", …) without a context in a message-processing package"},
		{"pkg/a/a_test.go:8", "R-INV-12 is not defined"},
		{"pkg/a/a_test.go:9", "TestUncited guards R-INV-2 (docs/rules.md:12) but its doc comment does not say so"},
	}
	got := map[string]bool{}
	for _, p := range problems {
		got[p.String()] = true
	}
	for _, w := range want {
		found := false
		for s := range got {
			if strings.HasPrefix(s, w.at+": ") && strings.Contains(s, w.says) {
				found, got[s] = true, false
			}
		}
		if !found {
			t.Errorf("missing problem %s: …%s…", w.at, w.says)
		}
	}
	for s, left := range got {
		if left {
			t.Errorf("unexpected problem: %s", s)
		}
	}
}

// A rule defined twice is reported at the second definition.
func TestDuplicateDefinition(t *testing.T) {
	t.Parallel()
	_, problems := ParseRules(RulesPath, []byte("- **R-PUMP-1** a.\n- **R-PUMP-1** b.\n"))
	if len(problems) != 1 || problems[0].Line != 2 || !strings.Contains(problems[0].Msg, "defined twice (first on line 1)") {
		t.Fatalf("problems = %v, want one at line 2 naming line 1", problems)
	}
}

func write(t *testing.T, root, rel, text string) {
	t.Helper()
	path := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
