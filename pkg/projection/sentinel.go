package projection

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SentinelKey is the key the backfill's consistency sentinel writes when it starts a rebuild of
// the whole projection (docs/redis.md, "Redis lost its data"). Nothing else writes or removes
// it, so its absence means that Redis lost its data since (a FLUSHALL, a restart without
// persistence, a failover to an empty replica) or never held the projection.
func SentinelKey(prefix string) string { return prefix + "projection-sentinel" }

// Sentinel reads the sentinel key: ok is false when Redis does not have it.
func (p *Projection) Sentinel(ctx context.Context) (value string, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	value, err = p.client.Get(ctx, SentinelKey(p.prefix)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the projection's sentinel key: %w", err)
	}
	return value, true, nil
}

// SetSentinel writes the sentinel key, without expiry.
func (p *Projection) SetSentinel(ctx context.Context, value string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if err := p.client.Set(ctx, SentinelKey(p.prefix), value, 0).Err(); err != nil {
		return fmt.Errorf("write the projection's sentinel key: %w", err)
	}
	return nil
}

// ServerID is the run_id of the Redis server the projection writes to: another ID means
// another process, a restart or, under Sentinel, a promoted replica, either of which may
// lack the last writes the former one acknowledged.
func (p *Projection) ServerID(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	info, err := p.client.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("read the Redis server's run_id: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return id, nil
		}
	}
	return "", errors.New("read the Redis server's run_id: INFO server has none")
}
