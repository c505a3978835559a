package flight_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
)

// The document built from a state in memory (the pump's clock, nanoseconds) and the one built
// from the same state read back from PostgreSQL (microseconds) are the same bytes, so comparing
// the projection with PostgreSQL sees no drift where there is none.
func TestDocumentSurvivesTheDatabaseRoundTrip(t *testing.T) {
	t.Parallel()
	f := flight.New("F1")
	f.Version = 2
	f.UpdatedAt = time.Date(2026, 12, 2, 0, 0, 10, 596267694, time.UTC)
	stored := f
	stored.UpdatedAt = f.UpdatedAt.Truncate(time.Microsecond)
	if a, b := flight.Document(f), flight.Document(stored); !bytes.Equal(a, b) {
		t.Errorf("in memory %s\nstored    %s", a, b)
	}
	if !bytes.Contains(flight.Document(f), []byte(`"UPDATED_AT":"2026-12-02T00:00:10.596267Z"`)) {
		t.Errorf("document %s does not carry the time to the microsecond", flight.Document(f))
	}
}
