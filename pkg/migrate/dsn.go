package migrate

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/pgfence"
	"github.com/msgexchange/msgexchange/pkg/secret"
)

func pgxConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("migrate: parse dsn: %w", secret.ParseError(dsn, err, func(s string) error {
			_, err := pgx.ParseConfig(s)
			return err
		}))
	}
	// The schema goes to the current primary, never to an old one that came back (D-21).
	pgfence.Apply(&cfg.Config)
	return cfg, nil
}
