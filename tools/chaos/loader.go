package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// loadStatementTimeout bounds each of the loader's statements. An insert waits behind the
// inbox's LOCK TABLES like upstream's would, so the bound is above the longest inbox outage.
const loadStatementTimeout = 3 * time.Minute

// lateCommit is a message whose insert stayed uncommitted while later rows committed.
type lateCommit struct {
	id   int64
	held time.Duration
	err  error
}

// loadResult is what the loader did to the inbox.
type loadResult struct {
	ids        []int64 // the committed messages' IDs, in insert order (= ID order)
	rolledBack []int64 // IDs allocated to inserts that were rolled back
	late       []lateCommit
	arrivals   []lateArrival // the planned late arrivals, as they went
	replays    []replayed    // the planned replays, as they went
	err        error         // the first insert that failed; the rest was not loaded
	took       time.Duration
}

// loadPlan says where the holes, late commits, late arrivals and replays go: holes[i] is a
// rolled-back insert just before message i, late[i] makes message i a late commit,
// arrivals[i] a late arrival and replays[i] a replay (planOrder).
type loadPlan struct {
	msgs     []traffic.Message
	holes    map[int]bool
	late     map[int]time.Duration
	arrivals map[int]arrivalPlan
	replays  map[int]replayPlan
	span     time.Duration // the inserts are spread over this long
}

func planLoad(r *rand.Rand, msgs []traffic.Message, holes, late int, lateMax, span time.Duration) loadPlan {
	p := loadPlan{msgs: msgs, holes: map[int]bool{}, late: map[int]time.Duration{}, span: span}
	n := len(msgs)
	// Never the last tenth: a hole is a hole only once a larger ID commits, and a late commit
	// only matters while later rows commit around it.
	upto := max(1, n*9/10)
	for k := 0; k < holes && len(p.holes) < upto-1; {
		if i := 1 + r.IntN(upto-1); !p.holes[i] {
			p.holes[i] = true
			k++
		}
	}
	for k := 0; k < late && len(p.late) < upto; {
		if i := r.IntN(upto); p.late[i] == 0 {
			p.late[i] = lateMax/5 + time.Duration(r.Int64N(int64(lateMax*4/5)))
			k++
		}
	}
	return p
}

// load inserts the plan into the inbox over p.span, in order, as upstream AODB would: each
// row with status VALID and the subsystem columns from its META. A rolled-back insert
// allocates an ID and never commits it; a late commit inserts its row, hands the open
// transaction to a goroutine that commits it after its delay, and goes on with the next rows.
// With dis, a late arrival is a late commit held until ingest released its ID, and a replay's
// row is inserted while its flight row is held, then replayed (disorder); load returns when
// both are done.
func load(ctx context.Context, db *sql.DB, p loadPlan, dis *disorder) *loadResult {
	res := &loadResult{}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	defer func() {
		wg.Wait()
		res.took = time.Since(start)
	}()
	n := len(p.msgs)
	for i, m := range p.msgs {
		at := start.Add(p.span * time.Duration(i) / time.Duration(max(1, n)))
		select {
		case <-ctx.Done():
			res.err = ctx.Err()
			return res
		case <-time.After(time.Until(at)):
		}
		if p.holes[i] {
			id, err := rolledBack(ctx, db)
			if err != nil {
				res.err = fmt.Errorf("rolled-back insert before message %d: %w", i, err)
				return res
			}
			res.rolledBack = append(res.rolledBack, id)
		}
		if a, ok := p.arrivals[i]; ok && dis != nil {
			if dis.holding != nil {
				dis.holding(true) // before the insert: LOCK TABLES must not begin behind it
			}
			id, commit, err := insertOpen(ctx, db, m)
			if err != nil && dis.holding != nil {
				dis.holding(false)
			}
			if err != nil {
				res.err = fmt.Errorf("late arrival insert of message %d: %w", i, err)
				return res
			}
			res.ids = append(res.ids, id)
			dis.inserted(i, id)
			wg.Add(1)
			go func() {
				defer wg.Done()
				la := dis.holdLate(ctx, id, a, commit)
				mu.Lock()
				res.arrivals = append(res.arrivals, la)
				mu.Unlock()
			}()
			continue
		}
		if rp, ok := p.replays[i]; ok && dis != nil {
			lock, why := dis.lockFlight(ctx, rp)
			id, err := insert(ctx, db, m)
			if err != nil {
				if lock != nil {
					lock.release()
				}
				res.err = fmt.Errorf("insert message %d: %w", i, err)
				return res
			}
			res.ids = append(res.ids, id)
			dis.inserted(i, id)
			if lock == nil {
				dis.logf("replay of %d (flight %s) not made: %s", id, rp.flid, why)
				mu.Lock()
				res.replays = append(res.replays, replayed{id: id, flid: rp.flid, why: why})
				mu.Unlock()
				continue
			}
			dis.logf("flight %s row held before message %d: its processing fails until it is DEAD(EXHAUSTED)", rp.flid, id)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := dis.replay(ctx, id, rp, lock)
				mu.Lock()
				res.replays = append(res.replays, r)
				mu.Unlock()
			}()
			continue
		}
		if d := p.late[i]; d > 0 {
			id, commit, err := insertOpen(ctx, db, m)
			if err != nil {
				res.err = fmt.Errorf("late insert of message %d: %w", i, err)
				return res
			}
			res.ids = append(res.ids, id)
			if dis != nil {
				dis.inserted(i, id)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				began := time.Now()
				time.Sleep(d)
				err := commit()
				mu.Lock()
				res.late = append(res.late, lateCommit{id: id, held: time.Since(began), err: err})
				mu.Unlock()
			}()
			continue
		}
		id, err := insert(ctx, db, m)
		if err != nil {
			res.err = fmt.Errorf("insert message %d: %w", i, err)
			return res
		}
		res.ids = append(res.ids, id)
		if dis != nil {
			dis.inserted(i, id)
		}
	}
	return res
}

const insertSQL = `INSERT INTO cminmsgs
	(CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_SUBSYSTEM_NAME, CMINMSGS_SUBSYSTEM_SEQUENCE,
	 CMINMSGS_SUBSYSTEM_DATE_SENT, CMINMSGS_SUBSYSTEM_TYPE, CMINMSGS_SUBSYSTEM_SUBTYPE, CMINMSGS_STATUS)
	VALUES (?, ?, ?, ?, ?, ?, ?, 'VALID')`

func insertArgs(m traffic.Message) []any {
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	var seq, sent any
	if m.SEQN != 0 {
		seq = m.SEQN
	}
	if !m.DTTM.IsZero() {
		sent = m.DTTM.UTC()
	}
	return []any{m.XML, time.Now().UTC(), nullable(m.SNDR), seq, sent, nullable(m.TYPE), nullable(m.STYP)}
}

func insert(ctx context.Context, db *sql.DB, m traffic.Message) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, loadStatementTimeout)
	defer cancel()
	r, err := db.ExecContext(ctx, insertSQL, insertArgs(m)...)
	if err != nil {
		return 0, err
	}
	return r.LastInsertId()
}

// insertOpen inserts m in a transaction it leaves open; commit commits it and returns the
// connection.
func insertOpen(ctx context.Context, db *sql.DB, m traffic.Message) (int64, func() error, error) {
	ictx, cancel := context.WithTimeout(ctx, loadStatementTimeout)
	defer cancel()
	// The transaction outlives this call, so it is not bound to ictx (database/sql rolls a
	// transaction back when its context ends).
	tx, err := db.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return 0, nil, err
	}
	r, err := tx.ExecContext(ictx, insertSQL, insertArgs(m)...)
	if err != nil {
		_ = tx.Rollback()
		return 0, nil, err
	}
	id, err := r.LastInsertId()
	if err != nil {
		_ = tx.Rollback()
		return 0, nil, err
	}
	return id, tx.Commit, nil
}

// rolledBack allocates an ID with an insert it rolls back and returns the ID.
func rolledBack(ctx context.Context, db *sql.DB) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, loadStatementTimeout)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	r, err := tx.ExecContext(ctx, insertSQL, "<MSG>rolled back by the chaos harness</MSG>", time.Now().UTC(), nil, nil, nil, nil, nil)
	if err != nil {
		return 0, err
	}
	id, err := r.LastInsertId()
	if err != nil {
		return 0, err
	}
	return id, tx.Rollback()
}
