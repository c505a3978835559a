package migrate

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

func pgxConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("migrate: parse dsn: %w", err)
	}
	return cfg, nil
}
