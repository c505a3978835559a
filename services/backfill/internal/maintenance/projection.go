package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/projection"
)

// RedisForgetter removes a flight's projection: its document and its entry in the version hash.
//
// Dropping the version entry is safe only because the history sweep calls it under the
// pipeline lock, which the pump holds across its projection write: no write of this FLID can be
// in flight. It is also necessary: a FLID that comes back later (a new schedule) starts again
// at version 1, and a kept higher version would make the projection refuse it forever.
type RedisForgetter struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
}

// NewRedisForgetter returns a forgetter for keys under prefix; each call is bounded by timeout.
func NewRedisForgetter(client redis.UniversalClient, prefix string, timeout time.Duration) *RedisForgetter {
	return &RedisForgetter{client: client, prefix: prefix, timeout: timeout}
}

// Forget deletes the document and the version entry of flid in one transaction.
func (r *RedisForgetter) Forget(ctx context.Context, flid string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, projection.FlightKey(r.prefix, flid))
		p.HDel(ctx, projection.VersionKey(r.prefix), flid)
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget projection of %s: %w", flid, err)
	}
	return nil
}
