package projection_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/testkit/redistest"
)

// reply is a Redis error reply as the server sends it (go-redis's own type is internal).
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestClassify(t *testing.T) {
	ctx := context.Background()
	rd := redistest.New(t)
	flights := flight.Project([]flight.Flight{{FLID: "C1", Version: 1, State: flight.Active}})

	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer down.Close()
	_, refused := projection.New(down, "msgxt:down:", time.Second).Write(ctx, flights)

	// A version hash of the wrong type: Redis refuses the command (WRONGTYPE), the write's fault.
	prefix := rd.Prefix + "wrong:"
	if err := rd.Client.Set(ctx, projection.VersionKey(prefix), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, wrongType := projection.New(rd.Client, prefix, time.Second).Write(ctx, flights)

	own := redistest.Own(t)
	opts, err := redis.ParseURL(own.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled, opts.MaxRetries = true, -1
	paused := redis.NewClient(opts)
	defer paused.Close()
	if err := own.Client.Do(ctx, "CLIENT", "PAUSE", "2000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	_, timeout := projection.New(paused, own.Prefix, 200*time.Millisecond).Write(ctx, flights)

	// A failover client whose "sentinel" is a plain Redis: SENTINEL is an unknown command
	// there, a redis.Error reply, and still no master was ever reached.
	noSentinel := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{rd.Client.Options().Addr}, MaxRetries: -1})
	defer noSentinel.Close()
	_, noMaster := projection.New(noSentinel, "msgxt:nomaster:", time.Second).Write(ctx, flights)

	for _, c := range []struct {
		name string
		err  error
		want outage.Verdict
	}{
		{"refused (real)", refused, outage.Down},
		{"no sentinel names the master (real)", noMaster, outage.Down},
		{"wrong type (real)", wrongType, outage.Attempt},
		{"paused: timeout (real)", timeout, outage.Unsure},
		{"loading", reply("LOADING Redis is loading the dataset in memory"), outage.Down},
		{"read-only replica", reply("READONLY You can't write against a read only replica."), outage.Down},
		{"out of memory", reply("OOM command not allowed when used memory > 'maxmemory'."), outage.Down},
		{"closed client", redis.ErrClosed, outage.Down},
		{"user disabled", reply("WRONGPASS invalid username-password pair or user is disabled."), outage.Down},
		{"no auth", reply("NOAUTH Authentication required."), outage.Down},
		{"script error", reply("ERR user_script:1: Script attempted to access nonexistent global variable"), outage.Attempt},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Fatal("the fault produced no error")
			}
			if got := projection.Classify(c.err); got != c.want {
				t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
			}
		})
	}
}
