package ctl

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxDepth bounds the nesting of request messages turned into flags (a recursive message
// type would otherwise never end).
const maxDepth = 4

// requestFlags holds one flag per leaf field of a request message: scalars, enums, repeated
// scalars and enums, and the well-known Timestamp and Duration. Fields of nested messages get
// dotted names (range.first). The values are kept as text and set on the request after
// parsing, so a flag never given leaves its field unset.
type requestFlags struct {
	leaves []*leafFlag
	// byField finds a leaf by its proto path (range.first); parents are the paths of the
	// nested messages (range).
	byField map[string]*leafFlag
	parents map[string]bool
}

type leafFlag struct {
	name  string
	field string                         // the proto path, range.first
	path  []protoreflect.FieldDescriptor // from the request down to the leaf field
	raw   []string
	set   bool
}

func (l *leafFlag) leaf() protoreflect.FieldDescriptor { return l.path[len(l.path)-1] }

// String, Set and Type make leafFlag a pflag.Value.
func (l *leafFlag) String() string { return strings.Join(l.raw, ",") }

func (l *leafFlag) Set(v string) error {
	fd := l.leaf()
	var parts []string
	if fd.IsList() {
		// Repeatable, and each value may be a comma-separated list.
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
	} else {
		parts = []string{v}
		l.raw = nil
	}
	for _, p := range parts {
		if _, err := parseScalar(fd, p); err != nil {
			return err
		}
	}
	l.raw = append(l.raw, parts...)
	l.set = true
	return nil
}

// Type is the value's kind as --help shows it next to the flag.
func (l *leafFlag) Type() string {
	fd := l.leaf()
	t := typeName(fd)
	switch fd.Kind() {
	case protoreflect.EnumKind:
		t = "choice"
	case protoreflect.StringKind:
		t = "text"
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		t = "decimal"
	case protoreflect.BoolKind:
	case protoreflect.MessageKind, protoreflect.BytesKind:
	default:
		t = "number"
	}
	if fd.IsList() && t != "bool" {
		return t + "s"
	}
	return t
}

func typeName(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		return "enum"
	case protoreflect.MessageKind:
		switch fd.Message().FullName() {
		case "google.protobuf.Timestamp":
			return "time"
		case "google.protobuf.Duration":
			return "duration"
		}
	}
	return fd.Kind().String()
}

func newRequestFlags(doc commandDoc, md protoreflect.MessageDescriptor, fs, global *pflag.FlagSet) *requestFlags {
	r := &requestFlags{byField: map[string]*leafFlag{}, parents: map[string]bool{}}
	r.add(doc, md, nil, "", "", fs, global)
	return r
}

func (r *requestFlags) add(doc commandDoc, md protoreflect.MessageDescriptor, path []protoreflect.FieldDescriptor, prefix, fieldPrefix string,
	fs, global *pflag.FlagSet) {
	if len(path) >= maxDepth {
		return
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		protoName := prefix + strings.ReplaceAll(string(fd.Name()), "_", "-")
		name := protoName
		if n, ok := flagNames[string(fd.Name())]; ok {
			name = prefix + n
		}
		field := fieldPrefix + string(fd.Name())
		p := append(append([]protoreflect.FieldDescriptor(nil), path...), fd)
		if fd.IsMap() {
			continue // no request has a map; a future one is reachable through --request-json
		}
		if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
			if typeName(fd) == fd.Kind().String() {
				if !fd.IsList() {
					r.parents[field] = true
					r.add(doc, fd.Message(), p, name+".", field+".", fs, global)
				}
				continue
			}
		}
		if fs.Lookup(name) != nil || global.Lookup(name) != nil {
			name = "field." + name // never shadow a global flag
		}
		l := &leafFlag{name: name, field: field, path: p}
		names := []string{name}
		if protoName != name && fs.Lookup(protoName) == nil && global.Lookup(protoName) == nil {
			names = append(names, protoName)
		}
		for j, n := range names {
			f := fs.VarPF(l, n, "", usage(doc, field, fd))
			if fd.Kind() == protoreflect.BoolKind && !fd.IsList() {
				f.NoOptDefVal = "true"
			}
			if j > 0 {
				// The proto spelling keeps scripts written before the rename working.
				f.Hidden = true
			}
		}
		r.leaves = append(r.leaves, l)
		r.byField[field] = l
	}
}

// usage describes a field's flag in words: its written help and what values it takes.
func usage(doc commandDoc, field string, fd protoreflect.FieldDescriptor) string {
	u, ok := flagDoc(doc, field)
	if !ok {
		u = words(field)
	}
	switch {
	case fd.Kind() == protoreflect.EnumKind:
		u += " (" + strings.Join(enumChoices(fd.Enum()), ", ") + ")"
	case typeName(fd) == "time":
		u += " (a time such as 2026-03-01T06:00:00Z or 2026-03-01T14:00:00+08:00)"
	case typeName(fd) == "duration":
		u += " (a duration such as 90s or 5m)"
	}
	if fd.IsList() {
		u += "; repeat the flag or separate values with commas"
	}
	return u
}

// maxOf is the largest value a numeric field holds.
func maxOf(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return strconv.Itoa(math.MaxInt32)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.FormatUint(math.MaxUint32, 10)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(math.MaxUint64, 10)
	case protoreflect.FloatKind:
		return "3.4e38"
	case protoreflect.DoubleKind:
		return "1.8e308"
	}
	return strconv.FormatInt(math.MaxInt64, 10)
}

// expected says in words what a field's flag takes, for an error.
func expected(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return "true or false"
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return "a whole number such as 123"
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return "a whole number of 0 or more such as 123"
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return "a number such as 1.5"
	case protoreflect.EnumKind:
		return "one of " + strings.Join(enumChoices(fd.Enum()), ", ")
	}
	switch typeName(fd) {
	case "time":
		return "a time such as 2026-03-01T06:00:00Z or 2026-03-01T14:00:00+08:00 (RFC 3339, with its zone)"
	case "duration":
		return "a duration such as 90s, 5m or 1h30m"
	}
	return "a " + typeName(fd)
}

// enumPrefix is the part every value name of an enum shares, taken from its zero value
// (ERROR_CLASS_UNSPECIFIED → ERROR_CLASS_), so values can be given as "infra".
func enumPrefix(ed protoreflect.EnumDescriptor) string {
	zero := string(ed.Values().ByNumber(0).Name())
	if p, ok := strings.CutSuffix(zero, "UNSPECIFIED"); ok {
		return p
	}
	return ""
}

func enumChoices(ed protoreflect.EnumDescriptor) []string {
	prefix := enumPrefix(ed)
	var out []string
	values := ed.Values()
	for i := range values.Len() {
		if v := values.Get(i); v.Number() != 0 {
			out = append(out, enumWordOf(prefix, v))
		}
	}
	return out
}

func parseEnum(ed protoreflect.EnumDescriptor, s string) (protoreflect.EnumNumber, error) {
	up := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	values := ed.Values()
	if v := values.ByName(protoreflect.Name(up)); v != nil {
		return v.Number(), nil
	}
	if v := values.ByName(protoreflect.Name(enumPrefix(ed) + up)); v != nil {
		return v.Number(), nil
	}
	return 0, fmt.Errorf("%q is not one of %s", s, strings.Join(enumChoices(ed), ", "))
}

// parseScalar turns a flag's text into the field's value.
func parseScalar(fd protoreflect.FieldDescriptor, s string) (protoreflect.Value, error) {
	// The parser's own error names Go internals (strconv.ParseInt, a layout); the operator
	// needs what the flag takes.
	bad := func(err error) (protoreflect.Value, error) {
		if errors.Is(err, strconv.ErrRange) {
			return protoreflect.Value{}, fmt.Errorf("%q is out of range: expected a number up to %s", s, maxOf(fd))
		}
		return protoreflect.Value{}, fmt.Errorf("%q is not valid: expected %s", s, expected(fd))
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfBool(b), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfInt32(int32(n)), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfInt64(n), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfUint32(uint32(n)), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfUint64(n), nil
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return bad(err)
		}
		if fd.Kind() == protoreflect.FloatKind {
			if math.Abs(f) > math.MaxFloat32 {
				return bad(strconv.ErrRange)
			}
			return protoreflect.ValueOfFloat32(float32(f)), nil
		}
		return protoreflect.ValueOfFloat64(f), nil
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(s)), nil
	case protoreflect.EnumKind:
		n, err := parseEnum(fd.Enum(), s)
		if err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfEnum(n), nil
	case protoreflect.MessageKind:
		switch typeName(fd) {
		case "time":
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return bad(err)
			}
			return protoreflect.ValueOfMessage(timestamppb.New(t).ProtoReflect()), nil
		case "duration":
			d, err := time.ParseDuration(s)
			if err != nil {
				return bad(err)
			}
			return protoreflect.ValueOfMessage(durationpb.New(d).ProtoReflect()), nil
		}
	}
	return protoreflect.Value{}, fmt.Errorf("field %s of kind %s cannot be set from a flag", fd.FullName(), fd.Kind())
}

// apply sets every given flag on req, creating the nested messages on the way.
func (r *requestFlags) apply(req proto.Message) error {
	for _, l := range r.leaves {
		if !l.set {
			continue
		}
		m := req.ProtoReflect()
		for _, fd := range l.path[:len(l.path)-1] {
			m = m.Mutable(fd).Message()
		}
		fd := l.leaf()
		if fd.IsList() {
			list := m.NewField(fd).List()
			for _, s := range l.raw {
				v, err := parseScalar(fd, s)
				if err != nil {
					return fmt.Errorf("--%s: %v", l.name, err)
				}
				list.Append(v)
			}
			m.Set(fd, protoreflect.ValueOfList(list))
			continue
		}
		v, err := parseScalar(fd, l.raw[0])
		if err != nil {
			return fmt.Errorf("--%s: %v", l.name, err)
		}
		m.Set(fd, v)
	}
	return nil
}
