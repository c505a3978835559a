package ctl

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// The views below are the table output of the responses a person reads as a story rather than
// as fields: a message's timeline and a flight's two stores side by side. Everything else the
// response holds follows in the generic rendering, so no field is lost.

// renderMessage prints a message's timeline and attempts, then the rest of the response.
func renderMessage(w io.Writer, r *controlv1.GetMessageResponse, opt tableOpts) error {
	m := r.GetMessage()
	state := strings.TrimPrefix(m.GetState().String(), "MESSAGE_STATE_")
	if c := m.GetErrorClass(); c != controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
		state += "(" + strings.TrimPrefix(c.String(), "ERROR_CLASS_") + ")"
	}
	fmt.Fprintf(w, "message %d  %s", m.GetMsgId(), state)
	if t := m.GetMsgType(); t != "" {
		fmt.Fprintf(w, "  %s/%s", t, m.GetMsgStyp())
	}
	if f := m.GetFlid(); f != "" {
		fmt.Fprintf(w, "  flight %s", f)
	}
	fmt.Fprintln(w)
	if r.GetBodyTruncated() {
		// The server bounds a response's text (control.max-body-chars): say so before the
		// text, with the command that reads the rest.
		shown := int64(utf8.RuneCountInString(r.GetRawXml()))
		fmt.Fprintf(w, "raw_xml is truncated: %d of %d characters shown; read the rest with: msgxctl get-message-body %d --offset %d\n",
			shown, r.GetBodyChars(), m.GetMsgId(), shown)
	}
	if r.GetFlightChangesTruncated() {
		// The server bounds flight changes and events together (control.page-bytes).
		fmt.Fprintf(w, "flight changes or events are truncated (%d of %d events shown): an entry marked changes_omitted is read with msgxctl flight-history FLID --after-msg-id %d --page-size 1, the events with msgxctl get-flight FLID\n",
			len(r.GetEvents()), r.GetEventsTotal(), m.GetMsgId()-1)
	}
	switch {
	case r.GetTraceUrl() != "":
		fmt.Fprintf(w, "trace %s\n", r.GetTraceUrl())
	case r.GetTraceId() != "":
		fmt.Fprintf(w, "trace %s (set tracing.ui-url on control for a link)\n", r.GetTraceId())
	}

	fmt.Fprintln(w, "\ntimeline:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range r.GetTimeline() {
		at, since := "-", ""
		if s.At != nil {
			at = clock(s.GetAt())
		}
		if s.SincePrevious != nil {
			since = "+" + short(s.GetSincePrevious())
			if d := s.GetSincePrevious().AsDuration(); d < 0 {
				since = short(s.GetSincePrevious())
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", at, since, s.GetStep(), s.GetDetail())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The processing record's counter restarts at 0 on a replay and counts the failed tries the
	// retry limit sees; the list below is every attempt kept, across replays.
	fmt.Fprintf(w, "\nattempts (%d kept; %d failed since the last replay):\n", len(r.GetAttempts()), m.GetAttempts())
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, a := range r.GetAttempts() {
		outcome := strings.TrimPrefix(a.GetOutcome().String(), "MESSAGE_STATE_")
		if c := a.GetErrorClass(); c != controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
			outcome += "(" + strings.TrimPrefix(c.String(), "ERROR_CLASS_") + ")"
		}
		fmt.Fprintf(tw, "  #%d\t%s\t%s\t%s\t%s\n", a.GetNumber(), clock(a.GetStartedAt()), short(a.GetDuration()), outcome,
			strings.ReplaceAll(a.GetError(), "\n", `\n`))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	opt.skip = names("timeline", "attempts", "trace_id", "trace_url")
	opt.labels = map[string]string{"message.attempts": "message.failed_attempts_since_replay"}
	return renderTable(w, r.ProtoReflect(), opt)
}

// flightCell is how many characters of a field's value the narrow view shows in each column:
// two columns of it and the field's name fit a terminal of 120, where one long collection made
// the whole table hundreds of characters wide. -o wide shows the values whole.
const flightCell = 48

// renderFlight prints a flight's PostgreSQL state beside its Redis projection, then its
// messages and events. The narrow view is a diff: the fields that differ, side by side and
// marked, a long value cut to flightCell characters and followed by where the two sides first
// part, and a count of the fields that agree; -o wide prints every field side by side, whole.
func renderFlight(w io.Writer, r *controlv1.GetFlightResponse, opt tableOpts) error {
	pg, rd := r.GetPostgres(), r.GetRedis()
	drift := "none"
	if r.GetDrifted() {
		drift = strings.ToUpper(r.GetDrift())
	}
	fmt.Fprintf(w, "flight %s  drift %s\n", r.GetFlid(), drift)
	if rd.GetError() != "" {
		fmt.Fprintf(w, "redis could not be read: %s\n", rd.GetError())
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\t\tPOSTGRESQL\tREDIS")
	pgVersion, rdVersion := "-", "-"
	if pg != nil {
		pgVersion = fmt.Sprint(pg.GetVersion())
		fmt.Fprintf(tw, "\tstate\t%s\t\n", pg.GetState())
		if pg.GetFlightNumber() != "" || pg.GetOperationDay() != "" {
			fmt.Fprintf(tw, "\tflight\t%s on %s\t\n", cmp.Or(pg.GetFlightNumber(), "-"), cmp.Or(pg.GetOperationDay(), "-"))
		}
		fmt.Fprintf(tw, "\tlast message\t%d\t\n", pg.GetLastMsgId())
		fmt.Fprintf(tw, "\tupdated\t%s\t\n", clock(pg.GetUpdatedAt()))
	}
	if rd.Version != nil {
		rdVersion = fmt.Sprint(rd.GetVersion())
	}
	fmt.Fprintf(tw, "%s\tversion\t%s\t%s\n", differ(pgVersion != rdVersion), pgVersion, rdVersion)
	left, right := fields(pg.GetDocumentJson()), fields(rd.GetDocumentJson())
	keys := make([]string, 0, len(left)+len(right))
	for k := range left {
		keys = append(keys, k)
	}
	for k := range right {
		if _, ok := left[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var parted []string
	equal := 0
	for _, k := range keys {
		l, lok := left[k]
		rv, rok := right[k]
		if !lok {
			l = "-"
		}
		if !rok {
			rv = "-"
		}
		lc, rc := l, rv
		if !opt.wide {
			if l == rv {
				equal++
				continue
			}
			lc, rc = flightValue(l), flightValue(rv)
			if lc != l || rc != rv {
				parted = append(parted, partNote(k, l, rv))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", differ(l != rv), k, lc, rc)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range parted {
		fmt.Fprintln(w, p)
	}
	if !opt.wide && len(keys) > 0 {
		fmt.Fprintf(w, "%d of %d fields equal on both sides (-o wide prints every field)\n", equal, len(keys))
	}
	fmt.Fprintln(w)
	opt.skip = names("flid", "postgres", "redis", "drift", "drifted")
	return renderTable(w, r.ProtoReflect(), opt)
}

// flightValue is v cut to flightCell characters, its length in bytes said when cut.
func flightValue(v string) string {
	r := []rune(v)
	if len(r) <= flightCell {
		return v
	}
	return fmt.Sprintf("%s…(%d bytes)", string(r[:flightCell-12]), len(v))
}

// partNote says where two long values of field k first differ, with a little of each side from
// there (character positions, counted from 0).
func partNote(k, pg, rd string) string {
	a, b := []rune(pg), []rune(rd)
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	around := func(r []rune) string {
		from, to := max(i-8, 0), min(i+24, len(r))
		s := string(r[from:to])
		if from > 0 {
			s = "…" + s
		}
		if to < len(r) {
			s += "…"
		}
		return s
	}
	return fmt.Sprintf("≠ %s differs from character %d: postgresql %s, redis %s", k, i, around(a), around(b))
}

// cutNote says that a value is only the head of itself (control.page-bytes), how long the
// whole is and its digest; "" for a whole value.
func cutNote(t *controlv1.Truncated) string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf(" …[cut: %d of %d bytes shown, sha256 %s]", t.GetKeptBytes(), t.GetBytes(), t.GetSha256())
}

// renderFlightHistory prints a flight's messages in ID order, one block each: the message and
// its outcome, each part it changed (old -> new), each part it left to a newer message, and
// the events it wrote.
func renderFlightHistory(w io.Writer, r *controlv1.GetFlightHistoryResponse) error {
	fmt.Fprintf(w, "flight %s: %d messages\n", r.GetFlid(), len(r.GetEntries()))
	for _, e := range r.GetEntries() {
		outcome := strings.TrimPrefix(e.GetMessageState().String(), "MESSAGE_STATE_")
		if e.GetMessageState() == controlv1.MessageState_MESSAGE_STATE_UNSPECIFIED {
			// The server reads every kept record: none means retention deleted it.
			outcome = "state not kept (processing record deleted)"
		}
		if e.GetFlightState() != "" {
			outcome += fmt.Sprintf(", flight %s v%d", e.GetFlightState(), e.GetVersion())
		}
		if e.GetReason() != "" {
			outcome += ": " + e.GetReason()
		}
		cause := ""
		if c := e.GetCause(); c != "" && c != "target" {
			cause = " (" + c + ")"
		}
		fmt.Fprintf(w, "\nmsg %d  %s/%s%s  %s  %s\n", e.GetMsgId(), e.GetMsgType(), e.GetStyp(), cause, clock(e.GetAt()), outcome)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, c := range e.GetChanges() {
			fmt.Fprintf(tw, "  changed\t%s\t%s -> %s\n", c.GetPart(), cmp.Or(c.GetOld(), "-")+cutNote(c.GetOldCut()),
				cmp.Or(c.GetNew(), "-")+cutNote(c.GetNewCut()))
		}
		if e.GetChangesOmitted() {
			fmt.Fprintf(tw, "  changes\tnot in this answer\tmsgxctl flight-history %s --after-msg-id %d --page-size 1\n", e.GetFlid(), e.GetMsgId()-1)
		}
		for _, sp := range e.GetSuperseded() {
			fmt.Fprintf(tw, "  superseded\t%s\tnewer at msg %d\n", sp.GetPart(), sp.GetNewerMsgId())
		}
		for _, ev := range e.GetEvents() {
			fmt.Fprintf(tw, "  event\t%s\t%s v%d\n", ev.GetTarget(), ev.GetType(), ev.GetVersion())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func names(ns ...protoreflect.Name) map[protoreflect.Name]bool {
	m := map[protoreflect.Name]bool{}
	for _, n := range ns {
		m[n] = true
	}
	return m
}

func differ(b bool) string {
	if b {
		return "≠"
	}
	return ""
}

// fields splits a projection document into its top-level fields as compact JSON, for a
// field-by-field comparison; a document that is not an object is one field "document".
func fields(doc string) map[string]string {
	out := map[string]string{}
	if doc == "" {
		return out
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		out["document"] = doc
		return out
	}
	for k, v := range m {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			out[k] = string(v)
			continue
		}
		out[k] = b.String()
	}
	return out
}

// clock prints a time for a person: UTC to the millisecond.
func clock(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format("2006-01-02 15:04:05.000Z")
}

// short prints a duration rounded to what a person compares: ms under a minute, s above.
func short(d *durationpb.Duration) string {
	v := d.AsDuration()
	switch abs := max(v, -v); {
	case abs < time.Second:
		return v.Round(time.Millisecond).String()
	case abs < time.Minute:
		return v.Round(10 * time.Millisecond).String()
	}
	return v.Round(time.Second).String()
}

// bodyNote is what get-message-body's table leaves out of stdout, for stderr: where the next
// chunk starts when this one does not reach the end; "" at the end.
func bodyNote(r *controlv1.GetMessageBodyResponse) string {
	if r.GetEof() {
		return ""
	}
	return fmt.Sprintf("msgxctl: characters %d to %d of %d (%s); the next chunk: --offset %d",
		r.GetOffset(), r.GetNextOffset(), r.GetBodyChars(), r.GetRawSource(), r.GetNextOffset())
}
