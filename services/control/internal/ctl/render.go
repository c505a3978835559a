package ctl

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// render writes a response as renderAs does with the generic name and table.
func render(w io.Writer, format string, noHeaders bool, m proto.Message) error {
	return renderAs(w, format, noHeaders, m, "", true)
}

// renderAs writes a response in an -o format. json is protojson's mapping, as grpcurl prints
// it (lowerCamelCase names such as msgId), with every field, zero values included, so scripts
// see a stable shape, and 64-bit integers as JSON numbers (jsonOf); yaml is the same document
// as YAML; name prints the IDs (namePath, or the rows' first field), one a line; table and
// wide are for people, noHeaders leaving out the lists' titles and column headers. long shows
// long text (payloads, errors, raw XML) in a table too, as a get does: a list shows it in
// wide only.
func renderAs(w io.Writer, format string, noHeaders bool, m proto.Message, namePath string, long bool) error {
	switch format {
	case "json", "yaml":
		b, err := jsonOf(m)
		if err != nil {
			return err
		}
		if format == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return localErr(fmt.Errorf("render: %w", err))
			}
		}
		_, err = w.Write(b)
		return wrapWrite(err)
	case "name":
		names, err := namesOf(m.ProtoReflect(), namePath)
		if err != nil {
			return err
		}
		for _, n := range names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return wrapWrite(err)
			}
		}
		return nil
	}
	opt := tableOpts{wide: format == "wide", long: long || format == "wide", noHeaders: noHeaders}
	switch resp := m.(type) {
	case *controlv1.GetMessageResponse:
		return wrapWrite(renderMessage(w, resp, opt))
	case *controlv1.GetFlightResponse:
		return wrapWrite(renderFlight(w, resp, opt))
	case *controlv1.GetFlightHistoryResponse:
		return wrapWrite(renderFlightHistory(w, resp))
	case *controlv1.GetMessageBodyResponse:
		if !opt.wide {
			// The XML exactly, nothing before or after it, so chunks written one after the other
			// make the inbox text byte for byte; -o wide shows the offsets (bodyNote says where
			// the next chunk starts, on stderr).
			_, err := io.WriteString(w, resp.GetText())
			return wrapWrite(err)
		}
	}
	return wrapWrite(renderTable(w, m.ProtoReflect(), opt))
}

// jsonOf is m as protojson writes it (the names grpcurl prints), except that 64-bit integers,
// which protojson quotes for JavaScript's sake, are JSON numbers: `jq '.backlog.unfinished >
// 0'` must compare numbers (issue #56 finding 3). No count or ID of this API comes near 2^53,
// where a JavaScript reader would round.
func jsonOf(m proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return nil, localErr(fmt.Errorf("render: %w", err))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := readJSON(dec)
	if err != nil {
		return nil, localErr(fmt.Errorf("render: %w", err))
	}
	var out bytes.Buffer
	writeJSON(&out, numbersOf(m.ProtoReflect().Descriptor(), v))
	// protojson varies its whitespace on purpose; re-indenting makes the bytes stable, so
	// scripts can diff two outputs.
	var ind bytes.Buffer
	if err := json.Indent(&ind, out.Bytes(), "", "  "); err != nil {
		return nil, localErr(fmt.Errorf("render: %w", err))
	}
	ind.WriteByte('\n')
	return ind.Bytes(), nil
}

// jsonLine is m as jsonOf writes it, on one line: the documents of a stream (get-status
// --watch -o json), one per line.
func jsonLine(m proto.Message) ([]byte, error) {
	b, err := jsonOf(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, localErr(fmt.Errorf("render: %w", err))
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// jsonObject keeps an object's keys in protojson's order (the .proto's field order), which a
// map would lose.
type jsonObject struct {
	keys []string
	vals []any
}

// readJSON reads one JSON value, objects as jsonObject, numbers as json.Number.
func readJSON(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch d := tok.(type) {
	case json.Delim:
		if d == '[' {
			arr := []any{}
			for dec.More() {
				v, err := readJSON(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
		obj := &jsonObject{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := readJSON(dec)
			if err != nil {
				return nil, err
			}
			obj.keys, obj.vals = append(obj.keys, k.(string)), append(obj.vals, v)
		}
		_, err := dec.Token()
		return obj, err
	}
	return tok, nil
}

func writeJSON(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case *jsonObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			writeJSON(b, v.vals[i])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	default:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v) // strings, json.Number, bools, nil: they encode
		b.Truncate(b.Len() - 1)
	}
}

// numbersOf turns the quoted 64-bit integers of v, a message of type md as protojson wrote it,
// into numbers.
func numbersOf(md protoreflect.MessageDescriptor, v any) any {
	switch md.FullName() {
	case "google.protobuf.Int64Value", "google.protobuf.UInt64Value":
		return number(v)
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return v // a well-known type's own form: a timestamp, a duration
	}
	fields := md.Fields()
	for i, k := range obj.keys {
		fd := fields.ByJSONName(k)
		if fd == nil {
			continue
		}
		elem := func(e any) any { return valueNumbers(fd, e) }
		switch {
		case fd.IsMap():
			if m, ok := obj.vals[i].(*jsonObject); ok {
				for j := range m.vals {
					m.vals[j] = valueNumbers(fd.MapValue(), m.vals[j])
				}
			}
		case fd.IsList():
			if arr, ok := obj.vals[i].([]any); ok {
				for j := range arr {
					arr[j] = elem(arr[j])
				}
			}
		default:
			obj.vals[i] = elem(obj.vals[i])
		}
	}
	return obj
}

func valueNumbers(fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return number(v)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return numbersOf(fd.Message(), v)
	}
	return v
}

// number is a quoted integer as a JSON number; anything else as it is.
func number(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return json.Number(s)
	}
	if _, err := strconv.ParseUint(s, 10, 64); err == nil {
		return json.Number(s)
	}
	return v
}

// namesOf is what -o name prints: the values at path (a dotted field path; a list gives one
// name per entry), or, without a path, the rows of the response's first repeated message field,
// else the response's first field.
func namesOf(m protoreflect.Message, path string) ([]string, error) {
	if path == "" {
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			if fd := fields.Get(i); fd.IsList() && fd.Kind() == protoreflect.MessageKind {
				return listNames(fd, m.Get(fd).List()), nil
			}
		}
		if fields.Len() == 0 {
			return nil, usageErr("-o name: this answer has no names; use -o table or -o json")
		}
		path = string(fields.Get(0).Name())
	}
	parts := strings.Split(path, ".")
	for i, part := range parts {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(part))
		if fd == nil {
			return nil, localErr(fmt.Errorf("-o name: the answer has no field %s", path))
		}
		switch {
		case fd.IsList():
			return listNames(fd, m.Get(fd).List()), nil
		case fd.Kind() == protoreflect.MessageKind && !isWellKnown(fd.Message()):
			if !m.Has(fd) {
				return nil, nil
			}
			if i == len(parts)-1 {
				return []string{rowName(m.Get(fd).Message())}, nil
			}
			m = m.Get(fd).Message()
		default:
			if !m.Has(fd) && fd.HasPresence() {
				return nil, nil
			}
			return []string{format(fd, m.Get(fd))}, nil
		}
	}
	return nil, nil
}

func listNames(fd protoreflect.FieldDescriptor, list protoreflect.List) []string {
	out := make([]string, list.Len())
	for i := range list.Len() {
		if fd.Kind() == protoreflect.MessageKind {
			out[i] = rowName(list.Get(i).Message())
		} else {
			out[i] = format(fd, list.Get(i))
		}
	}
	return out
}

// rowName is a row's name: its first field (msg_id, req_id, rebuild_id, event_id), or for a
// reference record category/key.
func rowName(m protoreflect.Message) string {
	if r, ok := m.Interface().(*controlv1.Reference); ok {
		return r.GetRtype() + "/" + r.GetRkey()
	}
	fd := m.Descriptor().Fields().Get(0)
	return format(fd, m.Get(fd))
}

func wrapWrite(err error) error {
	if err != nil {
		return localErr(fmt.Errorf("write output: %w", err))
	}
	return nil
}

// tableOpts are the table's choices: wide shows every column of a list and exact values,
// long the long text (payloads, errors, raw XML) of singular fields.
type tableOpts struct {
	wide, long bool
	// noHeaders (--no-headers) leaves out the lists' titles, column headers and notes: only
	// the rows, for a pipe into cut or awk.
	noHeaders bool
	// skip names top-level fields a view has printed already; labels rename keys.
	skip   map[protoreflect.Name]bool
	labels map[string]string
}

// A table rendering, derived from the response's descriptor like the flags: the singular
// fields as KEY VALUE lines (nested messages flattened with dotted keys), then one table per
// repeated message field, then multi-line text (raw XML) as blocks at the end.
type tableOut struct {
	opt      tableOpts
	pairs    [][2]string
	sections []section
	blocks   [][2]string
	hidden   []string
}

type section struct {
	title string
	fd    protoreflect.FieldDescriptor
	rows  []protoreflect.Message
}

func renderTable(w io.Writer, m protoreflect.Message, opt tableOpts) error {
	t := tableOut{opt: opt}
	t.walk(m, "")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range t.pairs {
		fmt.Fprintf(tw, "%s\t%s\n", p[0], p[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, s := range t.sections {
		// A list's table opens the output when nothing came before it.
		if (i > 0 || len(t.pairs) > 0) && !opt.noHeaders {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := writeSection(w, s, opt); err != nil {
			return err
		}
	}
	for _, b := range t.blocks {
		if _, err := fmt.Fprintf(w, "\n%s:\n%s\n", b[0], strings.TrimRight(b[1], "\n")); err != nil {
			return err
		}
	}
	if len(t.hidden) > 0 && !opt.noHeaders {
		if _, err := fmt.Fprintf(w, "\n(%s: -o wide shows %s)\n", strings.Join(t.hidden, ", "), pronoun(len(t.hidden))); err != nil {
			return err
		}
	}
	return nil
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

func (t *tableOut) walk(m protoreflect.Message, prefix string) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if prefix == "" && (t.opt.skip[fd.Name()] || strings.HasPrefix(string(fd.Name()), "next_")) {
			// A list's next page is the "more:" line after the table (or --all).
			continue
		}
		key := prefix + string(fd.Name())
		label := key
		if l, ok := t.opt.labels[key]; ok {
			label = l
		}
		switch {
		case fd.IsMap():
			t.pairs = append(t.pairs, [2]string{label, compactJSON(m, fd)})
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind && !isWellKnown(fd.Message()):
			list := m.Get(fd).List()
			rows := make([]protoreflect.Message, list.Len())
			for j := range list.Len() {
				rows[j] = list.Get(j).Message()
			}
			t.sections = append(t.sections, section{title: label, fd: fd, rows: rows})
		case fd.IsList():
			list := m.Get(fd).List()
			vals := make([]string, list.Len())
			for j := range list.Len() {
				vals[j] = format(fd, list.Get(j))
			}
			t.pairs = append(t.pairs, [2]string{label, cmp.Or(strings.Join(vals, ","), "-")})
		case fd.Kind() == protoreflect.MessageKind && !isWellKnown(fd.Message()):
			if !m.Has(fd) {
				t.pairs = append(t.pairs, [2]string{label, "-"})
				continue
			}
			t.walk(m.Get(fd).Message(), key+".")
		default:
			v := "-"
			if m.Has(fd) || alwaysShown(fd) {
				v = cell(fd, m.Get(fd), t.opt.wide)
			}
			if strings.Contains(v, "\n") {
				if !t.opt.long {
					t.hidden = append(t.hidden, label)
					continue
				}
				t.blocks = append(t.blocks, [2]string{label, v})
				continue
			}
			t.pairs = append(t.pairs, [2]string{label, v})
		}
	}
}

// column is one column of a list's narrow table: the header and the fields it shows (two
// joined by sep, as TYPE shows SCHD/RESP).
type column struct {
	header string
	fields []string
	sep    string
	// fill is the reason column (last_error), last in the row: on one line, and in the narrow
	// table cut to what the other columns leave of tableWidth (at least minReason).
	fill bool
	// derive, when set, makes the cell from the whole row instead of fields: a state said in
	// words that two fields only say together.
	derive func(protoreflect.Message) string
}

func col(header string, fields ...string) column {
	return column{header: header, fields: fields, sep: "/"}
}

// reason is the column that says why a row is dead or failed (issue #56 finding 2): the
// runbooks triage from the default table, so it is there, cut to fit.
func reason(field string) column {
	return column{header: strings.ToUpper(field), fields: []string{field}, sep: "/", fill: true}
}

const (
	// tableWidth is the terminal a narrow table fits.
	tableWidth = 120
	// minReason is the least of the reason column the narrow table shows, even past
	// tableWidth: a few words of the error say which runbook applies.
	minReason = 24
)

// narrowColumns are the default table's columns of the rows an operator lists, chosen to fit
// a 120-column terminal; -o wide shows every field. A row type not here shows every field
// that is not long text (narrowFallback). Every column is always present, empty or not, so
// scripts and eyes find it in the same place on every call.
var narrowColumns = map[protoreflect.FullName][]column{
	"msgx.control.v1.Message": {col("MSG_ID", "msg_id"), col("STATE", "state"), col("CLASS", "error_class"),
		col("RETRIES", "attempts"), col("TYPE", "msg_type", "msg_styp"), col("FLID", "flid"),
		col("ENQUEUED", "enqueued_at"), col("ACKED_BY", "acknowledged_by"), reason("last_error")},
	"msgx.control.v1.UpstreamRequest": {col("REQ_ID", "req_id"), col("TYPE", "type"), col("SCOPE", "scope"),
		col("STATE", "state"), col("SEQN", "seqn"), col("CREATED", "created_at"), col("ANSWER_MSG", "answer_msg_id")},
	"msgx.control.v1.ProjectionRebuild": {col("REBUILD_ID", "rebuild_id"), col("STATE", "state"), col("ALL", "all"),
		col("DRY_RUN", "dry_run"), col("FLIGHTS", "done", "total"), col("MISSING", "missing"), col("STALE", "stale"),
		col("CONTENT", "content"), col("EXTRA", "extra"), col("REPAIRED", "repaired"), col("REQUESTED", "requested_at")},
	"msgx.control.v1.Reference": {col("CATEGORY", "rtype"), col("KEY", "rkey"), col("SOURCE_MSG", "source_msg_id"),
		col("BATCH", "batch"), col("REFRESHED", "refreshed_at")},
	"msgx.control.v1.DeadEvent": {col("EVENT_ID", "event_id"), col("TARGET", "target"), col("FLID", "flid"),
		col("TYPE", "event_type"), col("VERSION", "state_version"), col("MSG_ID", "msg_id"), col("ATTEMPTS", "attempts"),
		col("DEAD_AT", "dead_at"), reason("last_error")},
	"msgx.control.v1.Event": {col("EVENT_ID", "event_id"), col("TARGET", "target"), col("KEY", "partition_key"),
		col("TYPE", "event_type"), col("VERSION", "state_version"), col("STATE", "state"), col("ATTEMPTS", "attempts"),
		col("CREATED", "created_at"), reason("last_error")},
	"msgx.control.v1.RoleStatus": {col("ROLE", "role"), {header: "STATE", derive: roleStateCell}, col("INSTANCE", "instance"),
		col("SINCE", "since"), col("BLOCKED_ON", "blocked.dependency")},
	"msgx.control.v1.FlightHistoryEntry": {col("MSG_ID", "msg_id"), col("FLID", "flid"), col("CAUSE", "cause"),
		col("MESSAGE", "message_state"), col("FLIGHT", "flight_state"), col("VERSION", "version"), col("AT", "at")},
}

// longText is a field too long for a narrow column or a list: payloads, documents, errors.
func longText(fd protoreflect.FieldDescriptor) bool {
	if fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.BytesKind {
		return false
	}
	n := string(fd.Name())
	return strings.Contains(n, "payload") || strings.HasSuffix(n, "_json") || strings.HasSuffix(n, "xml") ||
		strings.HasSuffix(n, "error") || strings.HasPrefix(n, "trace_") || strings.HasSuffix(n, "comment") || n == "detail" ||
		n == "identity_key"
}

// narrowFallback is the narrow table of a row type without narrowColumns: every field that is
// neither long text nor nested.
func narrowFallback(md protoreflect.MessageDescriptor) []column {
	var cols []column
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if longText(fd) || fd.IsList() || fd.IsMap() || (fd.Kind() == protoreflect.MessageKind && !isWellKnown(fd.Message())) {
			continue
		}
		cols = append(cols, col(strings.ToUpper(string(fd.Name())), string(fd.Name())))
	}
	return cols
}

// wideColumns are the narrow table's columns, under the same headers, then every other field
// of a row, one column each, named after it: a column has one name in both tables (issue #56
// finding 2).
func wideColumns(md protoreflect.MessageDescriptor, narrow []column) []column {
	cols := slices.Clone(narrow)
	shown := map[string]bool{}
	for i := range cols {
		cols[i].fill = false // wide shows the whole reason
		for _, f := range cols[i].fields {
			shown[strings.SplitN(f, ".", 2)[0]] = true
		}
	}
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); !shown[string(fd.Name())] {
			cols = append(cols, col(strings.ToUpper(string(fd.Name())), string(fd.Name())))
		}
	}
	return cols
}

// writeSection prints the rows of a repeated field as a table.
func writeSection(w io.Writer, s section, opt tableOpts) error {
	wide := opt.wide
	if !opt.noHeaders {
		if _, err := fmt.Fprintf(w, "%s (%d):\n", s.title, len(s.rows)); err != nil {
			return err
		}
	}
	if len(s.rows) == 0 {
		return nil
	}
	md := s.fd.Message()
	cols, ok := narrowColumns[md.FullName()]
	if !ok {
		cols = narrowFallback(md)
	}
	if wide {
		cols = wideColumns(md, cols)
	}
	header := make([]string, len(cols))
	widths := make([]int, len(cols))
	for i, c := range cols {
		header[i] = c.header
		widths[i] = utf8.RuneCountInString(c.header)
	}
	rows := make([][]string, len(s.rows))
	for k, r := range s.rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			if c.derive != nil {
				cells[i] = c.derive(r)
				widths[i] = max(widths[i], utf8.RuneCountInString(cells[i]))
				continue
			}
			vals := make([]string, len(c.fields))
			for j, f := range c.fields {
				vals[j] = fieldCell(r, f, wide)
			}
			cells[i] = strings.Join(vals, c.sep)
			if strings.Trim(cells[i], "-"+c.sep) == "" {
				cells[i] = "-"
			}
			if c.fill {
				cells[i] = strings.Join(strings.Fields(strings.ReplaceAll(cells[i], `\n`, " ")), " ")
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cells[i]))
		}
		rows[k] = cells
	}
	for i, c := range cols {
		if !c.fill {
			continue
		}
		room := tableWidth
		for j := range cols {
			if j != i {
				room -= widths[j] + 2 // tabwriter's padding
			}
		}
		room = max(room, minReason)
		for _, cells := range rows {
			if r := []rune(cells[i]); len(r) > room {
				cells[i] = string(r[:room-1]) + "…"
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !opt.noHeaders {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, cells := range rows {
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// Role states in words, shared by get-status's table and --watch: "HELD true ACTIVE false"
// made the reader work out that nobody runs the role (issue #56).
const (
	roleActive   = "active"
	roleNotHeld  = "not held"
	roleInactive = "INACTIVE (holder gone, no standby has taken over)"
)

// roleState says a role's state from its held and active fields.
func roleState(held, active bool) string {
	switch {
	case !held:
		return roleNotHeld
	case !active:
		return roleInactive
	}
	return roleActive
}

// roleStateCell is the STATE cell of a RoleStatus row.
func roleStateCell(r protoreflect.Message) string {
	f := r.Descriptor().Fields()
	return roleState(r.Get(f.ByName("held")).Bool(), r.Get(f.ByName("active")).Bool())
}

// fieldCell is the cell of a dotted field path of row r; "-" when unset.
func fieldCell(r protoreflect.Message, path string, wide bool) string {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		fd := r.Descriptor().Fields().ByName(protoreflect.Name(p))
		if fd == nil || !r.Has(fd) {
			return "-"
		}
		r = r.Get(fd).Message()
	}
	fd := r.Descriptor().Fields().ByName(protoreflect.Name(parts[len(parts)-1]))
	switch {
	case fd == nil:
		return "?"
	case fd.IsList() || fd.IsMap() || (fd.Kind() == protoreflect.MessageKind && !isWellKnown(fd.Message())):
		if !r.Has(fd) {
			return "-"
		}
		return compactJSON(r, fd)
	case !r.Has(fd) && !alwaysShown(fd):
		return "-"
	}
	return strings.ReplaceAll(cell(fd, r.Get(fd), wide), "\n", `\n`)
}

// alwaysShown is a scalar whose zero value means something (a count of 0, false).
func alwaysShown(fd protoreflect.FieldDescriptor) bool {
	if fd.IsList() || fd.IsMap() || fd.HasPresence() {
		return false
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return false
	}
	return true
}

func isWellKnown(md protoreflect.MessageDescriptor) bool {
	n := md.FullName()
	return n == "google.protobuf.Timestamp" || n == "google.protobuf.Duration"
}

// cell prints a value for a person: counts with thousands separators (IDs as they are, to be
// copied), durations rounded, times to the second, rates to two decimals; wide prints the
// exact value.
func cell(fd protoreflect.FieldDescriptor, v protoreflect.Value, wide bool) string {
	if wide {
		return format(fd, v)
	}
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if identifier(fd) {
			return format(fd, v)
		}
		return grouped(v.Int())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if identifier(fd) || v.Uint() > math.MaxInt64 {
			return format(fd, v)
		}
		return grouped(int64(v.Uint()))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return strconv.FormatFloat(v.Float(), 'f', 2, 64)
	case protoreflect.MessageKind:
		switch msg := v.Message().Interface().(type) {
		case *timestamppb.Timestamp:
			return msg.AsTime().UTC().Truncate(time.Second).Format(time.RFC3339)
		case *durationpb.Duration:
			return short(msg)
		}
	}
	return format(fd, v)
}

// identifier is a number that names something (an ID, a watermark, a version): never grouped.
func identifier(fd protoreflect.FieldDescriptor) bool {
	n := string(fd.Name())
	switch n {
	case "watermark", "first", "last", "through", "version", "state_version", "seed_value", "scanned_to", "number",
		"backend_pid", "watermark_before":
		return true
	}
	return n == "id" || strings.HasSuffix(n, "_id") || strings.HasSuffix(n, "_ids")
}

// grouped prints n with thousands separators: 1234567 → 1,234,567.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// format prints one value exactly: enums without their common prefix, times in RFC 3339 UTC,
// durations as Go durations.
func format(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		ev := fd.Enum().Values().ByNumber(v.Enum())
		if ev == nil {
			return strconv.Itoa(int(v.Enum()))
		}
		if ev.Number() == 0 && strings.HasSuffix(string(ev.Name()), "UNSPECIFIED") {
			return "-"
		}
		return strings.TrimPrefix(string(ev.Name()), enumPrefix(fd.Enum()))
	case protoreflect.MessageKind:
		switch msg := v.Message().Interface().(type) {
		case *timestamppb.Timestamp:
			return msg.AsTime().UTC().Format(time.RFC3339Nano)
		case *durationpb.Duration:
			return msg.AsDuration().String()
		}
		b, _ := protojson.Marshal(v.Message().Interface())
		return string(b)
	case protoreflect.BytesKind:
		return fmt.Sprintf("%x", v.Bytes())
	}
	return v.String()
}

// compactJSON prints one field of m as JSON (for nested lists and messages in a table cell).
func compactJSON(m protoreflect.Message, fd protoreflect.FieldDescriptor) string {
	tmp := m.New()
	tmp.Set(fd, m.Get(fd))
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(tmp.Interface())
	if err != nil {
		return "?"
	}
	s := string(b)
	// {"field":VALUE} → VALUE
	if i := strings.IndexByte(s, ':'); i > 0 && strings.HasSuffix(s, "}") {
		return s[i+1 : len(s)-1]
	}
	return s
}
