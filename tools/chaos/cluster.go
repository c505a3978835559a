package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/outbox"
)

// Node is a broker of a Cluster: its KRaft node id (as metadata names a partition's leader or a
// coordinator) and its process, which the faults kill with SIGKILL and start again on its data.
type Node interface {
	Broker
	ID() int32
}

// Cluster is a Kafka cluster of the run's own (kafkatest.OwnClusterWith with a controller of its
// own): brokers the faults kill one or two at a time while the controller keeps the metadata
// quorum, so that the cluster still answers and elects leaders among the brokers left
// (docs/chaos.md, "The cluster").
type Cluster interface {
	Brokers() []Node
	Admin() *kadm.Client
}

// The short faults of a cluster, in place of BrokerKill: each kills one broker chosen for what it
// serves at that moment, and starts it again after 1–5 s.
const (
	LeaderKill      Kind = "kill -9 partition leader" // the leader of a busy FLID's partition of KAFKA:msg
	CoordinatorKill Kind = "kill -9 txn coordinator"  // the transaction coordinator of a dispatcher lane's transactional id
)

// The cluster's kinds take the broker down, like BrokerKill, and are drawn as often. Set here
// rather than in faults.go's tables so that the single-broker run's stay as they are.
func init() {
	for _, k := range []Kind{LeaderKill, CoordinatorKill} {
		dependsOn[k] = DepKafka
		weights[k] = weights[BrokerKill]
	}
}

// transactionState is Kafka's internal topic of the transaction coordinators.
const transactionState = "__transaction_state"

// clusterFaults is what the injector needs of a cluster.
type clusterFaults struct {
	c         Cluster
	pg        *pgxpool.Pool // the stack's database, as the harness: the events pending
	topicMsg  string
	topics    []string // the two topics and __transaction_state: the partitions whose leaders are watched
	txnIDs    []string // the dispatcher's transactional ids, one per lane (kafka.transactional-id + "." + topic)
	rec       *recorder
	elections *electionWatch

	mu sync.Mutex
	// twoDown describes the NOT_ENOUGH_REPLICAS period: the nodes killed, and the fewest
	// in-sync replicas of any partition seen during it (-1 before it was sampled).
	twoDown   string
	fewestISR int
}

func newClusterFaults(c Cluster, pg *pgxpool.Pool, topicMsg, topicSchd string) *clusterFaults {
	prefix := pipeline.Kafka.TransactionalID
	return &clusterFaults{c: c, pg: pg, topicMsg: topicMsg, topics: []string{topicMsg, topicSchd, transactionState},
		txnIDs: []string{prefix + "." + topicMsg, prefix + "." + topicSchd}, fewestISR: -1}
}

// bootstrap is the stack's bootstrap list: every broker of the cluster, or the one broker.
func (h *harness) bootstrap() []string {
	if h.cluster == nil {
		return []string{h.broker.Addr()}
	}
	var out []string
	for _, n := range h.cluster.Brokers() {
		out = append(out, n.Addr())
	}
	return out
}

// kinds are the short fault kinds of this run: ShortKinds, with the cluster's two kills in
// place of BrokerKill on a cluster.
func (in *injector) kinds() []Kind {
	if in.kc == nil {
		return ShortKinds
	}
	var out []Kind
	for _, k := range ShortKinds {
		if k == BrokerKill {
			out = append(out, LeaderKill, CoordinatorKill)
			continue
		}
		out = append(out, k)
	}
	return out
}

// node is the broker with the given id.
func (kc *clusterFaults) node(id int32) (Node, error) {
	for _, n := range kc.c.Brokers() {
		if n.ID() == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no broker %d in the cluster", id)
}

// killNode kills one broker for k (the leader of a busy FLID's partition, or a lane's
// transaction coordinator) and starts it again after 1–5 s; the down time counted lasts until
// the cluster lists it unfenced again.
func (in *injector) killNode(ctx context.Context, r *rand.Rand, k Kind) {
	if !in.brokerMu.TryLock() {
		return
	}
	defer in.brokerMu.Unlock()
	began := time.Now()
	var n Node
	var why string
	var err error
	if k == LeaderKill {
		n, why, err = in.kc.busyLeader(ctx, busyWait)
	} else {
		n, why, err = in.kc.coordinator(ctx, in.kc.txnIDs[r.IntN(len(in.kc.txnIDs))])
	}
	if err != nil {
		in.record(k, "", 0, 0, err)
		return
	}
	down := between(r, time.Second, 5*time.Second)
	in.logf("kill -9 broker %d, %s; restarted after %s", n.ID(), why, down.Round(time.Millisecond))
	in.killNodes(n)
	clock.Sleep(ctx, down)
	err = n.Restart()
	in.record(k, fmt.Sprintf("broker %d", n.ID()), 1, time.Since(began), err)
}

// killNodes kills the brokers with SIGKILL and counts the kills.
func (in *injector) killNodes(nodes ...Node) {
	for _, n := range nodes {
		n.Kill()
	}
	in.mu.Lock()
	in.brokerKills += len(nodes)
	in.mu.Unlock()
}

// busyWait bounds the wait of a leader kill for a FLID with traffic: at the start of a run the
// consumer has received nothing yet.
const busyWait = 15 * time.Second

// busyLeader is the leader of the KAFKA:msg partition of a busy FLID: the one with the most
// events pending in the outbox whose partition the consumer has seen, else the one the consumer
// received most records of, waiting at most wait for one. The partition is the one its records
// arrived on: the dispatcher's partitioner decides it, and the harness does not repeat it.
func (kc *clusterFaults) busyLeader(ctx context.Context, wait time.Duration) (Node, string, error) {
	deadline := time.Now().Add(wait)
	var flid, busy string
	var p int32
	for {
		var err error
		if flid, p, busy, err = kc.busyFLID(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) || !clock.Sleep(ctx, 500*time.Millisecond) {
			return nil, "", err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	td, err := kc.c.Admin().ListTopics(ctx, kc.topicMsg)
	if err != nil {
		return nil, "", fmt.Errorf("the leader of %s/%d: %w", kc.topicMsg, p, err)
	}
	pd, found := td[kc.topicMsg].Partitions[p]
	if !found || pd.Leader < 0 {
		return nil, "", fmt.Errorf("%s/%d has no leader now", kc.topicMsg, p)
	}
	n, err := kc.node(pd.Leader)
	return n, fmt.Sprintf("leader of %s/%d, the partition of flight %s (%s)", kc.topicMsg, p, flid, busy), err
}

// busyFLID picks the FLID for busyLeader, its partition, and what makes it busy.
func (kc *clusterFaults) busyFLID(ctx context.Context) (string, int32, string, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	rows, err := pendingFLIDs(qctx, kc.pg)
	cancel()
	for _, row := range rows {
		if p, ok := kc.rec.partitionOf(row.flid); ok {
			return row.flid, p, fmt.Sprintf("%d events pending", row.n), nil
		}
	}
	flid, p, n, ok := kc.rec.busiest()
	if !ok {
		return "", 0, "", fmt.Errorf("no FLID to pick: nothing pending (%v) and nothing received yet", err)
	}
	return flid, p, fmt.Sprintf("%d records received", n), nil
}

// coordinator is the transaction coordinator of txnID, as FindCoordinator names it (retried
// while the coordinator moves after an earlier kill).
func (kc *clusterFaults) coordinator(ctx context.Context, txnID string) (Node, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		resp := kc.c.Admin().FindTxnCoordinators(ctx, txnID)
		c, ok := resp[txnID]
		err := c.Err
		if !ok && err == nil {
			err = errors.New("no answer")
		}
		if err == nil {
			n, err := kc.node(c.NodeID)
			return n, "transaction coordinator of " + txnID, err
		}
		if !clock.Sleep(ctx, 500*time.Millisecond) {
			return nil, "", fmt.Errorf("find the coordinator of %s: %w", txnID, err)
		}
	}
}

// twoDown is the cluster's long outage: two of the three brokers killed for d, the coordinator
// of the KAFKA:msg lane and the leader of a busy FLID's partition (or another broker where they
// are one), then both started again. The broker left leads every partition alone and, at
// min.insync.replicas 2, refuses the dispatcher's records (NOT_ENOUGH_REPLICAS) and its
// transactions; the controller of its own keeps the metadata quorum meanwhile.
func (in *injector) twoDown(ctx context.Context, d time.Duration) error {
	kc := in.kc
	var down []Node
	add := func(n Node) {
		if n != nil && len(down) < 2 && !slices.ContainsFunc(down, func(m Node) bool { return m.ID() == n.ID() }) {
			down = append(down, n)
		}
	}
	if n, _, err := kc.coordinator(ctx, kc.txnIDs[0]); err == nil {
		add(n)
	}
	if n, _, err := kc.busyLeader(ctx, 0); err == nil {
		add(n)
	}
	for _, n := range kc.c.Brokers() {
		add(n)
	}
	ids := fmt.Sprintf("brokers %d and %d", down[0].ID(), down[1].ID())
	in.logf("long outage of the broker: %s of %d killed (SIGKILL) for %s, NOT_ENOUGH_REPLICAS on the one left", ids, len(kc.c.Brokers()), d)
	in.killNodes(down...)
	// The controller takes the killed brokers out of the in-sync replicas once their sessions
	// expire (broker.session.timeout.ms, 9 s): sampled midway, the fewest shows the shortage.
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		if clock.Sleep(ctx, d/2) {
			n, err := kc.fewestInSync(ctx)
			if err != nil {
				in.logf("in-sync replicas during the outage: %v", err)
				return
			}
			kc.mu.Lock()
			kc.fewestISR = n
			kc.mu.Unlock()
			in.logf("in-sync replicas during the outage: %d of %d at the fewest", n, len(kc.c.Brokers()))
		}
	}()
	in.waitOut(ctx, DepKafka, d)
	<-sampled
	kc.mu.Lock()
	kc.twoDown = ids
	kc.mu.Unlock()
	errs := make([]error, len(down))
	var wg sync.WaitGroup
	for i, n := range down {
		wg.Go(func() { errs[i] = n.Restart() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fewestInSync is the fewest in-sync replicas of any partition of the watched topics.
func (kc *clusterFaults) fewestInSync(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := kc.c.Admin().Metadata(ctx, kc.topics...)
	if err != nil {
		return 0, err
	}
	fewest := -1
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			if fewest < 0 || len(p.ISR) < fewest {
				fewest = len(p.ISR)
			}
		}
	}
	return fewest, nil
}

// busyRow is a FLID with events pending on KAFKA:msg.
type busyRow struct {
	flid string
	n    int
}

// pendingFLIDs lists the FLIDs with the most events pending on KAFKA:msg, the busiest first.
func pendingFLIDs(ctx context.Context, pg *pgxpool.Pool) ([]busyRow, error) {
	rows, err := pg.Query(ctx, `SELECT partition_key, count(*) FROM msg_event WHERE state = 'PENDING' AND target = $1
		GROUP BY partition_key ORDER BY count(*) DESC, partition_key LIMIT 50`, outbox.TargetMsg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []busyRow
	for rows.Next() {
		var b busyRow
		if err := rows.Scan(&b.flid, &b.n); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// partitionOf is the KAFKA:msg partition the FLID's records arrived on.
func (r *recorder) partitionOf(flid string) (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	recs := r.msg[flid]
	if len(recs) == 0 {
		return 0, false
	}
	return recs[len(recs)-1].partition, true
}

// busiest is the FLID the consumer received most KAFKA:msg records of, its partition and the
// count.
func (r *recorder) busiest() (string, int32, int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	best, n := "", 0
	for _, flid := range slices.Sorted(maps.Keys(r.msg)) {
		if len(r.msg[flid]) > n {
			best, n = flid, len(r.msg[flid])
		}
	}
	if n == 0 {
		return "", 0, 0, false
	}
	return best, r.msg[best][n-1].partition, n, true
}

// electionWatch follows the leader epoch of every partition of the two topics and
// __transaction_state. Kafka bumps a partition's leader epoch at each election of a leader (and
// not when only its in-sync replicas change), so the epochs at the end less those first seen
// count the elections the run caused, even where a poll missed one. When a partition of the two
// topics gets a new leader, its end offset then marks where the records written before the
// election end: a FLID with records on both sides crossed it.
type electionWatch struct {
	admin  *kadm.Client
	topics []string
	logf   func(format string, args ...any)

	mu     sync.Mutex
	first  map[string]map[int32]int32 // topic → partition → leader epoch first seen
	last   map[string]map[int32]int32
	leader map[string]map[int32]int32
	bounds map[string]map[int32][]int64 // topic → partition → end offsets at its elections
	cancel context.CancelFunc
	done   chan struct{}
}

// electionPoll is how often the watch asks for the partitions' leaders.
const electionPoll = 500 * time.Millisecond

func startElectionWatch(admin *kadm.Client, topics []string, logf func(string, ...any)) *electionWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &electionWatch{admin: admin, topics: topics, logf: logf, first: map[string]map[int32]int32{},
		last: map[string]map[int32]int32{}, leader: map[string]map[int32]int32{}, bounds: map[string]map[int32][]int64{},
		cancel: cancel, done: make(chan struct{})}
	w.poll(ctx)
	go func() {
		defer close(w.done)
		for clock.Sleep(ctx, electionPoll) {
			w.poll(ctx)
		}
	}()
	return w
}

func (w *electionWatch) poll(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := w.admin.Metadata(qctx, w.topics...)
	if err != nil {
		return // the brokers asked are down: the next poll asks again
	}
	type moved struct {
		topic     string
		partition int32
		leader    int32
	}
	var changed []moved
	w.mu.Lock()
	for _, t := range m.Topics {
		if t.Err != nil {
			continue // __transaction_state before the dispatcher's first transaction
		}
		if w.first[t.Topic] == nil {
			w.first[t.Topic], w.last[t.Topic], w.leader[t.Topic] = map[int32]int32{}, map[int32]int32{}, map[int32]int32{}
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				continue
			}
			e, seen := w.last[t.Topic][p.Partition]
			if !seen {
				w.first[t.Topic][p.Partition] = p.LeaderEpoch
			}
			if seen && p.LeaderEpoch > e && t.Topic != transactionState {
				changed = append(changed, moved{t.Topic, p.Partition, p.Leader})
			}
			w.last[t.Topic][p.Partition] = max(e, p.LeaderEpoch)
			w.leader[t.Topic][p.Partition] = p.Leader
		}
	}
	w.mu.Unlock()
	for _, c := range changed {
		offs, err := w.admin.ListEndOffsets(qctx, c.topic)
		if err != nil {
			continue
		}
		o, ok := offs.Lookup(c.topic, c.partition)
		if !ok || o.Err != nil {
			continue
		}
		w.mu.Lock()
		if w.bounds[c.topic] == nil {
			w.bounds[c.topic] = map[int32][]int64{}
		}
		w.bounds[c.topic][c.partition] = append(w.bounds[c.topic][c.partition], o.Offset)
		w.mu.Unlock()
		w.logf("%s/%d: broker %d elected leader at offset %d", c.topic, c.partition, c.leader, o.Offset)
	}
}

// stop ends the watch after a last poll.
func (w *electionWatch) stop(ctx context.Context) {
	w.cancel()
	<-w.done
	w.poll(ctx)
}

// counts are the elections per topic.
func (w *electionWatch) counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for t, ps := range w.last {
		for p, e := range ps {
			out[t] += int(e - w.first[t][p])
		}
	}
	return out
}

// boundaries copies the end offsets at the elections of topic's partitions.
func (w *electionWatch) boundaries(topic string) map[int32][]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int32][]int64{}
	for p, b := range w.bounds[topic] {
		out[p] = slices.Clone(b)
	}
	return out
}

// ClusterReport is what a run on a cluster adds to the summary.
type ClusterReport struct {
	Brokers int
	// Replication describes each topic's partitions as the cluster has them at the end.
	Replication []string
	// Elections counts the leader elections per topic (leader epochs at the end less those
	// first seen).
	Elections map[string]int
	// TwoDown names the brokers of the NOT_ENOUGH_REPLICAS period, FewestISR the fewest
	// in-sync replicas sampled during it (-1: not sampled).
	TwoDown   string
	FewestISR int
}

// replication describes the watched topics' partitions and reports whether each has three
// replicas and min.insync.replicas 2, as production has them.
func (kc *clusterFaults) replication(ctx context.Context) ([]string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := kc.c.Admin().Metadata(ctx, kc.topics...)
	if err != nil {
		return nil, false, err
	}
	cfgs, err := kc.c.Admin().DescribeTopicConfigs(ctx, kc.topics...)
	if err != nil {
		return nil, false, err
	}
	want := len(kc.c.Brokers())
	ok := true
	var out []string
	for _, name := range kc.topics {
		t := m.Topics[name]
		if t.Err != nil {
			out, ok = append(out, fmt.Sprintf("%s: %v", name, t.Err)), false
			continue
		}
		isr := "?"
		if rc, err := cfgs.On(name, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Key == "min.insync.replicas" && c.Value != nil {
					isr = *c.Value
				}
			}
		}
		fewest, most := -1, 0
		for _, p := range t.Partitions {
			if fewest < 0 || len(p.Replicas) < fewest {
				fewest = len(p.Replicas)
			}
			most = max(most, len(p.Replicas))
		}
		replicas := fmt.Sprint(fewest)
		if most != fewest {
			replicas = fmt.Sprintf("%d to %d", fewest, most)
		}
		ok = ok && fewest == want && most == want && isr == "2"
		out = append(out, fmt.Sprintf("%s: %d partitions × %s replicas, min.insync.replicas %s", name, len(t.Partitions), replicas, isr))
	}
	return out, ok, nil
}

// CheckElections is the check a cluster run adds.
const CheckElections = "per-FLID order on read_committed across leader elections"

// checkElections: the cluster is as production has it, the faults caused leader elections, and
// the FLIDs whose KAFKA:msg records lie on both sides of an election of their partition arrived
// in outbox order on the read_committed consumer, nothing lost and nothing foreign. A run whose
// elections crossed no FLID proves nothing about order across them and fails.
func checkElections(ev evidence, rep *ClusterReport, replicated bool, bounds map[int32][]int64) Check {
	c := Check{Name: CheckElections}
	var problems []string
	if !replicated {
		problems = append(problems, "not replicated as production: "+strings.Join(rep.Replication, "; "))
	}
	total := 0
	for _, n := range rep.Elections {
		total += n
	}
	if total == 0 {
		problems = append(problems, "no leader election happened")
	}
	want := map[string][]int64{}
	for _, e := range ev.chaos.events {
		if e.Target == outbox.TargetMsg {
			want[e.FLID] = append(want[e.FLID], e.ID)
		}
	}
	crossed, elections := 0, 0
	var bad []string
	for _, flid := range slices.Sorted(maps.Keys(ev.msg)) {
		recs := ev.msg[flid]
		n := crossings(recs, bounds)
		if n == 0 {
			continue
		}
		crossed++
		elections += n
		if p := orderProblem(want[flid], recs); p != "" {
			bad = append(bad, "flight "+flid+": "+p)
		}
	}
	if len(bad) > 0 {
		problems = append(problems, fmt.Sprintf("%d FLIDs out of order across an election: %s", len(bad), examples(bad, func(s string) string { return s })))
	}
	if total > 0 && crossed == 0 {
		problems = append(problems, "no FLID has records on both sides of an election of its partition")
	}
	c.Pass = len(problems) == 0
	if c.Pass {
		c.Detail = fmt.Sprintf("%d leader elections; %d FLIDs with KAFKA:msg records on both sides of an election of their partition (%d crossings), each in outbox order, none missing; %s",
			total, crossed, elections, strings.Join(rep.Replication, "; "))
	} else {
		c.Detail = strings.Join(problems, "; ")
	}
	return c
}

// crossings counts the elections of the FLID's partition that lie between its first and its
// last record.
func crossings(recs []received, bounds map[int32][]int64) int {
	if len(recs) == 0 {
		return 0
	}
	lo, hi := recs[0].offset, recs[0].offset
	for _, r := range recs {
		lo, hi = min(lo, r.offset), max(hi, r.offset)
	}
	n := 0
	for _, b := range bounds[recs[0].partition] {
		if lo < b && b <= hi {
			n++
		}
	}
	return n
}

// print writes the cluster's lines of the summary.
func (r *ClusterReport) print(p func(format string, args ...any)) {
	if r == nil {
		return
	}
	p("  kafka cluster       %d brokers and a KRaft controller of its own; %s", r.Brokers, strings.Join(r.Replication, "; "))
	total := 0
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(r.Elections)) {
		total += r.Elections[t]
		parts = append(parts, fmt.Sprintf("%s %d", t, r.Elections[t]))
	}
	p("  leader elections    %d caused (%s; leader epochs at the end less those first seen)", total, strings.Join(parts, ", "))
	if r.TwoDown != "" {
		isr := "not sampled"
		if r.FewestISR >= 0 {
			isr = fmt.Sprintf("%d of %d in sync at the fewest", r.FewestISR, r.Brokers)
		}
		p("  NOT_ENOUGH_REPLICAS %s down for the long outage, %s", r.TwoDown, isr)
	}
}

// clusterStarted starts the election watch once the stack runs.
func (h *harness) clusterStarted() {
	if h.inj.kc == nil {
		return
	}
	h.inj.kc.rec = h.rec
	h.inj.kc.elections = startElectionWatch(h.cluster.Admin(), h.inj.kc.topics, h.logf)
}

// clusterDone stops the election watch after the drain, while the brokers still run, and
// returns the cluster's part of the report and its check (nil, and a zero check, on one broker).
func (h *harness) clusterDone(ctx context.Context) (*ClusterReport, func(evidence) Check) {
	kc := h.inj.kc
	if kc == nil {
		return nil, nil
	}
	kc.elections.stop(ctx)
	rep := &ClusterReport{Brokers: len(h.cluster.Brokers()), Elections: kc.elections.counts()}
	kc.mu.Lock()
	rep.TwoDown, rep.FewestISR = kc.twoDown, kc.fewestISR
	kc.mu.Unlock()
	var replicated bool
	var err error
	if rep.Replication, replicated, err = kc.replication(ctx); err != nil {
		rep.Replication = []string{"not described: " + err.Error()}
	}
	bounds := kc.elections.boundaries(h.topicMsg)
	return rep, func(ev evidence) Check { return checkElections(ev, rep, replicated, bounds) }
}
