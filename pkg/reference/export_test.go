package reference

import (
	"maps"
	"slices"
)

// Categories are the categories R-REF-5 has a rule for, sorted: the 13 reference categories of
// R-REF-1.
func Categories() []string { return slices.Sorted(maps.Keys(rules)) }
