package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/testkit/testwait"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// versionConsumer is a KAFKA:schd consumer that keeps, as consumers must, the newest
// (FLID, STATE_VERSION): it records every version of every FLID in the order it consumed them
// and every step back (a version lower than one it already had).
type versionConsumer struct {
	mu     sync.Mutex
	seen   map[string][]int64
	values map[string][]byte // the newest record's value per FLID (nil for a tombstone)
	back   []string
}

func consumeSchd(t *testing.T, e *env) *versionConsumer {
	t.Helper()
	c := &versionConsumer{seen: map[string][]int64{}, values: map[string][]byte{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafka.Addrs...), kgo.ConsumeTopics(e.topicSchd),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
				var v int64 = -1
				for _, h := range rec.Headers {
					if h.Key == "msgx-state-version" {
						v, _ = strconv.ParseInt(string(h.Value), 10, 64)
					}
				}
				flid := string(rec.Key)
				c.mu.Lock()
				if s := c.seen[flid]; len(s) > 0 && v < s[len(s)-1] {
					c.back = append(c.back, fmt.Sprintf("%s: v%d after v%d", flid, v, s[len(s)-1]))
				}
				c.seen[flid] = append(c.seen[flid], v)
				c.values[flid] = rec.Value
				c.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return c
}

// latest is the newest version consumed of flid (-1 when none) and how many records it got.
func (c *versionConsumer) latest(flid string) (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seen[flid]
	if len(s) == 0 {
		return -1, 0
	}
	return s[len(s)-1], len(s)
}

func (c *versionConsumer) stepsBack() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.back...)
}

// loseTopic deletes the env's KAFKA:schd topic and creates it empty again, with its partitions
// and configs: everything it held is gone.
func loseTopic(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkatest.DeleteTopic(ctx, e.kafka.Admin(), e.topicSchd); err != nil {
		t.Fatal(err)
	}
	if err := kafkatest.CreateTopic(ctx, e.kafka.Admin(), e.topicSchd, topicPartitions, schdConfigs); err != nil {
		t.Fatal(err)
	}
}

type republishJSON struct {
	Republish struct {
		ID      json.Number `json:"republishId"`
		State   string      `json:"state"`
		Done    json.Number `json:"done"`
		Total   json.Number `json:"total"`
		Unknown json.Number `json:"unknown"`
	} `json:"republish"`
}

func (e *env) republishJSON(t *testing.T, args ...string) republishJSON {
	t.Helper()
	out, errOut, code := e.msgxctl(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("msgxctl %v: exit %d\n%s%s", args, code, out, errOut)
	}
	var r republishJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("msgxctl %v output %q: %v", args, out, err)
	}
	return r
}

// pgVersions is every flight's current STATE_VERSION in PostgreSQL.
func (e *env) pgVersions(t *testing.T) map[string]int64 {
	t.Helper()
	rows, err := e.pg.Pool.Query(context.Background(), `SELECT flid, state_version FROM flight_schd`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var f string
		var v int64
		if err := rows.Scan(&f, &v); err != nil {
			t.Fatal(err)
		}
		out[f] = v
	}
	return out
}

// waitCaughtUp waits until the consumer's newest version of every flight is PostgreSQL's.
func waitCaughtUp(t *testing.T, e *env, c *versionConsumer, what string) map[string]int64 {
	t.Helper()
	var want map[string]int64
	testwait.ForState(t, 90*time.Second, what, func() (bool, string) {
		want = e.pgVersions(t)
		for f, v := range want {
			if got, _ := c.latest(f); got != v {
				return false, fmt.Sprintf("%s: consumed v%d, PostgreSQL v%d", f, got, v)
			}
		}
		return true, ""
	})
	return want
}

// TestRepublishThroughTheBinaries: the five binaries publish a day of flights; the KAFKA:schd
// topic is lost (deleted and created empty); msgxctl republish --all, while the pump applies an
// update of every flight, brings a fresh consumer every flight's latest state, and no FLID's
// STATE_VERSION ever goes down in the order consumed. A republish a killed backfill left in the
// middle is resumed from its cursor by the next backfill process, and a republish run once more
// only sends duplicates.
func TestRepublishThroughTheBinaries(t *testing.T) {
	e := newEnv(t)
	e.startAll(t)
	e.waitAllRolesActive(t)
	day := time.Now().In(airport).Truncate(24 * time.Hour)
	const n = 24
	flights := make([]traffic.Flight, n)
	var msgs []*message
	for i := range flights {
		flights[i] = traffic.Flight{FLID: fmt.Sprintf("RP%02d", i), ALCD: "CA", FLNO: fmt.Sprintf("CA%d", 2000+i), MVIN: "D",
			SODT: day.Add(time.Duration(8*60+i) * time.Minute), FLTY: "W", FLIN: "D", ACFT: "33L", RENO: "B1234", TRML: "T3",
			STND: "512", Route: []string{"PEK", "SHA"}}
		msgs = append(msgs, &message{xml: traffic.ADFT(int64(i+1), day.Add(6*time.Hour), flights[i])})
	}
	update := func(seq int64, minutes int) []*message {
		var out []*message
		for i, f := range flights {
			out = append(out, &message{xml: traffic.FLOP(seq+int64(i), day.Add(7*time.Hour), f.FLID, f.FFID(), "ESTT",
				"<ESTT>"+traffic.FormatTime(f.SODT.Add(time.Duration(minutes)*time.Minute))+"</ESTT>")})
		}
		return out
	}
	msgs = append(msgs, update(100, 10)...)
	before := consumeSchd(t, e)
	e.insert(t, msgs)
	// Every message applied first: waitCaughtUp compares the flights PostgreSQL has, and on a
	// loaded machine the pump may not have created them all yet.
	for _, m := range msgs {
		testwait.ForState(t, 90*time.Second, "the day's messages to be applied", func() (bool, string) {
			f := e.facts(t, m.id)
			return f.terminal, f.String()
		})
	}
	waitCaughtUp(t, e, before, "every flight's latest state on the topic")

	// The topic is lost while the dispatcher is down; a consumer that reads it from the start
	// finds nothing of what was there.
	e.stack.Stop("dispatcher", 10*time.Second)
	loseTopic(t, e)
	if err := e.stack.Start("dispatcher", nil); err != nil {
		t.Fatal(err)
	}
	fresh := consumeSchd(t, e)

	// Live traffic: an update of every flight, applied while the republish runs.
	live := update(200, 20)
	e.insert(t, live)
	out, errOut, code := e.msgxctl(t, "republish", "--all", "--yes", "--comment", "e2e: topic lost")
	if code != 0 {
		t.Fatalf("republish: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("msgxctl republish --all:\n%s", out)
	if !strings.Contains(out, fmt.Sprintf("DONE: %d/%d flights", n, n)) || !strings.Contains(out, "republish.requested_by") {
		t.Errorf("republish output lacks the progress or the result:\n%s", out)
	}
	for _, m := range live {
		testwait.ForState(t, 60*time.Second, "the live update to be applied", func() (bool, string) {
			f := e.facts(t, m.id)
			return f.terminal, f.String()
		})
	}
	want := waitCaughtUp(t, e, fresh, "every flight's latest state on the lost topic again")
	for _, f := range flights {
		var doc map[string]any
		fresh.mu.Lock()
		err := json.Unmarshal(fresh.values[f.FLID], &doc)
		fresh.mu.Unlock()
		if err != nil || doc["FLID"] != f.FLID || doc["STATE_VERSION"] != float64(want[f.FLID]) {
			t.Errorf("%s: the newest record %v (%v), want its document at v%d", f.FLID, doc, err, want[f.FLID])
		}
	}

	// A republish left RUNNING in the middle by a killed backfill: the next backfill process
	// goes on from its cursor (RP11), so only the flights after it are sent again.
	e.stack.Kill("backfill")
	_, sentBefore05 := fresh.latest("RP05")
	_, sentBefore20 := fresh.latest("RP20")
	var id int64
	if err := e.pg.Pool.QueryRow(context.Background(), `INSERT INTO schd_republish (state, cursor, done, total, requested_by,
		requested_at, started_at, updated_at) VALUES ('RUNNING', 'RP11', 12, $1, 'e2e', now(), now(), now())
		RETURNING republish_id`, n).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := e.stack.Start("backfill", nil); err != nil {
		t.Fatal(err)
	}
	var got republishJSON
	testwait.ForState(t, 60*time.Second, "the resumed republish to end", func() (bool, string) {
		got = e.republishJSON(t, "get-republish", "--republish-id", fmt.Sprint(id))
		return got.Republish.State == "REBUILD_STATE_DONE", fmt.Sprintf("%+v", got.Republish)
	})
	if got.Republish.Done != json.Number(fmt.Sprint(n)) {
		t.Errorf("resumed republish: %+v, want %d done", got.Republish, n)
	}
	testwait.ForState(t, 30*time.Second, "RP20 sent again", func() (bool, string) {
		_, k := fresh.latest("RP20")
		return k > sentBefore20, fmt.Sprintf("%d records, %d before", k, sentBefore20)
	})
	if _, k := fresh.latest("RP05"); k != sentBefore05 {
		t.Errorf("RP05, before the cursor, was sent again (%d records, %d before)", k, sentBefore05)
	}

	// Run twice: the same versions again, duplicates only.
	again := e.republishJSON(t, "republish", "--flid", "RP00,RP01,NOSUCH", "--comment", "INC-T")
	if r := again.Republish; r.State != "REBUILD_STATE_DONE" || r.Done != "2" || r.Unknown != "1" {
		t.Errorf("republish of named FLIDs: %+v", r)
	}
	waitCaughtUp(t, e, fresh, "the duplicates")
	for _, c := range []*versionConsumer{before, fresh} {
		if back := c.stepsBack(); len(back) > 0 {
			t.Errorf("a consumer saw versions go down: %v", back)
		}
	}
	if _, k := fresh.latest("RP00"); k < 2 {
		t.Errorf("RP00: %d records on the lost topic, want the republished ones and the duplicate", k)
	}
}
