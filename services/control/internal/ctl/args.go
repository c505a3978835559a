package ctl

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// positional maps a command's arguments to the request fields its doc names (Args): msgxctl
// get-message 123 is msgxctl get-message --msg-id 123.
type positional struct {
	leaves []*leafFlag
}

func positionals(doc commandDoc, flags *requestFlags) positional {
	var p positional
	for _, f := range doc.Args {
		if l := flags.byField[f]; l != nil {
			p.leaves = append(p.leaves, l)
		}
	}
	return p
}

// variadic reports whether the last argument takes every remaining one (a repeated field).
func (p positional) variadic() bool {
	return len(p.leaves) > 0 && p.leaves[len(p.leaves)-1].leaf().IsList()
}

func argName(l *leafFlag) string { return strings.ToUpper(strings.ReplaceAll(l.name, "-", "_")) }

func (p positional) usage() string {
	var b strings.Builder
	for _, l := range p.leaves {
		b.WriteString(" [" + argName(l))
		if l.leaf().IsList() {
			b.WriteString("...")
		}
		b.WriteString("]")
	}
	return b.String()
}

func (p positional) check(cmd *cobra.Command, args []string) error {
	if p.variadic() || len(args) <= len(p.leaves) {
		return nil
	}
	if len(p.leaves) == 0 {
		return usageErr("%s takes no arguments, got %q: give values with flags (msgxctl %s --help)", cmd.Name(), args, cmd.Name())
	}
	return usageErr("%s takes at most %d argument(s) (%s), got %d: %q", cmd.Name(), len(p.leaves), strings.TrimSpace(p.usage()), len(args), args)
}

// set gives each argument to its field's flag; a field given both ways is refused.
func (p positional) set(args []string) error {
	given := map[*leafFlag]bool{}
	for _, l := range p.leaves {
		given[l] = l.set
	}
	for i, a := range args {
		l := p.leaves[min(i, len(p.leaves)-1)]
		if given[l] {
			return usageErr("give the %s as an argument or as --%s, not both", argName(l), l.name)
		}
		if err := l.Set(a); err != nil {
			return usageErr("argument %s: %v", argName(l), err)
		}
	}
	return nil
}

// complete offers the values of the argument at the cursor.
func (p positional) complete(o *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(p.leaves) == 0 || (len(args) >= len(p.leaves) && !p.variadic()) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		l := p.leaves[min(len(args), len(p.leaves)-1)]
		return completeLeaf(cmd.Context(), o, l, toComplete)
	}
}

// registerCompletions gives every request flag with known values a completion: enums from the
// descriptor, the string fields of valueChoices, and rebuild IDs from the server.
func registerCompletions(o *options, cmd *cobra.Command, flags *requestFlags) {
	for _, l := range flags.leaves {
		l := l
		fn := func(c *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeLeaf(c.Context(), o, l, toComplete)
		}
		_ = cmd.RegisterFlagCompletionFunc(l.name, fn)
	}
}

func completeLeaf(ctx context.Context, o *options, l *leafFlag, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	fd := l.leaf()
	var choices []string
	switch {
	case fd.Kind() == protoreflect.EnumKind:
		choices = enumChoices(fd.Enum())
	case valueChoices[string(fd.Name())] != nil:
		choices = valueChoices[string(fd.Name())]
	case fd.Name() == "rebuild_id":
		return rebuildIDs(ctx, o), cobra.ShellCompDirectiveNoFileComp
	default:
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if fd.IsList() {
		// A comma-separated list completes its last element.
		done, _ := cutLast(toComplete)
		var out []string
		for _, c := range choices {
			out = append(out, done+c)
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	return choices, cobra.ShellCompDirectiveNoFileComp
}

func cutLast(s string) (done, last string) {
	i := strings.LastIndexByte(s, ',')
	return s[:i+1], s[i+1:]
}

func fixedChoices(values []string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// rebuildIDs are the latest rebuilds, described, for completing a rebuild ID: one short call
// (a completion must not hang the shell), nothing when it fails.
func rebuildIDs(ctx context.Context, o *options) []cobra.Completion {
	c, err := o.dial()
	if err != nil {
		return nil
	}
	defer func() { _ = c.conn.Close() }()
	c.timeout = 2 * time.Second
	resp := &controlv1.ListProjectionRebuildsResponse{}
	md := Service().Methods().ByName("ListProjectionRebuilds")
	if err := c.call(ctx, md, &controlv1.ListProjectionRebuildsRequest{PageSize: 20}, resp); err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, r := range resp.GetRebuilds() {
		out = append(out, cobra.CompletionWithDesc(strconv.FormatInt(r.GetRebuildId(), 10),
			rebuildState(r)+scopeText(r)))
	}
	return out
}

// flagName is the flag of a request field (its proto path).
func (r *requestFlags) flagName(field string) string {
	if l := r.byField[field]; l != nil {
		return l.name
	}
	return strings.ReplaceAll(field, "_", "-")
}

var wordRe = regexp.MustCompile(`[A-Za-z][A-Za-z0-9_.]*[A-Za-z0-9]`)

// inFlagWords rewrites a message about the request (the validation's, or the server's) into
// the operator's terms: each field the request has becomes its flag, each enum value name
// the value the flag takes (error_class → --error-class, SEED_MODE_MAX → max).
func (r *requestFlags) inFlagWords(msg string) string {
	return wordRe.ReplaceAllStringFunc(msg, func(w string) string {
		if l := r.byField[w]; l != nil {
			return "--" + l.name
		}
		if r.parents[w] {
			var names []string
			for _, l := range r.leaves {
				if strings.HasPrefix(l.field, w+".") {
					names = append(names, "--"+l.name)
				}
			}
			return strings.Join(names, "/")
		}
		if v, ok := r.enumWord(w); ok {
			return v
		}
		return w
	})
}

// enumWord is the flag value of an enum value name (SEED_MODE_MAX or SKIP_MARKED) of the
// request's enums.
func (r *requestFlags) enumWord(w string) (string, bool) {
	if strings.ToUpper(w) != w || (!strings.Contains(w, "_") && len(w) < 4) {
		return "", false
	}
	for _, l := range r.leaves {
		fd := l.leaf()
		if fd.Kind() != protoreflect.EnumKind {
			continue
		}
		ed := fd.Enum()
		prefix := enumPrefix(ed)
		name := strings.TrimPrefix(w, prefix)
		if v := ed.Values().ByName(protoreflect.Name(prefix + name)); v != nil && v.Number() != 0 {
			return enumWordOf(prefix, v), true
		}
	}
	return "", false
}

func enumWordOf(prefix string, v protoreflect.EnumValueDescriptor) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(string(v.Name()), prefix), "_", "-"))
}

// joinIDs prints IDs for a sentence.
func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}
