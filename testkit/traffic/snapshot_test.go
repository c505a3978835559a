package traffic

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// A generated day's DNLD is a package the whole-package check accepts: RECS matches, the FLIDs
// are unique, every record has the generated day as its operation day, and the rotation and
// allocation elements decode as the records' collections.
func TestDNLDIsAWholePackage(t *testing.T) {
	const n = 120
	flights := Schedule(7, testDay, n)
	if again := Schedule(7, testDay, n); !slices.EqualFunc(flights, again, func(a, b Flight) bool { return a.FLID == b.FLID && a.Extra == b.Extra }) {
		t.Fatal("the same seed gave another schedule")
	}
	text := DNLD(1, testDay, flights)
	m, err := sis.Decode(text, sis.Options{MaxBytes: 32 << 20, MaxDepth: 64, Zone: airportZone})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Body.(*sis.Schd)
	if s.STYP != "DNLD" || s.RECS != n || len(s.Records) != n {
		t.Fatalf("STYP %s RECS %d records %d, want DNLD %d %d", s.STYP, s.RECS, len(s.Records), n, n)
	}
	pkg, refusal := flight.ValidatePackage(s, flight.DayRule{Zone: airportZone})
	if refusal != nil {
		t.Fatalf("refused: %s", refusal)
	}
	scope, err := pkg.Scope(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := scope.String(); got != testDay.Format(time.DateOnly) {
		t.Errorf("scope %s, want the generated day only", got)
	}
	partners := 0
	for _, r := range s.Records {
		for _, tag := range []string{"PSDT", "ERUT"} {
			if r.Collections[tag] == nil {
				t.Fatalf("record %s has no %s", r.FLID, tag)
			}
		}
		if r.Scalars["TAID"].Value != "" {
			partners++
		}
	}
	if partners == 0 || !strings.Contains(text, "<GTDT") || !strings.Contains(text, "<CLDT") {
		t.Errorf("%d records with a rotation partner; gates and belts present: %v %v", partners,
			strings.Contains(text, "<GTDT"), strings.Contains(text, "<CLDT"))
	}
}
