package reference

import (
	"fmt"

	"github.com/msgexchange/msgexchange/pkg/sis"
)

// Op is what a reference message does to its category.
type Op int

// The operations of R-REF-2 and R-REF-3.
const (
	// Replace publishes the whole category (DNLD, RESP): records absent from it are removed.
	Replace Op = iota + 1
	// Upsert writes each record with all its fields (ADD, UPD).
	Upsert
	// Delete removes each record's key (DEL).
	Delete
)

// OpOf returns the operation of a reference STYP, or 0 for another STYP.
func OpOf(styp string) Op {
	switch styp {
	case "DNLD", "RESP":
		return Replace
	case "ADD", "UPD":
		return Upsert
	case "DEL":
		return Delete
	}
	return 0
}

// CheckBatch is the whole-package check of a DNLD or RESP (R-REF-2, like SCHD's R-SCHD-2): the
// declared RECS equals the number of records, every record has its key and no key occurs
// twice. It returns why the package is refused, or "" when it may be published. A package
// without RECS is refused: a full replacement removes whatever it omits, so its completeness
// must be declared, not assumed.
func CheckBatch(d *sis.RefData) string {
	switch {
	case d.RECS == sis.RECSAbsent:
		return fmt.Sprintf("%s-%s without RECS: a full replacement must declare its record count", d.Category, d.STYP)
	case d.RECS != len(d.Records):
		return fmt.Sprintf("%s-%s declares RECS %d but carries %d records", d.Category, d.STYP, d.RECS, len(d.Records))
	}
	return checkKeys(d)
}

// CheckIncrement checks an ADD, UPD or DEL: every record has its key. RECS is not compared:
// each record is its own full-record increment and the samples carry counts that do not match
// (FLTL-ADD declares 2 and carries 1). The same key twice is applied in order.
func CheckIncrement(d *sis.RefData) string {
	if len(d.Records) == 0 {
		return fmt.Sprintf("%s-%s carries no record", d.Category, d.STYP)
	}
	for i, r := range d.Records {
		if r.Key == "" {
			return fmt.Sprintf("%s-%s record %d has no %s", d.Category, d.STYP, i+1, sis.RefKeyTag(d.Category))
		}
	}
	return ""
}

func checkKeys(d *sis.RefData) string {
	tag := sis.RefKeyTag(d.Category)
	at := make(map[string]int, len(d.Records))
	for i, r := range d.Records {
		if r.Key == "" {
			return fmt.Sprintf("%s-%s record %d has no %s", d.Category, d.STYP, i+1, tag)
		}
		if j, dup := at[r.Key]; dup {
			return fmt.Sprintf("%s-%s carries %s %q twice (records %d and %d)", d.Category, d.STYP, tag, r.Key, j+1, i+1)
		}
		at[r.Key] = i
	}
	return ""
}
