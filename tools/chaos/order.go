package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/msgexchange/msgexchange/pkg/clock"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// Out of ID order (docs/chaos.md, "Out of ID order"): late arrivals and replays, the two ways
// a message is applied after newer messages of its flight. The order-safe flight state (the
// R-ORDER rules) makes the final state the one in-order processing gives, so the clean run in
// ID order stays the reference; the checks compare what must be equal and name what may not.

// pumpLockTimeout is the chaos pump's lock_timeout (a PostgreSQL setting of its sessions, in
// its DSN): a flight row another session holds makes the pump's attempt fail after this long
// instead of waiting for the whole step bound. The failure is the message's attempt (db.Classify
// says unsure, and a probe of PostgreSQL answers), so five of them make it DEAD(EXHAUSTED).
const pumpLockTimeout = 2 * time.Second

// Bounds of the out-of-order steps; each gives up rather than hang the run.
const (
	// predecessorWait bounds the wait, before a replay's flight row is locked, until the
	// flight's previous message is terminal (a backed-up queue: the replay is not made).
	predecessorWait = 30 * time.Second
	// exhaustWait bounds the wait until the message behind the held row is DEAD: the retry
	// budget, five lock waits, restarts of a killed pump.
	exhaustWait = 150 * time.Second
	// laterWait bounds the wait, after the row is released, until a later message of the
	// flight succeeded; releaseWait bounds how long a late arrival's insert is held until
	// ingest releases its ID, nextWait how much longer until the flight's next message is
	// processed.
	laterWait   = 60 * time.Second
	releaseWait = 2 * time.Minute
	nextWait    = 15 * time.Second
	// replayCallWait bounds the retries of the Replay call (control may be killed meanwhile).
	replayCallWait = time.Minute
	// replaySpacing is the least load time between two replays: each holds the queue's head
	// for the retry budget and its lock waits.
	replaySpacing = 60 * time.Second
	// arrivalSpacing is the least load time between two late arrivals: each stalls discovery
	// for max-commit-delay.
	arrivalSpacing = 10 * time.Second
)

// replayPlan is a planned replay: message i of flight flid, whose previous message is pred
// and whose later messages are later (indices into the plan).
type replayPlan struct {
	flid  string
	pred  int
	later []int
}

// arrivalPlan is a planned late arrival: next is the index of its flight's next message, -1
// for none.
type arrivalPlan struct {
	flid string
	next int
}

// lateArrival is what became of a planned late arrival.
type lateArrival struct {
	id       int64
	flid     string
	held     time.Duration
	released bool // ingest released its ID while the insert was open
	err      error
}

// replayed is what became of a planned replay.
type replayed struct {
	id    int64
	flid  string
	made  bool   // DEAD(EXHAUSTED) behind the held row and replayed through control
	after int    // later messages of the flight SUCCEEDED before the replay
	why   string // why it was not made
}

var maidRE = regexp.MustCompile(`<MAID>([^<]+)</MAID>`)

// orderCandidates are the messages that may be made late or replayed: FLOPs other than FDEL
// (R-ORDER-6: a late word on a flight's existence is a named exception), sent once (a
// duplicate would swap which copy binds the identity), of flights that have a message before
// them (the one that creates the flight) and a later one. replayOK also leaves out code-share
// flights: the held row of a master would block its children's messages too.
func orderCandidates(msgs []traffic.Message) (flop []int, replayOK map[int]bool, byFlight map[string][]int) {
	count := map[string]int{}
	codeShare := map[string]bool{}
	byFlight = map[string][]int{}
	for i, m := range msgs {
		count[m.XML]++
		if m.FLID != "" {
			byFlight[m.FLID] = append(byFlight[m.FLID], i)
		}
		if m.Kind == traffic.KindSchedule {
			if s := maidRE.FindStringSubmatch(m.XML); s != nil && strings.TrimSpace(s[1]) != "" {
				codeShare[m.FLID], codeShare[strings.TrimSpace(s[1])] = true, true
			}
		}
	}
	dupFlight := map[string]bool{}
	for _, m := range msgs {
		if m.Kind == traffic.KindDuplicate {
			dupFlight[m.FLID] = true
		}
	}
	replayOK = map[int]bool{}
	for i, m := range msgs {
		if m.Kind != traffic.KindFLOP || m.FLID == "" || count[m.XML] > 1 {
			continue
		}
		own := byFlight[m.FLID]
		k := slices.Index(own, i)
		if k < 1 || k == len(own)-1 {
			continue
		}
		flop = append(flop, i)
		if !codeShare[m.FLID] && !dupFlight[m.FLID] {
			replayOK[i] = true
		}
	}
	return flop, replayOK, byFlight
}

// clearOf reports whether the load time at does not meet a long outage that would void the
// step: before reports how long before an outage it must stay, after how long after its end.
func clearOf(at time.Duration, long []longSlot, before, after map[Dep]time.Duration) bool {
	for _, s := range long {
		b, ok := before[s.dep]
		if !ok {
			continue
		}
		if at >= s.at-b && at <= s.at+s.dur+after[s.dep] {
			return false
		}
	}
	return true
}

// planOrder chooses the late arrivals and the replays among the candidates, in a seeded
// order, spaced in load time and clear of the long outages that would void them: a late
// arrival needs ingest and PostgreSQL (to release its ID) and must not hold an insert open when
// the inbox is locked for long; a replay needs its flight row to stay held (not the
// PostgreSQL outage) and its insert and the pump's attempts to go on (not the inbox outage). Neither is a late commit, and their flights are disjoint.
func planOrder(r *rand.Rand, p *loadPlan, arrivals, replays int, long []longSlot) {
	p.arrivals, p.replays = map[int]arrivalPlan{}, map[int]replayPlan{}
	if arrivals <= 0 && replays <= 0 {
		return
	}
	n := len(p.msgs)
	upto := max(1, n*9/10)
	at := func(i int) time.Duration { return p.span * time.Duration(i) / time.Duration(max(1, n)) }
	flop, replayOK, byFlight := orderCandidates(p.msgs)
	r.Shuffle(len(flop), func(i, j int) { flop[i], flop[j] = flop[j], flop[i] })
	used := map[string]bool{}
	spaced := func(i int, taken []int, gap time.Duration) bool {
		for _, j := range taken {
			if d := at(i) - at(j); d < gap && d > -gap {
				return false
			}
		}
		return true
	}
	var taken []int
	// The PostgreSQL outage ends the harness's session and so the held row; the inbox outage
	// kills the pump and blocks the insert. The Redis and broker outages do not reach a
	// message that fails before its projection, but the held message is the queue's head
	// until it is DEAD (its attempts and their backoff, about as long as such an outage): one
	// that begins just after the hold would end before any work reached it (checkFaults), so
	// a replay does not begin in the 20 s before one.
	// The long Redis outage blocks the pump before the flight's previous message is processed,
	// which the replay waits predecessorWait for. A failover (depFailover) meets the pump's
	// projection writes only if no held head keeps the pump off Redis: no replay in the 50 s
	// before one.
	replayBefore := map[Dep]time.Duration{DepInbox: 20 * time.Second, DepPG: 50 * time.Second, DepRedis: 20 * time.Second,
		depFailover: 50 * time.Second}
	replayAfter := map[Dep]time.Duration{DepInbox: 10 * time.Second, DepPG: 5 * time.Second, DepRedis: 10 * time.Second,
		depFailover: 5 * time.Second}
	justBefore := func(at time.Duration) bool {
		for _, s := range long {
			if (s.dep == DepRedis || s.dep == DepKafka) && at >= s.at-20*time.Second && at <= s.at {
				return true
			}
		}
		return false
	}
	for _, i := range flop {
		if len(p.replays) >= replays {
			break
		}
		f := p.msgs[i].FLID
		if !replayOK[i] || i >= upto || p.late[i] > 0 || used[f] || !spaced(i, taken, replaySpacing) ||
			!clearOf(at(i), long, replayBefore, replayAfter) || justBefore(at(i)) {
			continue
		}
		own := byFlight[f]
		k := slices.Index(own, i)
		p.replays[i] = replayPlan{flid: f, pred: own[k-1], later: slices.Clone(own[k+1:])}
		used[f] = true
		taken = append(taken, i)
	}
	taken = nil
	arrivalBefore := map[Dep]time.Duration{DepInbox: 15 * time.Second, DepPG: 15 * time.Second}
	arrivalAfter := map[Dep]time.Duration{DepInbox: 25 * time.Second, DepPG: 5 * time.Second}
	for _, i := range flop {
		if len(p.arrivals) >= arrivals {
			break
		}
		f := p.msgs[i].FLID
		if i >= upto || p.late[i] > 0 || used[f] || !spaced(i, taken, arrivalSpacing) || !clearOf(at(i), long, arrivalBefore, arrivalAfter) {
			continue
		}
		own := byFlight[f]
		p.arrivals[i] = arrivalPlan{flid: f, next: own[slices.Index(own, i)+1]}
		used[f] = true
		taken = append(taken, i)
	}
}

// disorder carries out the plan's late arrivals and replays against the chaos stack. It
// watches the pipeline through the harness's PostgreSQL pool (spared by pg_terminate_backend)
// and replays through the control service's gRPC API with the operator token.
type disorder struct {
	pg      *pgxpool.Pool
	logf    func(format string, args ...any)
	control controlv1.ControlServiceClient
	token   string

	// holding is told when a late-arrival insert is held open and when it is committed (the
	// injector holds back LOCK TABLES meanwhile); nil for none.
	holding func(on bool)

	mu  sync.Mutex
	ids map[int]int64 // plan index → inbox ID, as the loader inserts
}

func newDisorder(pg *pgxpool.Pool, logf func(string, ...any), grpcAddr, token string) (*disorder, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return &disorder{pg: pg, logf: logf, control: controlv1.NewControlServiceClient(conn), token: token, ids: map[int]int64{}}, conn, nil
}

func (d *disorder) inserted(i int, id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids[i] = id
}

func (d *disorder) idOf(i int) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.ids[i]
	return id, ok
}

// state is a message's processing state, "" when it is not enqueued or cannot be read now.
func (d *disorder) state(ctx context.Context, id int64) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var s string
	if err := d.pg.QueryRow(ctx, `SELECT state FROM proc_state WHERE msg_id = $1`, id).Scan(&s); err != nil {
		return ""
	}
	return s
}

// waitFor polls cond every 200 ms until it holds or d passes.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || !clock.Sleep(ctx, 200*time.Millisecond) {
			return false
		}
	}
}

// holdLate keeps the insert of a late arrival open until ingest released its ID (the hole
// waited max-commit-delay) and, for at most nextWait more, until the flight's next message
// was processed, then commits it: the row lands in a released hole, ingest's late watch finds
// and enqueues it (R-INGEST-8), and the pump applies it after newer messages (R-INGEST-9).
func (d *disorder) holdLate(ctx context.Context, id int64, a arrivalPlan, commit func() error) lateArrival {
	began := time.Now()
	la := lateArrival{id: id, flid: a.flid}
	if d.holding != nil {
		defer d.holding(false)
	}
	la.released = waitFor(ctx, releaseWait, func() bool {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var ok bool
		err := d.pg.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM inbox_hole WHERE $1 BETWEEN first_id AND last_id)`, id).Scan(&ok)
		return err == nil && ok
	})
	if la.released && a.next >= 0 {
		waitFor(ctx, nextWait, func() bool {
			next, ok := d.idOf(a.next)
			return ok && terminal(d.state(ctx, next))
		})
	}
	la.err = commit()
	la.held = time.Since(began)
	if !la.released {
		d.logf("late arrival %d (flight %s): ingest did not release its ID within %s; committed as a late commit", id, a.flid, releaseWait)
	} else {
		d.logf("late arrival %d (flight %s) committed after %s, its ID released", id, a.flid, la.held.Round(time.Millisecond))
	}
	return la
}

// flightLock is a transaction of the harness holding one flight row FOR UPDATE.
type flightLock struct {
	conn *pgxpool.Conn
	tx   pgx.Tx
}

func (l *flightLock) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = l.tx.Rollback(ctx)
	l.conn.Release()
}

// lockFlight holds the flight row of a planned replay, once the flight's previous message is
// terminal: the next message of the flight the pump meets is the planned one. Another session
// holding a row is what an operator's forgotten transaction or a reporting job does.
func (d *disorder) lockFlight(ctx context.Context, rp replayPlan) (*flightLock, string) {
	pred, ok := d.idOf(rp.pred)
	if !ok {
		return nil, "the flight's previous message was not inserted"
	}
	if !waitFor(ctx, predecessorWait, func() bool { return terminal(d.state(ctx, pred)) }) {
		return nil, fmt.Sprintf("the flight's previous message %d was not processed within %s", pred, predecessorWait)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := d.pg.Acquire(lctx)
	if err != nil {
		return nil, "lock the flight row: " + err.Error()
	}
	tx, err := conn.Begin(lctx)
	if err != nil {
		conn.Release()
		return nil, "lock the flight row: " + err.Error()
	}
	var flid string
	if err := tx.QueryRow(lctx, `SELECT flid FROM flight_schd WHERE flid = $1 FOR UPDATE`, rp.flid).Scan(&flid); err != nil {
		_ = tx.Rollback(lctx)
		conn.Release()
		return nil, "lock the flight row: " + err.Error()
	}
	return &flightLock{conn: conn, tx: tx}, ""
}

// replay waits until the message behind the held flight row is DEAD(EXHAUSTED), releases the
// row, waits until a later message of the flight SUCCEEDED, and replays the message through
// control (R-REPLAY-1, R-REPLAY-3): the pump applies it to the flight as the later messages
// left it.
func (d *disorder) replay(ctx context.Context, id int64, rp replayPlan, lock *flightLock) replayed {
	res := replayed{id: id, flid: rp.flid}
	dead := waitFor(ctx, exhaustWait, func() bool {
		s := d.state(ctx, id)
		return s == "DEAD" || s == "SUCCEEDED" || s == "SKIPPED"
	})
	lock.release()
	if s := d.state(ctx, id); !dead || s != "DEAD" {
		res.why = fmt.Sprintf("message %d is %s after %s behind its flight's row, not DEAD", id, orNone(s), exhaustWait)
		d.logf("replay of %d (flight %s) not made: %s", id, rp.flid, res.why)
		return res
	}
	d.logf("message %d (flight %s) DEAD behind its held flight row; row released", id, rp.flid)
	var later []int64
	for _, i := range rp.later {
		if lid, ok := d.idOf(i); ok {
			later = append(later, lid)
		}
	}
	waitFor(ctx, laterWait, func() bool {
		for _, lid := range later {
			if d.state(ctx, lid) == "SUCCEEDED" {
				return true
			}
		}
		return false
	})
	for _, lid := range later {
		if d.state(ctx, lid) == "SUCCEEDED" {
			res.after++
		}
	}
	rctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+d.token)
	var last error
	res.made = waitFor(ctx, replayCallWait, func() bool {
		cctx, cancel := context.WithTimeout(rctx, 10*time.Second)
		defer cancel()
		resp, err := d.control.Replay(cctx, &controlv1.ReplayRequest{MsgIds: []int64{id},
			Comment: "chaos: DEAD(EXHAUSTED) behind a held flight row, replayed after later messages of flight " + rp.flid})
		if err == nil && resp.GetReplayed() == 1 {
			return true
		}
		last = err
		// A reply lost to a killed control: the replay committed if the row left DEAD.
		s := d.state(ctx, id)
		return s != "" && s != "DEAD"
	})
	if !res.made {
		res.why = fmt.Sprintf("the Replay call did not go through within %s: %v", replayCallWait, last)
		d.logf("replay of %d (flight %s) FAILED: %s", id, rp.flid, res.why)
		return res
	}
	d.logf("message %d (flight %s) replayed through control after %d later messages of its flight succeeded", id, rp.flid, res.after)
	return res
}

// withLockTimeout sets lock_timeout for every session of a PostgreSQL DSN (URL or keyword form).
func withLockTimeout(dsn string, d time.Duration) (string, error) {
	opt := "-c lock_timeout=" + strconv.FormatInt(d.Milliseconds(), 10)
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		q := u.Query()
		if q.Get("options") != "" {
			return "", errors.New("the PostgreSQL DSN sets options already")
		}
		q.Set("options", opt)
		// pgx reads the query with path unescaping, where "+" is not a space.
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String(), nil
	}
	if strings.Contains(dsn, "options=") {
		return "", errors.New("the PostgreSQL DSN sets options already")
	}
	return dsn + " options='" + opt + "'", nil
}
