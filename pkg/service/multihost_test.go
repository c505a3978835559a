package service

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// A service takes pgx's multi-host DSN in both forms: its pool and its lock connection (the
// elector) skip a first host that does not answer and reach the server that does
// (docs/operations.md, "What the cluster must provide").
func TestMultiHostDSNReachesTheServerThatAnswers(t *testing.T) {
	db := pgtest.New(t)
	for name, dsn := range map[string]string{
		"url":      pgtest.MultiHostURL(t, db.DSN, "127.0.0.1:1"),
		"keywords": pgtest.MultiHostKeywords(t, db.DSN, "127.0.0.1:1"),
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			cfg.PG.DSN = dsn
			b, err := New(t.Context(), "pump", cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Close)
			var got string
			if err := b.Pool.QueryRow(t.Context(), `SELECT current_database()`).Scan(&got); err != nil || got != db.Name {
				t.Fatalf("pool: current_database() = %q, %v; want %q", got, err, db.Name)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			ran := make(chan string, 1)
			err = b.Elector().Run(ctx, func(ctx context.Context, s *leader.Session) error {
				var name string
				if err := s.Do(ctx, func(conn *pgx.Conn) error {
					return conn.QueryRow(ctx, `SELECT current_database()`).Scan(&name)
				}); err != nil {
					return err
				}
				ran <- name
				cancel()
				<-ctx.Done()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case name := <-ran:
				if name != db.Name {
					t.Fatalf("elector's session on %q, want %q", name, db.Name)
				}
			default:
				t.Fatal("the elector never took the role through the multi-host DSN")
			}
		})
	}
}
