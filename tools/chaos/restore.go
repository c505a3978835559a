package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// The restore drill (docs/runbooks.md, "Restoring PostgreSQL from a backup"): the five
// services take traffic, a pg_dump is taken while they do, the traffic goes on and drains,
// the services stop, the backup is restored, and the runbook is followed: version-floor, the
// services started, the contract violation resolved with resume. The checks then compare the
// end state with a clean in-order run over the same inbox rows (R-RESTORE-2).

// The drill's checks, in the order the summary prints them.
const (
	CheckRestoreFloor    = "version floor recorded from Kafka before the services started"
	CheckRestoreResolved = "contract violation resolved by resume, skip-marked refused unforced, audited"
	CheckRestoreClean    = "PostgreSQL equal to a clean in-order run, STATE_VERSION only higher (R-RESTORE-2)"
	CheckRestoreRedis    = "Redis equal to PostgreSQL (projection consistency check)"
	CheckRestoreKafka    = "per FLID on Kafka no STATE_VERSION below one already published, no event lost"
)

// RestoreReport is what the drill found.
type RestoreReport struct {
	Seed     int64
	Messages int
	// BackupAt counts the rows terminal when the dump was taken; Lost the inbox rows the
	// restore took back (above the restored W, or unfinished in the backup).
	BackupAt, Lost int
	Floor          string // version-floor's summary line
	Checks         []Check
	Durations      [][2]string
	LogDir         string
}

// Print writes the summary.
func (r *RestoreReport) Print(w io.Writer) {
	fmt.Fprintf(w, "restore drill summary (seed %d)\n", r.Seed)
	fmt.Fprintf(w, "  traffic             %d messages; %d terminal at the backup, %d taken back by the restore\n", r.Messages, r.BackupAt, r.Lost)
	fmt.Fprintf(w, "  version floor       %s\n", r.Floor)
	var d []string
	for _, p := range r.Durations {
		d = append(d, p[0]+" "+p[1])
	}
	fmt.Fprintf(w, "  durations           %s\n", strings.Join(d, ", "))
	fmt.Fprintln(w, "  checks")
	failed := 0
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.Pass {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(w, "    %s  %s: %s\n", mark, c.Name, c.Detail)
	}
	if failed > 0 {
		fmt.Fprintf(w, "  result              FAIL (%d of %d checks failed; logs in %s)\n", failed, len(r.Checks), r.LogDir)
		return
	}
	fmt.Fprintf(w, "  result              PASS (%d checks)\n", len(r.Checks))
}

// backupShare is the share of the traffic terminal when the dump is taken: the rest is the
// timeline the restore takes back.
const backupShare = 0.4

// RunRestore runs the restore drill on t and its clean in-order reference on clean. cfg's
// Window spreads the inserts, Flights sizes the traffic; faults, holes and out-of-order
// messages are not part of the drill. An error means the drill could not be carried out; a
// failed check is in the report.
func RunRestore(ctx context.Context, cfg Config, t, clean Target, out io.Writer) (*RestoreReport, error) {
	began := time.Now()
	r := mrand.New(mrand.NewPCG(uint64(cfg.Seed), 0x44524c4c)) // "DRLL"
	h := &harness{cfg: cfg, out: out, start: time.Now()}
	defer h.close()
	if err := h.open(ctx, t); err != nil {
		return nil, err
	}
	rep := &RestoreReport{Seed: cfg.Seed, LogDir: cfg.LogDir}
	step := time.Now()
	lap := func(name string) {
		rep.Durations = append(rep.Durations, [2]string{name, time.Since(step).Round(100 * time.Millisecond).String()})
		step = time.Now()
	}
	msgs := traffic.Day(traffic.Options{Flights: cfg.Flights, Seed: cfg.Seed})
	plan := planLoad(r, msgs, 0, 0, 0, cfg.Window)
	h.logf("restore drill, seed %d: %d messages for %d flights over %s", cfg.Seed, len(msgs), cfg.Flights, cfg.Window)
	if err := h.startStack(ctx); err != nil {
		return nil, err
	}
	lap("setup")
	loadDone := make(chan *loadResult, 1)
	go func() { loadDone <- load(ctx, h.loader, plan, h.dis) }()

	// The backup, under traffic.
	want := int(float64(len(msgs)) * backupShare)
	if !waitFor(ctx, cfg.DrainTimeout, func() bool {
		p, err := readProgress(ctx, h.pg, h.inbox)
		return err == nil && p.terminal >= want && p.marked >= want
	}) {
		return nil, fmt.Errorf("fewer than %d rows terminal and marked within %s", want, cfg.DrainTimeout)
	}
	dump := filepath.Join(cfg.LogDir, "backup.dump")
	if err := pgTool(ctx, "pg_dump", "--format=custom", "--file="+dump, "--dbname="+t.PGDSN); err != nil {
		return nil, err
	}
	var backupTerminal int
	if err := h.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')`).Scan(&backupTerminal); err != nil {
		return nil, err
	}
	h.logf("backup taken (pg_dump, custom format) with about %d rows terminal; the traffic goes on", backupTerminal)
	lap("to the backup")

	// The timeline the restore takes back: the rest of the traffic, drained and delivered.
	var lr *loadResult
	select {
	case lr = <-loadDone:
	case <-time.After(cfg.DrainTimeout):
		return nil, errors.New("the loader did not finish within the drain timeout")
	}
	if lr.err != nil {
		return nil, fmt.Errorf("loading the traffic: %w", lr.err)
	}
	rep.Messages = len(lr.ids)
	if !h.drain(ctx) {
		return nil, errors.New("the traffic did not drain before the restore")
	}
	lap("drain")
	// The broker and the consumer go on: Kafka is what a restore of PostgreSQL does not touch.
	for _, s := range services {
		h.st.Stop(s, 10*time.Second)
	}
	h.logf("services stopped")

	// The restore: the database dropped and created again, the dump restored into it.
	if err := h.restore(ctx, dump, t.PGDSN); err != nil {
		return nil, err
	}
	var restoredTerminal int
	if err := h.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')`).Scan(&restoredTerminal); err != nil {
		return nil, err
	}
	rep.BackupAt, rep.Lost = restoredTerminal, rep.Messages-restoredTerminal
	h.logf("backup restored (pg_restore): %d rows terminal, %d taken back", restoredTerminal, rep.Lost)
	lap("restore")

	// The runbook.
	floorCheck := h.versionFloor(ctx, rep)
	for _, s := range services {
		if err := h.startProc(s); err != nil {
			return nil, err
		}
	}
	resolved := h.resolve(ctx)
	if !h.drain(ctx) {
		h.logf("NOT drained after the restore")
	}
	lap("runbook and drain")
	redisCheck := h.projectionCheck(ctx)
	resolved = h.audited(resolved)
	h.st.StopAll(10 * time.Second)

	snap, err := takeSnapshot(ctx, h.pg, h.redis, t.RedisPrefix)
	if err != nil {
		return nil, fmt.Errorf("drill state: %w", err)
	}
	inbox, err := readInbox(ctx, h.inbox)
	if err != nil {
		return nil, err
	}
	msg, schd, _, _ := h.rec.snapshot()
	cleanSnap, err := h.cleanRun(ctx, clean)
	if err != nil {
		return nil, fmt.Errorf("clean run: %w", err)
	}
	lap("clean run")
	ev := evidence{chaos: snap, clean: cleanSnap, inbox: inbox, load: lr, msg: msg, schd: schd}
	rep.Checks = []Check{floorCheck, resolved, checkTerminal(ev), checkRestoredClean(ev), redisCheck, checkRestoredKafka(ev)}
	rep.Durations = append(rep.Durations, [2]string{"total", time.Since(began).Round(100 * time.Millisecond).String()})
	rep.Print(out)
	return rep, nil
}

// pgTool runs pg_dump or pg_restore.
func pgTool(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// restore drops the stack's database, creates it again and restores the dump into it, as a
// restore to a new server would leave it.
func (h *harness) restore(ctx context.Context, dump, dsn string) error {
	h.pg.Reset()
	name := pgx.Identifier{h.pgDB}.Sanitize()
	if _, err := h.pgAdmin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop the database: %w", err)
	}
	if _, err := h.pgAdmin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("create the database: %w", err)
	}
	return pgTool(ctx, "pg_restore", "--exit-on-error", "--dbname="+dsn, dump)
}

// versionFloor runs `msgx-dispatcher version-floor` first while a service still runs (it
// must refuse), then with every service stopped (it must record the floor).
func (h *harness) versionFloor(ctx context.Context, rep *RestoreReport) Check {
	c := Check{Name: CheckRestoreFloor}
	run := func() (int, string) {
		_ = h.st.StartBinary("version-floor", "msgx-dispatcher", []string{"version-floor"})
		code := -1
		waitFor(ctx, 12*time.Minute, func() bool {
			var exited bool
			code, exited = h.st.Exited("version-floor")
			return exited
		})
		return code, h.st.Output("version-floor")
	}
	if err := h.startProc("backfill"); err != nil {
		c.Detail = err.Error()
		return c
	}
	ok := waitFor(ctx, time.Minute, func() bool {
		var n int
		return h.pg.QueryRow(ctx, `SELECT count(*) FROM role_holder h JOIN pg_locks l ON l.pid = h.backend_pid
			AND l.locktype = 'advisory' AND l.granted`).Scan(&n) == nil && n > 0
	})
	refused, _ := run()
	h.st.Stop("backfill", 10*time.Second)
	if !ok || refused != 3 {
		c.Detail = fmt.Sprintf("with the backfill running version-floor exited %d, want 3 (refused)", refused)
		return c
	}
	took := time.Now()
	code, output := run()
	elapsed := time.Since(took).Round(10 * time.Millisecond)
	line := ""
	for l := range strings.Lines(output) {
		if strings.Contains(l, "version floor recorded") {
			line = strings.TrimSpace(l)
		}
	}
	rep.Floor = summarizeFloor(line) + ", in " + elapsed.String()
	var raised int
	_ = h.pg.QueryRow(ctx, `SELECT count(*) FROM flight_version_floor`).Scan(&raised)
	c.Pass = code == 0 && line != "" && raised > 0
	c.Detail = fmt.Sprintf("refused while the backfill ran (exit 3); exit %d with every service stopped, %d FLID floors recorded: %s", code, raised, rep.Floor)
	if !c.Pass {
		c.Detail += "; output: " + short(output)
	}
	h.logf("version floor: %s", rep.Floor)
	return c
}

// summarizeFloor keeps the counts of version-floor's JSON log line.
func summarizeFloor(line string) string {
	var parts []string
	for _, k := range []string{"records", "flids", "flights_raised", "msg_events_already_published", "schd_rows_already_published", "next_event_id"} {
		i := strings.Index(line, `"`+k+`":`)
		if i < 0 {
			continue
		}
		v := line[i+len(k)+3:]
		if j := strings.IndexAny(v, ",}"); j >= 0 {
			v = v[:j]
		}
		parts = append(parts, k+" "+v)
	}
	if len(parts) == 0 {
		return "(no summary line)"
	}
	return strings.Join(parts, ", ")
}

// resolve waits for ingest to detect the marked rows and follows the runbook: skip-marked
// without force (refused), resume as a dry run, then resume with a comment and the since.
func (h *harness) resolve(ctx context.Context) Check {
	c := Check{Name: CheckRestoreResolved}
	var since time.Time
	if !waitFor(ctx, 2*time.Minute, func() bool {
		var kind *string
		var at *time.Time
		err := h.pg.QueryRow(ctx, `SELECT violation_kind, violation_since FROM inbox_cursor WHERE id = 1`).Scan(&kind, &at)
		if err == nil && kind != nil && *kind == controlv1.KindMarkedAboveWatermark && at != nil {
			since = *at
			return true
		}
		return false
	}) {
		c.Detail = "ingest recorded no marked-above-watermark within 2m"
		return c
	}
	h.logf("ingest stopped discovery: marked-above-watermark since %s", since.Format(time.RFC3339Nano))
	client := h.dis.control
	cctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+controlToken)
	call := func(req *controlv1.ResolveContractViolationRequest) (*controlv1.ResolveContractViolationResponse, error) {
		var resp *controlv1.ResolveContractViolationResponse
		var err error
		waitFor(ctx, time.Minute, func() bool {
			rctx, cancel := context.WithTimeout(cctx, 10*time.Second)
			defer cancel()
			resp, err = client.ResolveContractViolation(rctx, req)
			return status.Code(err) != codes.Unavailable
		})
		return resp, err
	}
	req := &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
		Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_SKIP_MARKED, Comment: "restore drill: skip without force"}
	if _, err := call(req); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "force") {
		c.Detail = fmt.Sprintf("skip-marked without force = %v, want FailedPrecondition naming force", err)
		return c
	}
	req = &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
		Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, DryRun: true, Comment: "restore drill"}
	dry, err := call(req)
	if err != nil {
		c.Detail = fmt.Sprintf("resume dry run: %v", err)
		return c
	}
	req.DryRun, req.Since, req.Comment = false, dry.GetResolved().GetSince(), "restore drill: resume above the version floor"
	resp, err := call(req)
	if err != nil {
		c.Detail = fmt.Sprintf("resume: %v", err)
		return c
	}
	h.logf("resolved by resume: W %d", resp.GetWatermark())
	var kind *string
	if err := h.pg.QueryRow(ctx, `SELECT violation_kind FROM inbox_cursor WHERE id = 1`).Scan(&kind); err != nil || kind != nil {
		c.Detail = fmt.Sprintf("after resume the cursor still holds violation %v (%v)", kind, err)
		return c
	}
	c.Pass = true
	c.Detail = fmt.Sprintf("skip-marked refused without force (FailedPrecondition), resume dry run then resume at W %d", resp.GetWatermark())
	return c
}

// audited adds the audit lines to the resolution check: control's log must hold the refused
// skip and the resume that succeeded, each with its request.
func (h *harness) audited(c Check) Check {
	if !c.Pass {
		return c
	}
	var refused, resumed bool
	for l := range strings.Lines(h.st.Output("control")) {
		if !strings.Contains(l, `"audit: ResolveContractViolation"`) {
			continue
		}
		refused = refused || (strings.Contains(l, `"code":"FailedPrecondition"`) && strings.Contains(l, "skip without force"))
		resumed = resumed || (strings.Contains(l, `"code":"OK"`) && strings.Contains(l, "resume above the version floor") && !strings.Contains(l, `dry_run\":true`))
	}
	if !refused || !resumed {
		c.Pass = false
		c.Detail += fmt.Sprintf("; audit lines: refused skip %t, resume %t, want both", refused, resumed)
		return c
	}
	c.Detail += "; both audited"
	return c
}

// projectionCheck runs the projection's consistency check (a dry-run rebuild of every flight
// through control) and passes when it finds no drift.
func (h *harness) projectionCheck(ctx context.Context) Check {
	c := Check{Name: CheckRestoreRedis}
	cctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+controlToken)
	var id int64
	var err error
	waitFor(ctx, time.Minute, func() bool {
		var resp *controlv1.RebuildProjectionResponse
		resp, err = h.dis.control.RebuildProjection(cctx, &controlv1.RebuildProjectionRequest{All: true, DryRun: true, Comment: "restore drill"})
		id = resp.GetRebuild().GetRebuildId()
		return err == nil
	})
	if err != nil {
		c.Detail = fmt.Sprintf("request the check: %v", err)
		return c
	}
	var job *controlv1.ProjectionRebuild
	waitFor(ctx, 2*time.Minute, func() bool {
		resp, err := h.dis.control.GetProjectionRebuild(cctx, &controlv1.GetProjectionRebuildRequest{RebuildId: id})
		job = resp.GetRebuild()
		return err == nil && job.GetState() == controlv1.RebuildState_REBUILD_STATE_DONE
	})
	if job.GetState() != controlv1.RebuildState_REBUILD_STATE_DONE {
		c.Detail = fmt.Sprintf("the check did not finish: %v", job)
		return c
	}
	found := job.GetMissing() + job.GetStale() + job.GetContent() + job.GetExtra()
	c.Pass = found == 0 && job.GetTotal() > 0
	c.Detail = fmt.Sprintf("%d flights compared: %d missing, %d stale, %d content, %d extra", job.GetTotal(),
		job.GetMissing(), job.GetStale(), job.GetContent(), job.GetExtra())
	return c
}

// withoutStateVersion drops state_version from a row: the one column R-RESTORE-2 lets differ.
func withoutStateVersion(row string) string {
	var m map[string]any
	if json.Unmarshal([]byte(row), &m) != nil {
		return row
	}
	delete(m, "state_version")
	return encode(m)
}

// encode is a decoded row encoded again, its keys sorted.
func encode(m map[string]any) string {
	b, _ := json.Marshal(m) // decoded JSON always encodes
	return string(b)
}

// checkRestoredClean compares the drill's end state with the clean in-order run: every
// outcome, every row of every flight and reference table and every per-FLID event sequence
// (type, message, payload) the same, save STATE_VERSION, which is compared apart: never lower
// than the clean run's for a flight, and in each FLID's event sequence never lower at any
// position (R-RESTORE-2). Redis is compared with PostgreSQL by the projection check.
func checkRestoredClean(ev evidence) Check {
	c := Check{Name: CheckRestoreClean}
	var problems []string
	var outcomeDiffs []string
	all := map[int64]bool{}
	for id := range ev.chaos.outcomes {
		all[id] = true
	}
	for id := range ev.clean.outcomes {
		all[id] = true
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		a, aok := ev.chaos.outcomes[id]
		b, bok := ev.clean.outcomes[id]
		if !aok || !bok || a.comparable() != b.comparable() {
			outcomeDiffs = append(outcomeDiffs, fmt.Sprintf("msg %d drill %s, clean %s", id, a.comparable(), b.comparable()))
		}
	}
	if len(outcomeDiffs) > 0 {
		problems = append(problems, fmt.Sprintf("%d outcomes differ: %s", len(outcomeDiffs), examples(outcomeDiffs, short)))
	}
	rows := 0
	for _, t := range stateTables {
		a, b := slices.Clone(ev.chaos.tables[t.name]), slices.Clone(ev.clean.tables[t.name])
		rows += len(a)
		if t.name == "flight_history" {
			// Its key holds the version: compared without it, as a multiset per FLID.
			a, b = historyFree(a), historyFree(b)
		}
		for i := range a {
			a[i] = withoutStateVersion(a[i])
		}
		for i := range b {
			b[i] = withoutStateVersion(b[i])
		}
		key := t.key
		if t.name == "flight_history" {
			key = []string{"flid", "n"}
		}
		if d := diffRows(key, a, b); len(d) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d rows differ: %s", t.name, len(d), examples(d, short)))
		}
	}
	// The versions: a flight's never below the clean run's.
	lower := versionsBelow(ev.chaos.tables["flight_schd"], ev.clean.tables["flight_schd"])
	if len(lower) > 0 {
		problems = append(problems, fmt.Sprintf("%d flights with a STATE_VERSION below the clean run's: %s", len(lower), examples(lower, short)))
	}
	raised := 0
	seq := func(s *snapshot) (map[string][]string, map[string][]int64) {
		out, vs := map[string][]string{}, map[string][]int64{}
		for _, e := range s.events {
			k := e.Target + " " + e.FLID
			out[k] = append(out[k], fmt.Sprintf("%s msg %d %s", e.Type, e.MsgID, withoutVersion(e.Payload)))
			vs[k] = append(vs[k], e.Version)
		}
		return out, vs
	}
	sa, va := seq(ev.chaos)
	sb, vb := seq(ev.clean)
	var evDiffs []string
	keys := map[string]bool{}
	for k := range sa {
		keys[k] = true
	}
	for k := range sb {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !slices.Equal(sa[k], sb[k]) {
			evDiffs = append(evDiffs, fmt.Sprintf("%s: drill %d events, clean %d (first difference: %s)", k, len(sa[k]), len(sb[k]), firstDiff(sa[k], sb[k])))
			continue
		}
		for i := range va[k] {
			switch {
			case va[k][i] < vb[k][i]:
				evDiffs = append(evDiffs, fmt.Sprintf("%s event %d: version %d below the clean run's %d", k, i, va[k][i], vb[k][i]))
			case va[k][i] > vb[k][i]:
				raised++
			}
		}
	}
	if len(evDiffs) > 0 {
		problems = append(problems, fmt.Sprintf("%d per-FLID event sequences differ: %s", len(evDiffs), examples(evDiffs, short)))
	}
	c.Pass = len(problems) == 0
	if c.Pass {
		c.Detail = fmt.Sprintf("%d outcomes, %d rows in %d flight and reference tables, %d event sequences identical but for STATE_VERSION; %d events published above the clean run's version (the floor), none below",
			len(all), rows, len(stateTables), len(keys), raised)
	} else {
		c.Detail = strings.Join(problems, "; ")
	}
	return c
}

// historyFree numbers each FLID's flight_history rows in version order ("n"), so that two
// runs whose versions differ pair the same archived states.
func historyFree(rows []string) []string {
	type row struct {
		flid    string
		version float64
		doc     map[string]any
	}
	var rs []row
	for _, r := range rows {
		var m map[string]any
		if json.Unmarshal([]byte(r), &m) != nil {
			return rows
		}
		f, _ := m["flid"].(string)
		v, _ := m["state_version"].(float64)
		rs = append(rs, row{f, v, m})
	}
	slices.SortFunc(rs, func(a, b row) int {
		if c := strings.Compare(a.flid, b.flid); c != 0 {
			return c
		}
		return int(a.version - b.version)
	})
	out := make([]string, 0, len(rs))
	n := 0
	for i, r := range rs {
		if i == 0 || rs[i-1].flid != r.flid {
			n = 0
		}
		n++
		r.doc["n"] = n
		if s, ok := r.doc["snapshot"].(map[string]any); ok {
			delete(s, "Version")
		}
		out = append(out, encode(r.doc))
	}
	return out
}

// versionsBelow lists the flights whose state_version in a is below b's.
func versionsBelow(a, b []string) []string {
	versions := func(rows []string) map[string]float64 {
		out := map[string]float64{}
		for _, r := range rows {
			var m map[string]any
			if json.Unmarshal([]byte(r), &m) == nil {
				f, _ := m["flid"].(string)
				out[f], _ = m["state_version"].(float64)
			}
		}
		return out
	}
	va, vb := versions(a), versions(b)
	var out []string
	for _, f := range slices.Sorted(maps.Keys(va)) {
		if w, ok := vb[f]; ok && va[f] < w {
			out = append(out, fmt.Sprintf("%s drill %v, clean %v", f, va[f], w))
		}
	}
	return out
}

// checkRestoredKafka judges what a consumer received over both timelines. Per FLID, on each
// topic in arrival order, a record's version is never below one received before, unless it
// is a redelivery of an event already received (same ID and version, at least once,
// R-OUTBOX-7); every KAFKA:msg event of the restored outbox was received; and each FLID's
// newest record on KAFKA:msg, and its last on the compacted KAFKA:schd, is PostgreSQL's
// latest version.
func checkRestoredKafka(ev evidence) Check {
	c := Check{Name: CheckRestoreKafka}
	var problems []string
	records, dups := 0, 0
	back := func(topic string, recs map[string][]received) {
		for _, flid := range slices.Sorted(maps.Keys(recs)) {
			seen := map[[2]int64]bool{}
			var top int64
			for _, r := range recs[flid] {
				records++
				k := [2]int64{r.eventID, r.version}
				switch {
				case seen[k]:
					dups++
				case r.version < top:
					problems = append(problems, fmt.Sprintf("%s %s: version %d (event %d) after %d", topic, flid, r.version, r.eventID, top))
				}
				seen[k] = true
				top = max(top, r.version)
			}
		}
	}
	back("KAFKA:msg", ev.msg)
	back("KAFKA:schd", ev.schd)
	got := map[string]map[[2]int64]bool{}
	for flid, recs := range ev.msg {
		got[flid] = map[[2]int64]bool{}
		for _, r := range recs {
			got[flid][[2]int64{r.eventID, r.version}] = true
		}
	}
	var lost []string
	last := map[string]int64{}
	for _, e := range ev.chaos.events {
		if e.Target != "KAFKA:msg" {
			continue
		}
		last[e.FLID] = max(last[e.FLID], e.Version)
		if !got[e.FLID][[2]int64{e.ID, e.Version}] {
			lost = append(lost, fmt.Sprintf("%s event %d v%d", e.FLID, e.ID, e.Version))
		}
	}
	if len(lost) > 0 {
		problems = append(problems, fmt.Sprintf("%d KAFKA:msg events of the outbox never received: %s", len(lost), examples(lost, short)))
	}
	for _, flid := range slices.Sorted(maps.Keys(last)) {
		// A consumer of KAFKA:msg keeps the newest version it received; the compacted
		// KAFKA:schd keeps the last record of each key, so there the last must be the latest.
		var newest int64 = -1
		for _, r := range ev.msg[flid] {
			newest = max(newest, r.version)
		}
		if newest != last[flid] {
			problems = append(problems, fmt.Sprintf("KAFKA:msg %s: newest record v%d, PostgreSQL's latest event v%d", flid, newest, last[flid]))
		}
		if recs := ev.schd[flid]; len(recs) == 0 || recs[len(recs)-1].version != last[flid] {
			got := int64(-1)
			if len(recs) > 0 {
				got = recs[len(recs)-1].version
			}
			problems = append(problems, fmt.Sprintf("KAFKA:schd %s: last record v%d, PostgreSQL's latest event v%d", flid, got, last[flid]))
		}
	}
	c.Pass = len(problems) == 0
	if c.Pass {
		c.Detail = fmt.Sprintf("%d records on %d FLIDs, versions never back, every outbox event received, each FLID's newest (msg) and last (schd) record PostgreSQL's version; %d redeliveries (at least once)",
			records, len(ev.msg), dups)
	} else {
		c.Detail = fmt.Sprintf("%d problems: %s", len(problems), examples(problems, short))
	}
	return c
}
