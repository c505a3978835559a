package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/internal/repo"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// previousRelease is the commit whose schema precedes the newest migration: the parent of the
// commit that added the newest file of migrations/sql, or HEAD while that file is not committed
// yet. Its binaries are what still runs while the chart's migration Job applies the new schema
// (the services roll one at a time, R-SCHEMA-2).
func previousRelease(t *testing.T, root string) (rev, newest string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "migrations", "sql", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	slices.Sort(files)
	newest = filepath.Base(files[len(files)-1])
	out, err := exec.Command("git", "-C", root, "log", "--diff-filter=A", "--format=%H", "-n", "1", "--",
		"migrations/sql/"+newest).Output()
	if err != nil {
		t.Fatalf("the upgrade test needs the repository's history (git log): %v", err)
	}
	if c := strings.TrimSpace(string(out)); c != "" {
		return c + "^", newest
	}
	return "HEAD", newest
}

// buildRelease builds the service binaries of rev from its tree (git archive: no checkout of
// the repository changes) into a directory of the test's own.
func buildRelease(t *testing.T, root, rev string) string {
	t.Helper()
	src, bin := t.TempDir(), t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
	untar := exec.Command("tar", "-x", "-C", src)
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("untar %s: %v\n%s", rev, err, stderr.String())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	if err := stack.Build(ctx, src, bin); err != nil {
		t.Fatalf("build the previous release %s: %v", rev, err)
	}
	_ = os.RemoveAll(src)
	return bin
}

// TestPreviousReleaseRunsOnTheNewSchema is the upgrade check of every schema change
// (R-SCHEMA-2): the five binaries of the release before the newest migration run on a database
// migrated to the newest schema and take a day's kinds of traffic through to the end (every
// message terminal as expected, marked, its events delivered); then the new binaries take over
// the same database and go on, reading what the old ones wrote.
// Guards R-INV-25.
func TestPreviousReleaseRunsOnTheNewSchema(t *testing.T) {
	root := repo.Root(t)
	rev, newest := previousRelease(t, root)
	t.Logf("previous release %s (before %s)", rev, newest)
	old := buildRelease(t, root, rev)

	e := newEnvOf(t, old) // pgtest migrates to the newest schema
	e.startAll(t)
	// Today's flights: the history sweep leaves them in the current state while the test looks.
	cst := time.FixedZone("CST", 8*3600)
	today := time.Now().In(cst)
	day := time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, cst)
	dttm := day.Add(6 * time.Hour)
	master := traffic.Flight{FLID: "UPG-M", ALCD: "CA", FLNO: "CA1701", MVIN: "D", SODT: day.Add(9 * time.Hour), FLTY: "W", FLIN: "D"}
	child := master
	child.FLID, child.FLNO, child.MAID = "UPG-C", "ZH1701", master.FLID
	other := master
	other.FLID, other.FLNO = "UPG-X", "CA1702"
	msgs := []*message{
		{xml: traffic.DNLD(1, dttm, []traffic.Flight{master, child, other}), want: "SUCCEEDED"},
		{xml: traffic.FLOP(2, dttm.Add(time.Minute), master.FLID, master.FFID(), "ESTT", "<ESTT>"+traffic.FormatTime(master.SODT.Add(15*time.Minute))+"</ESTT>"), want: "SUCCEEDED"},
		{xml: traffic.FLOP(3, dttm.Add(2*time.Minute), other.FLID, other.FFID(), "FDEL", ""), want: "SUCCEEDED"},
		{xml: traffic.FLOP(4, dttm.Add(3*time.Minute), "UPG-NONE", "", "ESTT", "<ESTT>"+traffic.FormatTime(master.SODT)+"</ESTT>"), want: "SKIPPED"},
		{xml: "<MSG><META><SNDR>AODB</SNDR>", want: "DEAD"},
	}
	e.insert(t, msgs)
	e.waitAll(t, msgs)

	// The upgrade: the new release on the same database, reading the rows the old one wrote
	// (without provenance: read conservatively, R-ORDER-1) and going on.
	e.switchTo(binaries(t))
	e.startAll(t)
	later := []*message{
		{xml: traffic.FLOP(5, dttm.Add(4*time.Minute), master.FLID, master.FFID(), "ESTT", "<ESTT>"+traffic.FormatTime(master.SODT.Add(30*time.Minute))+"</ESTT>"), want: "SUCCEEDED"},
		{xml: traffic.FLOP(6, dttm.Add(5*time.Minute), child.FLID, child.FFID(), "FDEL", ""), want: "SUCCEEDED"},
		{xml: traffic.FLOP(7, dttm.Add(6*time.Minute), master.FLID, master.FFID(), "FDEL", ""), want: "SUCCEEDED"},
	}
	e.insert(t, later)
	e.waitAll(t, later)
	var estt string
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(estt, '') FROM flight_schd WHERE flid = $1`, master.FLID).Scan(&estt); err != nil {
		t.Fatal(err)
	}
	if want := traffic.FormatTime(master.SODT.Add(30 * time.Minute)); estt != want {
		t.Errorf("the master's ESTT after the upgrade = %q, want the new release's %q", estt, want)
	}
	var deleted int
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM flight_schd WHERE flid LIKE 'UPG-%' AND state = 'DELETED'`).
		Scan(&deleted); err != nil || deleted != 3 {
		t.Errorf("deleted flights after the upgrade: %d, %v; want all three", deleted, err)
	}
}

// waitAll waits until every message ended as expected, was marked, and its events delivered.
func (e *env) waitAll(t *testing.T, msgs []*message) {
	t.Helper()
	for _, m := range msgs {
		testwait.ForState(t, 90*time.Second, fmt.Sprintf("message %d %s, marked, delivered", m.id, m.want), func() (bool, string) {
			f := e.facts(t, m.id)
			return f.terminal && f.state == m.want && f.marked && f.delivered, f.String()
		})
	}
}
