package contracttest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Breaking lists the changes from the contract prev to cur that break a consumer of either
// version: a topic (an AsyncAPI channel) removed, renamed, its cleanup policy changed or a
// message of it removed; in the schemas, a field, tag, header or schema file removed; a required set
// changed (a field made required rejects the records of before, one made optional lets records
// through that the consumers of before reject); a type, enum, const, format, pattern, bound or
// reference changed; a subschema or assertion added or removed. Within a major version only
// what the previous schema already accepted may be added: a new property where the object's
// additionalProperties was not false, and text (titles, descriptions). So everything the
// previous version accepted, the new one accepts, and everything the new one describes, the
// consumers of the previous one read.
func Breaking(prev, cur *Contract) []string {
	var out []string
	// A channel (a topic) removed, renamed, its cleanup policy or a message of it gone breaks
	// its consumers; a channel or message added breaks nothing.
	for _, name := range slices.Sorted(maps.Keys(prev.Channels)) {
		was, now := prev.Channels[name], cur.Channels[name]
		switch {
		case now.Address == "":
			out = append(out, fmt.Sprintf("channel %s: removed", name))
		case now.Address != was.Address:
			out = append(out, fmt.Sprintf("channel %s: address %s became %s", name, was.Address, now.Address))
		case !slices.Equal(now.CleanupPolicy, was.CleanupPolicy):
			out = append(out, fmt.Sprintf("channel %s: cleanup.policy %v became %v", name, was.CleanupPolicy, now.CleanupPolicy))
		}
		for _, m := range was.Messages {
			if now.Address != "" && !slices.Contains(now.Messages, m) {
				out = append(out, fmt.Sprintf("channel %s: message %s removed", name, m))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(prev.Raw)) {
		now, ok := cur.Raw[name]
		if !ok {
			out = append(out, name+": removed")
			continue
		}
		compare(name+"#", prev.Raw[name], now, &out)
	}
	return out
}

// Major is the major number of a contract version ("1.0.0" → 1).
func Major(version string) (int, error) {
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0, fmt.Errorf("contract version %q: %w", version, err)
	}
	return n, nil
}

// Keywords that only document: a change of them breaks nothing.
var annotations = map[string]bool{"$schema": true, "$comment": true, "title": true, "description": true, "examples": true}

// Keywords whose value holds named subschemas: a name removed breaks, one added is judged by
// the object (below).
var named = map[string]bool{"properties": true, "$defs": true, "patternProperties": true}

// Keywords whose value is a subschema, or a list of them, compared in place.
var subschema = map[string]bool{"items": true, "additionalProperties": true, "propertyNames": true, "if": true,
	"then": true, "else": true, "not": true, "contains": true, "unevaluatedProperties": true}
var subschemas = map[string]bool{"oneOf": true, "anyOf": true, "allOf": true, "prefixItems": true}

// compare appends to out what breaks from old to cur at path.
func compare(path string, old, cur any, out *[]string) {
	o, okO := old.(map[string]any)
	c, okC := cur.(map[string]any)
	if !okO || !okC {
		if !reflect.DeepEqual(old, cur) {
			*out = append(*out, fmt.Sprintf("%s: %s became %s", path, show(old), show(cur)))
		}
		return
	}
	for _, k := range slices.Sorted(maps.Keys(o)) {
		at := path + "/" + k
		if annotations[k] {
			continue
		}
		v, present := c[k]
		switch {
		case !present:
			*out = append(*out, fmt.Sprintf("%s: removed (was %s)", at, show(o[k])))
		case named[k]:
			oo, _ := o[k].(map[string]any)
			cc, _ := v.(map[string]any)
			for _, name := range slices.Sorted(maps.Keys(oo)) {
				if _, ok := cc[name]; !ok {
					*out = append(*out, fmt.Sprintf("%s/%s: removed", at, name))
					continue
				}
				compare(at+"/"+name, oo[name], cc[name], out)
			}
			if k == "properties" && o["additionalProperties"] == false {
				for _, name := range slices.Sorted(maps.Keys(cc)) {
					if _, ok := oo[name]; !ok {
						*out = append(*out, fmt.Sprintf("%s/%s: added where additionalProperties was false", at, name))
					}
				}
			}
		case k == "required" || k == "enum" || k == "type":
			if !sameSet(o[k], v) {
				*out = append(*out, fmt.Sprintf("%s: %s became %s", at, show(o[k]), show(v)))
			}
		case subschema[k]:
			compare(at, o[k], v, out)
		case subschemas[k]:
			oa, _ := o[k].([]any)
			ca, _ := v.([]any)
			if len(oa) != len(ca) {
				*out = append(*out, fmt.Sprintf("%s: %d schemas became %d", at, len(oa), len(ca)))
				continue
			}
			for i := range oa {
				compare(fmt.Sprintf("%s/%d", at, i), oa[i], ca[i], out)
			}
		default: // an assertion: const, format, pattern, bounds, $ref, uniqueItems, ...
			if !reflect.DeepEqual(o[k], v) {
				*out = append(*out, fmt.Sprintf("%s: %s became %s", at, show(o[k]), show(v)))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if _, was := o[k]; !was && !annotations[k] && !named[k] {
			*out = append(*out, fmt.Sprintf("%s/%s: added %s", path, k, show(c[k])))
		}
	}
}

// sameSet compares two keyword values that are a value or a list taken as a set.
func sameSet(a, b any) bool {
	set := func(v any) []string {
		l, ok := v.([]any)
		if !ok {
			l = []any{v}
		}
		s := make([]string, len(l))
		for i, x := range l {
			s[i] = show(x)
		}
		slices.Sort(s)
		return slices.Compact(s)
	}
	return slices.Equal(set(a), set(b))
}

func show(v any) string { return fmt.Sprintf("%v", v) }
