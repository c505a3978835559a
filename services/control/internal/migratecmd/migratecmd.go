// Package migratecmd is "msgx-control migrate": it applies the PostgreSQL schema (or reports
// its version) and exits, so a deployment runs it as a job or init container before the
// services start.
package migratecmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/migrate"
	"github.com/msgexchange/msgexchange/pkg/service"
)

// Usage describes the subcommand.
const Usage = `usage: msgx-control migrate [status]
  migrate          apply every pending migration to MSGX_PG_DSN
  migrate status   print the applied and the latest schema version
`

// Run runs the subcommand with args (after "migrate") and returns the exit code: 0 on success,
// 1 when the database refuses, 2 on a usage or configuration error.
func Run(ctx context.Context, args []string, cfg func() (config.Config, error), logger *slog.Logger, stdout, stderr io.Writer) int {
	if len(args) == 1 && service.IsHelp(args[0]) {
		fmt.Fprint(stdout, Usage)
		return 0
	}
	if len(args) > 1 || (len(args) == 1 && args[0] != "status") {
		fmt.Fprint(stderr, Usage)
		return 2
	}
	c, err := cfg()
	if err != nil {
		logger.ErrorContext(ctx, "configuration refused", "err", err)
		return 2
	}
	if c.PG.DSN == "" {
		logger.Error("configuration refused", "err", "no PostgreSQL connection: set MSGX_PG_DSN (or MSGX_PG_DSN_FILE)")
		return 2
	}
	if len(args) == 1 {
		current, latest, err := migrate.Status(ctx, c.PG.DSN)
		if err != nil {
			logger.ErrorContext(ctx, "migration status failed", "err", err)
			return 1
		}
		state := "up to date"
		if current < latest {
			state = fmt.Sprintf("%d pending", latest-current)
		}
		fmt.Fprintf(stdout, "schema version %d, latest %d: %s\n", current, latest, state)
		return 0
	}
	v, err := migrate.Up(ctx, c.PG.DSN, logger)
	if err != nil {
		logger.ErrorContext(ctx, "migration failed", "err", err)
		return 1
	}
	logger.InfoContext(ctx, "schema up to date", "version", v)
	return 0
}
