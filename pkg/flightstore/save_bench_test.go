package flightstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// BenchmarkSaveMany measures one schedule batch's write: 200 flights with about ten detail
// rows each, over flights already stored (the deletes find rows), in one transaction.
func BenchmarkSaveMany(b *testing.B) {
	d := pgtest.New(b)
	ctx := context.Background()
	flights := make([]flight.Flight, 200)
	for i := range flights {
		flights[i] = rich(strconv.Itoa(10000 + i))
	}
	write := func() {
		if err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error { return flightstore.SaveMany(ctx, tx, nil, flights) }); err != nil {
			b.Fatal(err)
		}
	}
	write()
	b.ResetTimer()
	for b.Loop() {
		write()
	}
}

// BenchmarkWriteWhole measures one message's write of a flight the pump writes whole (one it
// had not stored): AddUpdates with nothing stored, the row and every detail table.
func BenchmarkWriteWhole(b *testing.B) {
	d := pgtest.New(b)
	ctx := context.Background()
	f := rich("4711")
	write := func() {
		if err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
			batch := &pgx.Batch{}
			flightstore.AddUpdates(batch, nil, nil, []flight.Flight{f}, nil)
			return tx.SendBatch(ctx, batch).Close()
		}); err != nil {
			b.Fatal(err)
		}
	}
	write()
	b.ResetTimer()
	for b.Loop() {
		write()
	}
}
