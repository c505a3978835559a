package ctl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// watchFlags are get-status's --watch and --interval.
type watchFlags struct {
	on       bool
	interval time.Duration
}

// watch asks for the status every interval until ctx ends (Ctrl-C ends it with exit 0). With
// -o json it writes each answer as one JSON document on one line (JSON Lines, for jq or a
// log shipper), a failed call to stderr; on a terminal it redraws one screen in place;
// otherwise it writes one plain key=value line per answer, for a log or a pipe. The first
// call failing ends the watch with its exit code (a wrong token, no server); a later failure
// is shown and the watch goes on, since an operator watches exactly while things fail.
func (o *options) watch(ctx context.Context, md protoreflect.MethodDescriptor, req proto.Message, stdout, stderr io.Writer, interval time.Duration) error {
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer func() { _ = c.conn.Close() }()
	tty := terminal(stdout)
	var ws watchState
	for first := true; ; first = false {
		st := &controlv1.GetStatusResponse{}
		err := c.call(ctx, md, req, st)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && first:
			return err
		}
		var b bytes.Buffer
		switch {
		case o.output == "json" && err != nil:
			if _, werr := fmt.Fprintf(stderr, "msgxctl: %v\n", err); werr != nil {
				return localErr(fmt.Errorf("write output: %w", werr))
			}
		case o.output == "json":
			line, jerr := jsonLine(st)
			if jerr != nil {
				return jerr
			}
			b.Write(line)
		case tty:
			// Home, the screen, then clear what an earlier, longer screen left below it.
			b.WriteString("\x1b[H")
			screen := renderScreen(st, err, &ws, interval, time.Now())
			b.WriteString(strings.ReplaceAll(screen, "\n", "\x1b[K\n"))
			b.WriteString("\x1b[J")
		default:
			b.WriteString(renderLine(st, err, &ws))
		}
		if _, werr := b.WriteTo(stdout); werr != nil {
			return localErr(fmt.Errorf("write output: %w", werr))
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// watchState is what a watch remembers between answers: the largest backlog it has seen, so
// it can show how much of it has drained.
type watchState struct {
	peak int64
	// last is the latest answer, shown again (marked) while calls fail.
	last *controlv1.GetStatusResponse
}

func (ws *watchState) observe(st *controlv1.GetStatusResponse) {
	if u := st.GetBacklog().GetUnfinished(); u > ws.peak {
		ws.peak = u
	} else if u == 0 {
		ws.peak = 0 // drained: the next backlog starts a new bar
	}
}

// drained is the share of the peak backlog that has finished, and whether a drain is under way
// (a backlog seen larger than it is now).
func (ws *watchState) drained(unfinished int64) (float64, bool) {
	if ws.peak == 0 || unfinished >= ws.peak {
		return 0, false
	}
	return float64(ws.peak-unfinished) / float64(ws.peak), true
}

const barWidth = 30

func bar(share float64) string {
	n := int(share*barWidth + 0.5)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", barWidth-n) + "]"
}

// renderScreen is the watch's screen: who holds each role and what blocks it, discovery, the
// backlog (a progress bar while it drains), rate and drain estimate, backfill and the outbox.
func renderScreen(st *controlv1.GetStatusResponse, callErr error, ws *watchState, interval time.Duration, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "msgxctl get-status --watch  every %s  %s  (Ctrl-C to stop)\n", interval, now.UTC().Format(time.RFC3339))
	if callErr != nil {
		fmt.Fprintf(&b, "\n!! the last call failed: %v\n!! showing the answer before it\n", callErr)
		if ws.last == nil {
			return b.String()
		}
		st = ws.last
	} else {
		ws.observe(st)
		ws.last = st
	}
	active := "standby"
	if st.GetServedByActive() {
		active = "active"
	}
	fmt.Fprintf(&b, "observed %s by %s (%s)\n\n", st.GetObservedAt().AsTime().UTC().Format(time.RFC3339), st.GetServedBy(), active)

	b.WriteString("ROLES\n")
	for _, r := range st.GetRoles() {
		switch {
		case !r.GetHeld():
			fmt.Fprintf(&b, "  %-11s -  %s\n", r.GetRole(), roleState(false, false))
			continue
		case !r.GetActive():
			fmt.Fprintf(&b, "  %-11s %s  %s\n", r.GetRole(), r.GetInstance(), roleState(true, false))
			continue
		}
		fmt.Fprintf(&b, "  %-11s %s  since %s", r.GetRole(), r.GetInstance(), r.GetSince().AsTime().UTC().Format(time.RFC3339))
		if bl := r.GetBlocked(); bl != nil {
			fmt.Fprintf(&b, "  BLOCKED on %s for %s (%d probes", bl.GetDependency(), short(bl.GetDuration()), bl.GetProbes())
			if bl.GetMsgId() != 0 {
				fmt.Fprintf(&b, ", at message %d", bl.GetMsgId())
			}
			fmt.Fprintf(&b, "): %s", oneLine(bl.GetLastError(), 100))
		}
		b.WriteString("\n")
	}

	d := st.GetDiscovery()
	b.WriteString("\nDISCOVERY\n")
	fmt.Fprintf(&b, "  watermark %d", d.GetWatermark())
	if d.InboxMaxId != nil {
		fmt.Fprintf(&b, "   inbox max %d   lag %d", d.GetInboxMaxId(), d.GetLag())
	} else {
		fmt.Fprintf(&b, "   lag unknown: %s", oneLine(d.GetInboxError(), 80))
	}
	b.WriteString("\n")
	hole := "none"
	if d.HoleSince != nil {
		hole = "open for " + short(d.GetHoleAge())
	}
	fmt.Fprintf(&b, "  hole %s   permanent holes %d (%d ids)   late arrivals %d found, %d enqueued\n", hole,
		d.GetPermanentHoleRanges(), d.GetPermanentHoleIds(), d.GetLateDetected(), d.GetLateEnqueued())
	// The rows discovery still holds and the holes that hold them, each with its own clock (D-15).
	fmt.Fprintf(&b, "  waiting beyond W %d rows", d.GetWaitingRows())
	if d.OldestWaitingAge != nil {
		fmt.Fprintf(&b, ", oldest seen %s ago", short(d.GetOldestWaitingAge()))
	}
	fmt.Fprintf(&b, "   open holes %d (%d ids)", d.GetOpenHoleRanges(), d.GetOpenHoleIds())
	if d.NextReleaseAt != nil {
		fmt.Fprintf(&b, "   next release %s", d.GetNextReleaseAt().AsTime().UTC().Format(time.RFC3339))
	}
	b.WriteString("\n")
	if hs := d.GetOpenHoles(); len(hs) > 0 {
		b.WriteString("  holes")
		for i, h := range hs {
			if i == 8 {
				fmt.Fprintf(&b, " …+%d", d.GetOpenHoleRanges()-8)
				break
			}
			if h.GetFirstId() == h.GetLastId() {
				fmt.Fprintf(&b, " %d:%s", h.GetFirstId(), short(h.GetAge()))
			} else {
				fmt.Fprintf(&b, " %d-%d:%s", h.GetFirstId(), h.GetLastId(), short(h.GetAge()))
			}
		}
		b.WriteString("\n")
	}
	if cd := d.GetCommitDelay(); cd.GetFills() > 0 {
		fmt.Fprintf(&b, "  commit delay measured %d fills   max %s   p99 ≤ %s   (max-commit-delay %s)\n", cd.GetFills(),
			short(cd.GetMax()), p99(cd), short(d.GetMaxCommitDelay()))
	}
	if v := d.GetContractViolation(); v != nil {
		fmt.Fprintf(&b, "  CONTRACT VIOLATION %s since %s: %s\n", v.GetKind(), v.GetSince().AsTime().UTC().Format(time.RFC3339),
			oneLine(v.GetDetail(), 100))
	}

	bl := st.GetBacklog()
	b.WriteString("\nBACKLOG\n")
	fmt.Fprintf(&b, "  unfinished %d", bl.GetUnfinished())
	if share, ok := ws.drained(bl.GetUnfinished()); ok {
		fmt.Fprintf(&b, "  %s %3.0f%% of %d drained", bar(share), share*100, ws.peak)
	}
	if bl.OldestUnfinishedAge != nil {
		fmt.Fprintf(&b, "   oldest %s", short(bl.GetOldestUnfinishedAge()))
	}
	if n := bl.GetWaitingDiscovery(); n > 0 {
		// Not enqueued yet, so not unfinished: discovery holds them (holes, a batch not read).
		fmt.Fprintf(&b, "   + %d waiting for discovery", n)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  rate %.1f/s (last 5m)   estimated drain %s\n", bl.GetFinishedPerSecond(), drain(bl))

	bf := st.GetBackfill()
	fmt.Fprintf(&b, "\nBACKFILL  pending %d   abandoned %d\n", bf.GetPending(), bf.GetAbandoned())
	b.WriteString("\nOUTBOX\n")
	for _, t := range st.GetOutbox() {
		fmt.Fprintf(&b, "  %-11s pending %d   dead %d", t.GetTarget(), t.GetPending(), t.GetDead())
		if t.OldestPendingAge != nil {
			fmt.Fprintf(&b, "   oldest %s", short(t.GetOldestPendingAge()))
		}
		if t.GetDead() > 0 {
			b.WriteString("   DEAD letters: requeue-events --dry-run")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nSTATES ")
	for _, c := range st.GetByState() {
		// "~" marks the planner's estimate of a bulk state (StateCount.estimated).
		approx := ""
		if c.GetEstimated() {
			approx = "~"
		}
		fmt.Fprintf(&b, " %s %s%d", strings.TrimPrefix(c.GetState().String(), "MESSAGE_STATE_"), approx, c.GetCount())
	}
	b.WriteString("\n")
	return b.String()
}

// renderLine is one answer as a plain key=value line, for a pipe or a log.
func renderLine(st *controlv1.GetStatusResponse, callErr error, ws *watchState) string {
	now := time.Now().UTC().Format(time.RFC3339)
	if callErr != nil {
		return fmt.Sprintf("%s error=%q\n", now, callErr.Error())
	}
	ws.observe(st)
	var b strings.Builder
	d, bl := st.GetDiscovery(), st.GetBacklog()
	fmt.Fprintf(&b, "%s W=%d", st.GetObservedAt().AsTime().UTC().Format(time.RFC3339), d.GetWatermark())
	if d.Lag != nil {
		fmt.Fprintf(&b, " lag=%d", d.GetLag())
	} else {
		b.WriteString(" lag=unknown")
	}
	hole := "0s"
	if d.HoleSince != nil {
		hole = short(d.GetHoleAge())
	}
	waitAge := "0s"
	if d.OldestWaitingAge != nil {
		waitAge = short(d.GetOldestWaitingAge())
	}
	fmt.Fprintf(&b, " hole_age=%s holes=%d/%d open_holes=%d waiting=%d oldest_waiting=%s unfinished=%d", hole, d.GetPermanentHoleRanges(),
		d.GetPermanentHoleIds(), d.GetOpenHoleRanges(), d.GetWaitingRows(), waitAge, bl.GetUnfinished())
	if share, ok := ws.drained(bl.GetUnfinished()); ok {
		fmt.Fprintf(&b, " drained=%.0f%%", share*100)
	}
	fmt.Fprintf(&b, " rate=%.1f/s drain=%s backfill=%d/%d", bl.GetFinishedPerSecond(), drain(bl),
		st.GetBackfill().GetPending(), st.GetBackfill().GetAbandoned())
	var outbox, roles, blocked []string
	for _, t := range st.GetOutbox() {
		outbox = append(outbox, fmt.Sprintf("%s:%d/%d", t.GetTarget(), t.GetPending(), t.GetDead()))
	}
	for _, r := range st.GetRoles() {
		switch {
		case !r.GetHeld() || !r.GetActive():
			roles = append(roles, r.GetRole()+":-")
		default:
			roles = append(roles, r.GetRole()+":"+r.GetInstance())
		}
		if x := r.GetBlocked(); x != nil {
			blocked = append(blocked, r.GetRole()+":"+x.GetDependency())
		}
	}
	fmt.Fprintf(&b, " outbox=%s roles=%s", strings.Join(outbox, ","), strings.Join(roles, ","))
	if len(blocked) > 0 {
		fmt.Fprintf(&b, " blocked=%s", strings.Join(blocked, ","))
	}
	if v := d.GetContractViolation(); v != nil {
		fmt.Fprintf(&b, " contract_violation=%s", v.GetKind())
	}
	b.WriteString("\n")
	return b.String()
}

func drain(bl *controlv1.Backlog) string {
	switch {
	case bl.EstimatedDrain != nil:
		return short(bl.GetEstimatedDrain())
	case bl.GetUnfinished() == 0 && bl.GetWaitingDiscovery() == 0:
		return "0s"
	}
	return "unknown"
}

func p99(cd *controlv1.CommitDelay) string {
	if cd.P99Bound == nil {
		return "beyond 1h"
	}
	return short(cd.GetP99Bound())
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
