package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// outcome is a message's processing record as the checks compare it.
type outcome struct {
	State, Class, Reason string
	Identity, Type, Styp string
	Attempts             int
	Marked               bool // backfill_at set
	Abandoned            bool
}

// event is one outbox row as the checks compare it.
type event struct {
	ID      int64
	FLID    string
	Target  string
	Type    string
	Version int64
	MsgID   int64
	State   string
	Payload string // without UPDATED_AT, the pump's clock
}

// key is an event without its id and delivery state: what must be the same in the clean run.
func (e event) key() string {
	return fmt.Sprintf("%s v%d msg %d %s", e.Type, e.Version, e.MsgID, e.Payload)
}

// snapshot is the final state of one stack.
type snapshot struct {
	outcomes map[int64]outcome
	// tables holds every flight-state table as sorted rows (JSON without the columns that
	// are the pump's clock).
	tables map[string][]string
	events []event // ordered by event_id
	redis  map[string]string
	holes  [][2]int64 // inbox_hole ranges
	late   []int64    // inbox_late
}

// stateTables are the tables of the flight state and the reference data: their primary key
// (to pair the rows of two runs) and the columns that legitimately differ between two runs,
// timestamps taken from the pump's clock and serial ids.
var stateTables = []struct {
	name   string
	key    []string
	ignore []string
}{
	{"flight_schd", []string{"flid"}, []string{"created_at", "updated_at", "deleted_at"}},
	{"flight_gtdt", detailKey, nil}, {"flight_ckdt", detailKey, nil}, {"flight_cldt", detailKey, nil},
	{"flight_chdt", detailKey, nil}, {"flight_psdt", detailKey, nil}, {"flight_chot", detailKey, nil},
	{"flight_dely", detailKey, nil}, {"flight_abtm", detailKey, nil},
	{"flight_route_point", []string{"flid", "route_kind", "ordinal"}, nil},
	{"flight_raw_content", []string{"flid", "tag", "ordinal"}, nil},
	{"flight_history", []string{"flid", "state_version"}, []string{"archived_at"}},
	{"ref_master", []string{"rtype", "rkey"}, []string{"refreshed_at"}},
	{"schd_snap_log", []string{"msg_id", "styp"}, []string{"id", "recv_at"}},
	{"req_track", []string{"req_type", "req_styp", "covered_day", "sndr", "state"}, []string{"req_id", "created_at", "sent_at", "done_at", "expired_at", "updated_at"}},
}

var detailKey = []string{"flid", "ordinal"}

func takeSnapshot(ctx context.Context, pool *pgxpool.Pool, rdb *redis.Client, prefix string) (*snapshot, error) {
	s := &snapshot{outcomes: map[int64]outcome{}, tables: map[string][]string{}}
	rows, err := pool.Query(ctx, `SELECT msg_id, state, coalesce(error_class, ''), coalesce(last_error, ''),
		coalesce(identity_key, ''), coalesce(msg_type, ''), coalesce(msg_styp, ''), attempts,
		backfill_at IS NOT NULL, backfill_abandoned_at IS NOT NULL FROM proc_state`)
	if err != nil {
		return nil, fmt.Errorf("read proc_state: %w", err)
	}
	for rows.Next() {
		var id int64
		var o outcome
		if err := rows.Scan(&id, &o.State, &o.Class, &o.Reason, &o.Identity, &o.Type, &o.Styp, &o.Attempts, &o.Marked, &o.Abandoned); err != nil {
			rows.Close()
			return nil, err
		}
		s.outcomes[id] = o
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read proc_state: %w", err)
	}
	for _, t := range stateTables {
		ignore := append([]string{}, t.ignore...) // never a NULL array: jsonb - NULL is NULL
		rows, err := pool.Query(ctx, `SELECT (to_jsonb(t) - $1::text[])::text FROM `+t.name+` t`, ignore)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", t.name, err)
		}
		var out []string
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", t.name, err)
		}
		slices.Sort(out)
		s.tables[t.name] = out
	}
	rows, err = pool.Query(ctx, `SELECT event_id, partition_key, target, event_type, state_version, coalesce(msg_id, 0), state,
		coalesce((payload - 'UPDATED_AT')::text, '') FROM msg_event ORDER BY event_id`)
	if err != nil {
		return nil, fmt.Errorf("read msg_event: %w", err)
	}
	for rows.Next() {
		var e event
		if err := rows.Scan(&e.ID, &e.FLID, &e.Target, &e.Type, &e.Version, &e.MsgID, &e.State, &e.Payload); err != nil {
			rows.Close()
			return nil, err
		}
		s.events = append(s.events, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read msg_event: %w", err)
	}
	rows, err = pool.Query(ctx, `SELECT first_id, last_id FROM inbox_hole ORDER BY first_id`)
	if err != nil {
		return nil, fmt.Errorf("read inbox_hole: %w", err)
	}
	for rows.Next() {
		var h [2]int64
		if err := rows.Scan(&h[0], &h[1]); err != nil {
			rows.Close()
			return nil, err
		}
		s.holes = append(s.holes, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read inbox_hole: %w", err)
	}
	rows, err = pool.Query(ctx, `SELECT msg_id FROM inbox_late ORDER BY msg_id`)
	if err != nil {
		return nil, fmt.Errorf("read inbox_late: %w", err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		s.late = append(s.late, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read inbox_late: %w", err)
	}
	if s.redis, err = redisState(ctx, rdb, prefix); err != nil {
		return nil, err
	}
	return s, nil
}

// redisState reads the projection under prefix: every flight document without UPDATED_AT
// (the pump's clock), and the version hash.
func redisState(ctx context.Context, rdb *redis.Client, prefix string) (map[string]string, error) {
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, prefix+"flight:*", 500).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		doc, err := rdb.Get(ctx, key).Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("redis get %s: %w", key, err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("redis %s is not JSON: %w", key, err)
		}
		delete(m, "UPDATED_AT")
		b, _ := json.Marshal(m) // decoded JSON always encodes; map keys come out sorted
		out[strings.TrimPrefix(key, prefix)] = string(b)
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("redis scan: %w", err)
	}
	versions, err := rdb.HGetAll(ctx, prefix+"flight-version").Result()
	if err != nil {
		return nil, fmt.Errorf("redis flight-version: %w", err)
	}
	for flid, v := range versions {
		out["flight-version/"+flid] = v
	}
	return out, nil
}

// inboxState is the shared inbox as the checks see it.
type inboxState struct {
	ids      []int64 // in ID order
	unmarked []int64
}

func readInbox(ctx context.Context, db *sql.DB) (inboxState, error) {
	var s inboxState
	rows, err := db.QueryContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_DATE_PROCESSED IS NULL FROM cminmsgs ORDER BY CMINMSGS_ID`)
	if err != nil {
		return s, fmt.Errorf("read inbox: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var unmarked bool
		if err := rows.Scan(&id, &unmarked); err != nil {
			return s, err
		}
		s.ids = append(s.ids, id)
		if unmarked {
			s.unmarked = append(s.unmarked, id)
		}
	}
	return s, rows.Err()
}

// progress is the drain's view of the pipeline.
type progress struct {
	inbox, marked                             int
	enqueued, terminal, backfilled, abandoned int
	pending, sent, dead                       int
}

func (p progress) String() string {
	return fmt.Sprintf("inbox %d · enqueued %d · terminal %d · marked %d/%d · events sent %d pending %d dead %d",
		p.inbox, p.enqueued, p.terminal, p.backfilled, p.marked, p.sent, p.pending, p.dead)
}

func readProgress(ctx context.Context, pool *pgxpool.Pool, inbox *sql.DB) (progress, error) {
	var p progress
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := inbox.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(CMINMSGS_DATE_PROCESSED) FROM cminmsgs`).Scan(&p.inbox, &p.marked); err != nil {
		return p, fmt.Errorf("inbox: %w", err)
	}
	err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM proc_state),
		(SELECT count(*) FROM proc_state WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')),
		(SELECT count(*) FROM proc_state WHERE backfill_at IS NOT NULL),
		(SELECT count(*) FROM proc_state WHERE backfill_abandoned_at IS NOT NULL),
		(SELECT count(*) FROM msg_event WHERE state = 'PENDING'),
		(SELECT count(*) FROM msg_event WHERE state = 'SENT'),
		(SELECT count(*) FROM msg_event WHERE state = 'DEAD')`).Scan(
		&p.enqueued, &p.terminal, &p.backfilled, &p.abandoned, &p.pending, &p.sent, &p.dead)
	if err != nil {
		return p, fmt.Errorf("postgres: %w", err)
	}
	return p, nil
}

// sentEvents lists the events the consumer must have received: every SENT KAFKA:msg event
// and the current KAFKA:schd row of each FLID when it is SENT.
func sentEvents(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT event_id FROM msg_event WHERE state = 'SENT'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
