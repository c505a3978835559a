package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/logging"
	"github.com/msgexchange/msgexchange/pkg/pgfence"
	"github.com/msgexchange/msgexchange/pkg/secret"
	"github.com/msgexchange/msgexchange/pkg/service"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/floor"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/kafka"
)

// readBound bounds the read of both topics: they are read from the start (KAFKA:schd is
// compacted, KAFKA:msg kept for its retention), which at an airport's volume takes seconds.
const readBound = 10 * time.Minute

// Exit codes of version-floor besides service.ExitOK and service.ExitUsage.
const (
	exitFailed  = 1 // Kafka or PostgreSQL could not be read or written: no floor was recorded; run it again
	exitRunning = 3 // a service still holds its role: stop them all first
)

func subcommand(name string, args []string) int {
	if name != "version-floor" {
		return command.Refuse(name, os.Stderr)
	}
	if len(args) == 1 && service.IsHelp(args[0]) {
		fmt.Fprint(os.Stdout, command.Usage())
		return 0
	}
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "msgx-dispatcher version-floor takes no arguments\n%s", command.Usage())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return versionFloor(ctx, clock.Real{}, os.Stdout)
}

// versionFloor records the version floor (R-RESTORE-1). It refuses while any role is held:
// the pump would process the restored queue on the rewound versions meanwhile, and what it
// published would already be below what consumers hold.
func versionFloor(ctx context.Context, clk clock.Clock, out io.Writer) int {
	cfg, err := config.FromEnv(config.ServiceDispatcher)
	logger := logging.New(out, "msgx-dispatcher", cfg.Log.Level, cfg.SecretValues()...)
	if err != nil {
		logger.Error("configuration refused", "err", err)
		return 2
	}
	pcfg, err := pgxpool.ParseConfig(cfg.PG.DSN)
	if err != nil {
		logger.Error("version floor: postgres pool", "err", secret.ParseError(cfg.PG.DSN, err, func(s string) error {
			_, err := pgxpool.ParseConfig(s)
			return err
		}))
		return exitFailed
	}
	// The floor is recorded on the current primary, never on an old one that came back (D-21).
	pgfence.Apply(&pcfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		logger.Error("version floor: postgres pool", "err", err)
		return exitFailed
	}
	defer pool.Close()
	holders, err := leader.Holders(ctx, pool)
	if err != nil {
		logger.Error("version floor: read the role holders", "err", err)
		return exitFailed
	}
	for _, h := range holders {
		if h.Active {
			logger.Error("version floor refused: a service still runs; stop every service, then run it again",
				"role", h.Role, "instance", h.Instance)
			return exitRunning
		}
	}
	sec, err := kafka.NewSecurity(cfg.Kafka)
	if err != nil {
		logger.Error("version floor: the Kafka connection's settings; nothing was changed", "err", err)
		return exitFailed
	}
	// The KAFKA:msg events already published are marked SENT a batch at a time while the
	// topics are read, so memory does not grow with the topic's retention; the floors follow in
	// one transaction. Every step is idempotent: a run that failed half way is run again.
	now := clk.Now()
	var caught floor.Applied
	seen, err := floor.Read(ctx, cfg.Kafka.Brokers, sec.KgoOpts(), cfg.Kafka.TopicMsg, cfg.Kafka.TopicSchd, readBound, floor.DefaultBatch,
		floor.CatchUpMsg(pool, now, &caught))
	if err != nil {
		logger.Error("version floor: read Kafka; no floor was recorded: run it again once the cause is fixed",
			"err", err, "msg_events_already_published", caught.Msg)
		if errors.Is(err, floor.ErrForeign) {
			logger.Error("a record on the topics was not written by the dispatcher: find its producer before going on")
		}
		return exitFailed
	}
	a, err := floor.Apply(ctx, pool, seen, floor.DefaultBatch, now)
	if err != nil {
		logger.Error("version floor: write PostgreSQL; no floor was recorded: run it again once the cause is fixed",
			"err", err, "msg_events_already_published", caught.Msg)
		return exitFailed
	}
	logger.Info("version floor recorded: start the services",
		"records", seen.Records, "flids", len(seen.Floors), "floors_recorded", a.Floors, "flights_raised", a.Flights,
		"msg_events_already_published", caught.Msg, "schd_rows_already_published", a.Schd,
		"largest_published_event_id", seen.MaxID, "next_event_id", a.Sequence)
	return 0
}
