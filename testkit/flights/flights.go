// Package flights writes a test's flights through the statements production sends, so a test
// starts from a state production could have left: tests go through the paths production takes
// (docs/architecture.md, "Code layout").
package flights

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
)

// Write stores fs in one transaction, each whole and in turn, as a schedule snapshot writes a
// flight (flightstore.SaveMany): its flight_schd row and every detail table. A FLID given twice
// is stored as its last state.
func Write(t testing.TB, b db.Beginner, fs ...flight.Flight) {
	t.Helper()
	ctx := t.Context()
	if err := db.WithTx(ctx, b, func(tx pgx.Tx) error {
		for _, f := range fs {
			if err := flightstore.SaveMany(ctx, tx, nil, []flight.Flight{f}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("flights: write: %v", err)
	}
}
