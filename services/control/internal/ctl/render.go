package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// render writes a response as JSON (protojson with the .proto's field names and every field,
// zero values included, so scripts see a stable shape) or as tables for people.
func render(w io.Writer, format string, m proto.Message) error {
	if format == "json" {
		b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
		if err != nil {
			return localErr(fmt.Errorf("render: %w", err))
		}
		// protojson varies its whitespace on purpose; re-indenting makes the bytes stable, so
		// scripts can diff two outputs.
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", "  "); err != nil {
			return localErr(fmt.Errorf("render: %w", err))
		}
		out.WriteByte('\n')
		_, err = out.WriteTo(w)
		return wrapWrite(err)
	}
	switch resp := m.(type) {
	case *controlv1.GetMessageResponse:
		return wrapWrite(renderMessage(w, resp))
	case *controlv1.GetFlightResponse:
		return wrapWrite(renderFlight(w, resp))
	case *controlv1.GetFlightHistoryResponse:
		return wrapWrite(renderFlightHistory(w, resp))
	}
	return wrapWrite(renderTable(w, m.ProtoReflect()))
}

func wrapWrite(err error) error {
	if err != nil {
		return localErr(fmt.Errorf("write output: %w", err))
	}
	return nil
}

// A table rendering, derived from the response's descriptor like the flags: the singular
// fields as KEY VALUE lines (nested messages flattened with dotted keys), then one table per
// repeated message field with a column per field that is set in some row, then multi-line
// text (raw XML) as blocks at the end.
type tableOut struct {
	pairs    [][2]string
	sections []section
	blocks   [][2]string
	// skip names top-level fields a view has printed already.
	skip map[protoreflect.Name]bool
}

type section struct {
	title string
	rows  []protoreflect.Message
}

func renderTable(w io.Writer, m protoreflect.Message, skip ...protoreflect.Name) error {
	t := tableOut{skip: map[protoreflect.Name]bool{}}
	for _, n := range skip {
		t.skip[n] = true
	}
	t.walk(m, "")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range t.pairs {
		fmt.Fprintf(tw, "%s\t%s\n", p[0], p[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range t.sections {
		if err := writeSection(w, s); err != nil {
			return err
		}
	}
	for _, b := range t.blocks {
		if _, err := fmt.Fprintf(w, "\n%s:\n%s\n", b[0], strings.TrimRight(b[1], "\n")); err != nil {
			return err
		}
	}
	return nil
}

func (t *tableOut) walk(m protoreflect.Message, prefix string) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if prefix == "" && t.skip[fd.Name()] {
			continue
		}
		key := prefix + string(fd.Name())
		switch {
		case fd.IsMap():
			t.pairs = append(t.pairs, [2]string{key, compactJSON(m, fd)})
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind && !isWellKnown(fd.Message()):
			list := m.Get(fd).List()
			rows := make([]protoreflect.Message, list.Len())
			for j := range list.Len() {
				rows[j] = list.Get(j).Message()
			}
			t.sections = append(t.sections, section{title: key, rows: rows})
		case fd.IsList():
			list := m.Get(fd).List()
			vals := make([]string, list.Len())
			for j := range list.Len() {
				vals[j] = format(fd, list.Get(j))
			}
			t.pairs = append(t.pairs, [2]string{key, strings.Join(vals, ",")})
		case fd.Kind() == protoreflect.MessageKind && !isWellKnown(fd.Message()):
			if !m.Has(fd) {
				t.pairs = append(t.pairs, [2]string{key, "-"})
				continue
			}
			t.walk(m.Get(fd).Message(), key+".")
		default:
			v := "-"
			if m.Has(fd) || !fd.HasPresence() {
				v = format(fd, m.Get(fd))
			}
			if strings.Contains(v, "\n") {
				t.blocks = append(t.blocks, [2]string{key, v})
				continue
			}
			t.pairs = append(t.pairs, [2]string{key, v})
		}
	}
}

// writeSection prints the rows of a repeated field as a table; columns are the numbers, enums
// and booleans, and the other fields set in at least one row; nested messages inside a row are
// compact JSON.
func writeSection(w io.Writer, s section) error {
	if _, err := fmt.Fprintf(w, "\n%s (%d):\n", s.title, len(s.rows)); err != nil {
		return err
	}
	if len(s.rows) == 0 {
		return nil
	}
	fields := s.rows[0].Descriptor().Fields()
	var cols []protoreflect.FieldDescriptor
	for i := range fields.Len() {
		fd := fields.Get(i)
		if alwaysShown(fd) {
			cols = append(cols, fd)
			continue
		}
		for _, r := range s.rows {
			if r.Has(fd) {
				cols = append(cols, fd)
				break
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := make([]string, len(cols))
	for i, fd := range cols {
		header[i] = strings.ToUpper(string(fd.Name()))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range s.rows {
		cells := make([]string, len(cols))
		for i, fd := range cols {
			switch {
			case !r.Has(fd) && !alwaysShown(fd):
				cells[i] = "-"
			case fd.IsList() || fd.IsMap() || (fd.Kind() == protoreflect.MessageKind && !isWellKnown(fd.Message())):
				cells[i] = compactJSON(r, fd)
			default:
				cells[i] = strings.ReplaceAll(format(fd, r.Get(fd)), "\n", `\n`)
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
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

// format prints one value: enums without their common prefix, times in RFC 3339 UTC,
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
