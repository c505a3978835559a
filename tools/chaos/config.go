package chaos

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/msgexchange/msgexchange/pkg/config"
)

// Dep is a dependency of the services that can have an outage.
type Dep string

// The dependencies, in the order the summary lists them.
const (
	DepInbox Dep = "inbox" // the shared MySQL table cminmsgs (LOCK TABLES … WRITE)
	DepRedis Dep = "redis" // the projection (the services' Redis user switched off)
	DepPG    Dep = "pg"    // the services' PostgreSQL database (ALLOW_CONNECTIONS false)
	DepKafka Dep = "kafka" // the broker process (stopped)
)

// AllDeps lists every dependency.
var AllDeps = []Dep{DepInbox, DepRedis, DepPG, DepKafka}

// Config shapes one chaos run. Start from Defaults or FromEnv.
type Config struct {
	// Window is how long faults are injected while the traffic drains. The long outages must
	// fit in it with a gap before, between and after them; if they do not, the window grows to
	// fit them (the summary says so).
	Window time.Duration
	// Seed drives the traffic, the fault schedule and every random choice of the harness.
	// Timing on a shared machine is not reproducible, the plan is.
	Seed int64
	// Flights sizes the generated day (about nine messages per flight).
	Flights int
	// Holes is the number of rolled-back inserts (each leaves an ID that never commits: a
	// permanent hole ingest waits MaxCommitDelay on, then releases).
	Holes int
	// LateCommits is the number of messages whose insert stays uncommitted for up to LateMax
	// while later rows commit around it.
	LateCommits int
	LateMax     time.Duration
	// LateArrivals is the number of FLOPs whose insert stays open until ingest released its
	// ID, so that the row is a late arrival processed after newer messages of its flight;
	// Replays the number of FLOPs made DEAD(EXHAUSTED) behind a held flight row and replayed
	// through control after later messages of the flight succeeded (docs/chaos.md, "Out of ID
	// order"). Each is placed where it can happen; the summary says how many were made.
	LateArrivals int
	Replays      int
	// MaxCommitDelay is pipeline.max-commit-delay of the chaos stack. It must exceed LateMax
	// with a margin: a late commit is meant to land while ingest still waits on its ID, so
	// that discovery stays in ID order and the clean run is a valid reference.
	MaxCommitDelay time.Duration
	// Long lists the dependencies that get one outage longer than the pump's whole retry
	// budget (LongOutage).
	Long []Dep
	// Failovers lists the dependencies failed over to a standby under traffic (EnvFailovers).
	Failovers []Failover
	// DrainTimeout bounds the wait, after the window, until every row is terminal, marked and
	// delivered; CleanTimeout bounds the fault-free reference run.
	DrainTimeout time.Duration
	CleanTimeout time.Duration
	// Bin is the directory of the built binaries.
	Bin string
	// LogDir receives the services' logs and the fault log.
	LogDir string
}

// Defaults returns the configuration of a run of the given window: traffic and fault counts
// scale with it, long outages of every dependency.
func Defaults(window time.Duration) Config {
	secs := int(window / time.Second)
	return Config{
		Window:         window,
		Seed:           time.Now().UnixNano() % 1_000_000,
		Flights:        min(max(20, secs*2/3), 400),
		Holes:          max(3, secs/30),
		LateCommits:    max(6, secs/15),
		LateMax:        1500 * time.Millisecond,
		LateArrivals:   max(2, secs/30),
		Replays:        max(1, secs/60),
		MaxCommitDelay: 4 * time.Second,
		Long:           slices.Clone(AllDeps),
		DrainTimeout:   3 * time.Minute,
		CleanTimeout:   3 * time.Minute,
	}
}

// Environment variables read by FromEnv.
const (
	EnvDuration = "MSGX_CHAOS_DURATION" // the window, a Go duration; default 60s
	EnvSeed     = "MSGX_CHAOS_SEED"     // default: from the clock, printed in the summary
	EnvLong     = "MSGX_CHAOS_LONG"     // all, none, or a list of inbox,redis,pg,kafka
	EnvFlights  = "MSGX_CHAOS_FLIGHTS"  // traffic size
	EnvBin      = "MSGX_CHAOS_BIN"      // prebuilt binaries (make chaos passes bin/)
)

// minWindow is the shortest window: every short fault kind gets its turn in it (the faults
// check requires each at least once), with the pauses between them.
const minWindow = 30 * time.Second

// DefaultWindow and DefaultLong are what a plain `go test` (and so `make test`) runs: one
// minute with a long outage of the broker only. The dispatcher treats a broker outage as a
// lane failure that spends no event's budget; the long outages of the inbox, Redis and
// PostgreSQL each take most of a minute on their own and are left to `make chaos`.
const DefaultWindow = 60 * time.Second

// DefaultLong is the long-outage list without MSGX_CHAOS_LONG.
var DefaultLong = []Dep{DepKafka}

// FromEnv reads the configuration from the environment (getenv is os.Getenv).
func FromEnv(getenv func(string) string) (Config, error) {
	window := DefaultWindow
	if v := getenv(EnvDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < minWindow || d > 2*time.Hour {
			return Config{}, fmt.Errorf("%s=%q: want a duration from %s to 2h", EnvDuration, v, minWindow)
		}
		window = d
	}
	c := Defaults(window)
	c.Long = slices.Clone(DefaultLong)
	if v := getenv(EnvLong); v != "" {
		long, err := ParseDeps(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvLong, err)
		}
		c.Long = long
	}
	if v := getenv(EnvSeed); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Config{}, fmt.Errorf("%s=%q: want an integer", EnvSeed, v)
		}
		c.Seed = s
	}
	if v := getenv(EnvFlights); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5000 {
			return Config{}, fmt.Errorf("%s=%q: want 1 to 5000", EnvFlights, v)
		}
		c.Flights = n
	}
	failovers, err := ParseFailovers(getenv(EnvFailovers))
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", EnvFailovers, err)
	}
	c.Failovers = failovers
	c.Bin = getenv(EnvBin)
	return c, nil
}

// ParseDeps reads "all", "none" or a comma-separated list of dependencies.
func ParseDeps(s string) ([]Dep, error) { return parseList(s, AllDeps, "dependency") }

// parseList reads "all", "none" (or nothing) or a comma-separated list of the names in all,
// each once.
func parseList[T ~string](s string, all []T, what string) ([]T, error) {
	switch strings.TrimSpace(s) {
	case "all":
		return slices.Clone(all), nil
	case "none", "":
		return nil, nil
	}
	var out []T
	for _, part := range strings.Split(s, ",") {
		d := T(strings.TrimSpace(part))
		if !slices.Contains(all, d) {
			names := make([]string, len(all))
			for i, a := range all {
				names[i] = string(a)
			}
			return nil, fmt.Errorf("unknown %s %q (want all, none, or a list of %s)", what, part, strings.Join(names, ", "))
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// validate refuses a configuration whose checks could not mean what they say.
func (c Config) validate() error {
	if c.Window < minWindow {
		return fmt.Errorf("window %s: at least %s", c.Window, minWindow)
	}
	if c.Flights < 1 || c.Holes < 0 || c.LateCommits < 0 || c.LateArrivals < 0 || c.Replays < 0 {
		return fmt.Errorf("flights %d, holes %d, late commits %d, late arrivals %d, replays %d: want flights ≥ 1 and no negative counts",
			c.Flights, c.Holes, c.LateCommits, c.LateArrivals, c.Replays)
	}
	// A late commit must land while ingest still waits on its ID (docs/chaos.md): otherwise
	// the row is a late arrival, processed out of ID order, and the clean run in ID order is
	// no reference. The margin absorbs a loaded machine's scheduling and commit latency.
	if c.MaxCommitDelay < c.LateMax+2*time.Second {
		return fmt.Errorf("max-commit-delay %s must exceed the longest late commit %s by at least 2s", c.MaxCommitDelay, c.LateMax)
	}
	if c.Bin == "" || c.LogDir == "" {
		return fmt.Errorf("bin and log directories are required")
	}
	return nil
}

// pipeline is the services' configuration the budgets are computed from: the defaults, which
// the chaos stack keeps for every retry parameter.
var pipeline = config.Default()

// RetryBudget is the pump's whole retry budget: the sum of the backoff steps
// (pipeline.backoff, 1+2+4+8+16 s by default).
func RetryBudget() time.Duration {
	var sum time.Duration
	for _, d := range pipeline.Pipeline.Backoff {
		sum += min(d, pipeline.Pipeline.BackoffCap)
	}
	return sum
}

// longMargin is how much longer than the budget a long outage lasts: a restarted pump's
// election, the first attempt's set-up and a loaded machine's scheduling come out of it.
const longMargin = 10 * time.Second

// LongOutage is how long the long outage of dep lasts: longer than the time the pump needs
// to spend every attempt on one message while dep is down, which is the retry budget plus,
// per attempt, the bound of the call that fails (an inbox read waits inbox.timeout on a
// locked table, a Redis call redis.timeout). A message that went DEAD(EXHAUSTED) during it
// was charged for the outage.
func LongOutage(dep Dep) time.Duration {
	attempts := time.Duration(pipeline.Pipeline.MaxAttempts)
	d := RetryBudget() + longMargin
	switch dep {
	case DepInbox:
		d += attempts * pipeline.Inbox.Timeout
	case DepRedis:
		d += attempts * pipeline.Redis.Timeout
	}
	return d
}
