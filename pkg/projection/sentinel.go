package projection

import (
	"context"
	"errors"
	"fmt"

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
