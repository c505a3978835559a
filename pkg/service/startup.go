package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/secret"
)

// A dependency is contacted once at start-up. A refusal that only the settings can cure (the
// credentials refused, the database unknown) stops the service naming the variable: retrying it
// for ever as "standby cannot reach the database" would hide a typo behind an outage. Any other
// failure (a refused connection, a timeout, a server starting up) is an outage: logged, and the
// service starts and retries as before, so a database that is down when a pod starts does not
// crash-loop it (R-START-1, R-START-2). The readiness checks name the dependency meanwhile.

// ErrSettingsRefused marks a start-up error that only a change of the settings can cure: a
// dependency answered and refused them (R-START-2). Main exits with ExitSettingsRefused for it,
// so that a supervisor, an operator or a test tells it from a crash without reading the log.
var ErrSettingsRefused = errors.New("start-up refused")

// Exit codes of a service process besides 0 and 1 (any other failure).
const (
	// ExitConfig: the configuration itself was refused before anything was contacted.
	ExitConfig = 2
	// ExitSettingsRefused: a dependency refused the settings at start-up (ErrSettingsRefused).
	ExitSettingsRefused = 3
)

// firstContact pings a dependency within timeout and turns a settings refusal into the start-up
// error; every other failure is logged and left to the usual retries.
func firstContact(ctx context.Context, logger *slog.Logger, what, env, dsn string, timeout time.Duration,
	ping func(context.Context) error, settings func(error) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := ping(ctx)
	switch {
	case err == nil:
		return nil
	case settings(err):
		return fmt.Errorf("%w: %s refused the settings of %s (fix the credentials or the database name; retrying cannot help): %w",
			ErrSettingsRefused, what, env, secret.DSNError(dsn, err))
	}
	logger.Warn(what+" not reachable at start-up; starting anyway and retrying", "variable", env, "err", secret.DSNError(dsn, err))
	return nil
}

// pgSettingsError: SQLSTATE class 28 (invalid authorization: a wrong password, no such role,
// no pg_hba entry) or 3D000 (no such database).
func pgSettingsError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "28") || pe.Code == "3D000")
}

// mysqlSettingsError: 1044 (no access to the database), 1045 (access denied: the password),
// 1049 (no such database), 1698 (access denied without a password).
func mysqlSettingsError(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1044, 1045, 1049, 1698:
		return true
	}
	return false
}

// redisSettingsError: WRONGPASS, NOAUTH, a password the server does not expect ("ERR AUTH …
// called without any password configured") or a database number it does not have.
func redisSettingsError(err error) bool {
	// No sentinel knows redis.sentinel-master (a nil reply), or redis.sentinel-addrs names
	// servers that are no sentinels: the settings, which retrying cannot mend.
	if strings.Contains(fmt.Sprint(err), projection.NoMaster) && (errors.Is(err, redis.Nil) || strings.Contains(err.Error(), "unknown command")) {
		return true
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "ERR AUTH", "ERR invalid password", "ERR DB index is out of range"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// CheckInbox contacts the shared MySQL once: refused credentials or an unknown database are the
// start-up error, naming MSGX_MYSQL_DSN; an unreachable server is logged and retried later.
func (b *Base) CheckInbox(in *aodb.Inbox) error {
	return firstContact(context.Background(), b.Logger, "MySQL", config.EnvName("mysql.dsn"), b.Config.MySQL.DSN,
		b.Config.Inbox.Timeout, in.Ping, mysqlSettingsError)
}
