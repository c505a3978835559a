// Package migrate applies the PostgreSQL schema with goose. goose was chosen over
// golang-migrate because it runs plain SQL files from an embed.FS through database/sql with
// pgx's stdlib driver, records versions in its own table, and needs no CLI binary.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/msgexchange/msgexchange/migrations"
)

// Up applies every pending migration to the database at dsn and returns the resulting version.
func Up(ctx context.Context, dsn string, logger *slog.Logger) (int64, error) {
	db, err := open(dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return 0, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate up: %w", err)
	}
	for _, r := range results {
		logger.InfoContext(ctx, "migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate version: %w", err)
	}
	return v, nil
}

// Status reports the applied version and the newest version this binary knows.
func Status(ctx context.Context, dsn string) (current, latest int64, err error) {
	db, err := open(dsn)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return 0, 0, err
	}
	if current, err = p.GetDBVersion(ctx); err != nil {
		return 0, 0, fmt.Errorf("migrate version: %w", err)
	}
	sources := p.ListSources()
	if len(sources) > 0 {
		latest = sources[len(sources)-1].Version
	}
	return current, latest, nil
}

func open(dsn string) (*sql.DB, error) {
	cfg, err := pgxConfig(dsn)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg), nil
}

func provider(db *sql.DB) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations.PG, "sql")
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return p, nil
}
