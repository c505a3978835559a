package projection

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/flight"
)

// Drift is how a flight's projection differs from PostgreSQL (docs/redis.md, "Consistency
// sentinel").
type Drift string

// The kinds of drift; "" is none.
const (
	// Missing: the document of an active flight, or the version entry of any flight, is absent.
	Missing Drift = "missing"
	// Stale: Redis holds another version than PostgreSQL (older or newer), or a document for a
	// deleted flight.
	Stale Drift = "stale"
	// Content: the same version with other bytes.
	Content Drift = "content"
	// Extra: Redis has keys of a FLID PostgreSQL does not have in its current state.
	Extra Drift = "extra"
)

// Kinds lists the kinds of drift in a stable order, for metrics.
func Kinds() []Drift { return []Drift{Missing, Stale, Content, Extra} }

// Observed is what Redis holds for one FLID.
type Observed struct {
	FLID string
	// Doc is the document (nil when the key is absent); Version the version entry (-1 when
	// absent).
	Doc     []byte
	Version int64
}

// Compare decides the drift of one flight between its authoritative state and what Redis holds.
// It is pure: the sentinel and the rebuild both use it.
func Compare(f flight.Flight, o Observed) Drift {
	deleted := f.State == flight.Deleted
	switch {
	case o.Version < 0 || (!deleted && o.Doc == nil):
		return Missing
	case o.Version != f.Version || (deleted && o.Doc != nil):
		return Stale
	case !deleted && !bytes.Equal(o.Doc, flight.Document(f)):
		return Content
	}
	return ""
}

// Observe reads the documents and version entries of flids in one round trip.
func (p *Projection) Observe(ctx context.Context, flids []string) ([]Observed, error) {
	if len(flids) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pipe := p.client.Pipeline()
	docs := make([]*redis.StringCmd, len(flids))
	for i, flid := range flids {
		docs[i] = pipe.Get(ctx, FlightKey(p.prefix, flid))
	}
	versions := pipe.HMGet(ctx, VersionKey(p.prefix), flids...)
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("observe %d projections: %w", len(flids), err)
	}
	vals, err := versions.Result()
	if err != nil {
		return nil, fmt.Errorf("observe %d projection versions: %w", len(flids), err)
	}
	out := make([]Observed, len(flids))
	for i, flid := range flids {
		out[i] = Observed{FLID: flid, Version: -1}
		if b, err := docs[i].Bytes(); err == nil {
			out[i].Doc = b
		} else if err != redis.Nil {
			return nil, fmt.Errorf("observe projection of %s: %w", flid, err)
		}
		if s, ok := vals[i].(string); ok {
			if v, err := strconv.ParseInt(s, 10, 64); err == nil {
				out[i].Version = v
			}
		}
	}
	return out, nil
}

// Repair rewrites the projection of flights from their authoritative states, whatever Redis
// holds (a version entry higher than PostgreSQL's included), and removes the keys of the FLIDs
// in gone. It is no compare-and-set, so the caller must hold the pipeline lock, which the pump
// holds across its own writes: no newer state can be written meanwhile.
func (p *Projection) Repair(ctx context.Context, flights []flight.Flight, gone []string) error {
	if len(flights) == 0 && len(gone) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	_, err := p.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, f := range flights {
			pipe.HSet(ctx, VersionKey(p.prefix), f.FLID, f.Version)
			if f.State == flight.Deleted {
				pipe.Del(ctx, FlightKey(p.prefix, f.FLID))
			} else {
				pipe.Set(ctx, FlightKey(p.prefix, f.FLID), flight.Document(f), 0)
			}
		}
		for _, flid := range gone {
			pipe.Del(ctx, FlightKey(p.prefix, flid))
			pipe.HDel(ctx, VersionKey(p.prefix), flid)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("repair %d projections, remove %d: %w", len(flights), len(gone), err)
	}
	return nil
}

// ScanDocs returns one SCAN page of the FLIDs that have a document; next is 0 at the end.
func (p *Projection) ScanDocs(ctx context.Context, cursor uint64, count int64) (flids []string, next uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	keys, next, err := p.client.Scan(ctx, cursor, FlightKey(p.prefix, "*"), count).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("scan projection documents: %w", err)
	}
	for _, k := range keys {
		flids = append(flids, strings.TrimPrefix(k, FlightKey(p.prefix, "")))
	}
	return flids, next, nil
}

// ScanVersions returns one HSCAN page of the FLIDs that have a version entry; next is 0 at the
// end.
func (p *Projection) ScanVersions(ctx context.Context, cursor uint64, count int64) (flids []string, next uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	kv, next, err := p.client.HScan(ctx, VersionKey(p.prefix), cursor, "*", count).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("scan projection versions: %w", err)
	}
	for i := 0; i < len(kv); i += 2 {
		flids = append(flids, kv[i])
	}
	return flids, next, nil
}
