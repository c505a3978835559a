// Package projection writes the Redis projection of the current flight state (R-PROJ-1):
// one JSON document per active FLID, removed when the flight is deleted. PostgreSQL stays the
// authority; the projection is written after the domain transaction and before the terminal
// one, so a failed write leaves the message unfinished and it is retried.
//
// Key layout (docs/redis.md): <prefix>flight:<FLID> holds the document of flight.Document;
// <prefix>flight-version is a hash FLID → state_version that is kept after deletion so that a
// late, older write can never bring a flight back or overwrite a newer state.
package projection

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/outage"
)

// casScript applies a write only when its version is not older than the stored one. Equal
// versions are accepted so that the re-run of a message after a crash rewrites the same state.
var casScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur and tonumber(cur) > tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[3])
end
return 1
`)

// Projection writes flight documents to Redis.
type Projection struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
}

// New returns a projection writing under prefix; each write is bounded by timeout.
func New(client redis.UniversalClient, prefix string, timeout time.Duration) *Projection {
	return &Projection{client: client, prefix: prefix, timeout: timeout}
}

// FlightKey is the key of one flight's document.
func FlightKey(prefix, flid string) string { return prefix + "flight:" + flid }

// VersionKey is the hash of the last projected version per FLID.
func VersionKey(prefix string) string { return prefix + "flight-version" }

// Write projects the given states (flight.Project, or an outcome's Projected). It reports how
// many were applied (an older version than the stored one is skipped, not an error). The whole
// call is bounded by the timeout; several states go in pipelines (a schedule snapshot projects
// thousands at once, and one round trip each would keep the pump's lock connection idle for
// seconds).
func (p *Projection) Write(ctx context.Context, flights []flight.Projected) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if len(flights) == 1 {
		f := flights[0]
		n, err := casScript.Run(ctx, p.client, p.keys(f.FLID), p.args(f)...).Int()
		if err != nil {
			return 0, fmt.Errorf("project flight %s v%d: %w", f.FLID, f.Version, err)
		}
		return n, nil
	}
	applied := 0
	for i := 0; i < len(flights); i += pipelineSize {
		part := flights[i:min(i+pipelineSize, len(flights))]
		n, err := p.pipeline(ctx, part)
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			// The server lost its script cache (a restart, SCRIPT FLUSH): load it and write the
			// part again; every write is a CAS that accepts its own version a second time.
			if err = casScript.Load(ctx, p.client).Err(); err == nil {
				n, err = p.pipeline(ctx, part)
			}
		}
		applied += n
		if err != nil {
			return applied, err
		}
	}
	return applied, nil
}

// pipelineSize bounds the writes of one pipeline.
const pipelineSize = 500

// pipeline writes part in one round trip; the error is the first failed write's.
func (p *Projection) pipeline(ctx context.Context, part []flight.Projected) (int, error) {
	cmds := make([]*redis.Cmd, len(part))
	_, err := p.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, f := range part {
			cmds[i] = casScript.EvalSha(ctx, pipe, p.keys(f.FLID), p.args(f)...)
		}
		return nil
	})
	applied := 0
	for i, c := range cmds {
		n, cerr := c.Int()
		if cerr != nil {
			return applied, fmt.Errorf("project flight %s v%d: %w", part[i].FLID, part[i].Version, cerr)
		}
		applied += n
	}
	if err != nil {
		return applied, fmt.Errorf("project %d flights: %w", len(part), err)
	}
	return applied, nil
}

func (p *Projection) keys(flid string) []string {
	return []string{FlightKey(p.prefix, flid), VersionKey(p.prefix)}
}

// args are the script's arguments; an empty document deletes the flight's key.
func (p *Projection) args(f flight.Projected) []any {
	return []any{f.FLID, f.Version, f.Document}
}

// Probe checks that Redis answers, within the projection's bound.
func (p *Projection) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if err := p.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("probe redis: %w", err)
	}
	return nil
}

// Replies with which Redis says it cannot serve this client now: loading its data, a replica
// after a failover, a busy script, a full memory, or credentials it no longer accepts (a
// disabled or changed ACL user). They are outages of Redis, the same for every write, not
// failures of one.
var downReplies = []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "NOREPLICAS", "OOM",
	"WRONGPASS", "NOAUTH", "NOPERM"}

// NoMaster starts the error of go-redis's failover client when no sentinel named the master:
// none answered, none knew the master's name (a nil reply), or the addresses are no sentinels
// ("unknown command"). go-redis has no error value for it.
const NoMaster = "redis: all sentinels specified in configuration are unreachable"

// Classify tells an outage of Redis from a failure of the write itself.
func Classify(err error) outage.Verdict {
	switch {
	case errors.Is(err, redis.ErrClosed):
		return outage.Down
	case errors.Is(err, redis.ErrPoolTimeout):
		return outage.Unsure
	case err != nil && strings.Contains(err.Error(), NoMaster):
		// Whatever the sentinels replied (their replies are redis.Errors too), the write never
		// reached a master: Redis is not there for any write, so no message is charged for it.
		return outage.Down
	}
	var re redis.Error
	if errors.As(err, &re) {
		for _, prefix := range downReplies {
			if redis.HasErrorPrefix(err, prefix) {
				return outage.Down
			}
		}
		return outage.Attempt
	}
	if v, ok := outage.Transport(err); ok {
		return v
	}
	return outage.Attempt
}
