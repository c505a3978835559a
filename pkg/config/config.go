// Package config loads the configuration every service shares: defaults from the parameter
// registry (docs/environment.md lists it), then an optional YAML file, then environment
// variables.
//
// Every parameter has one key, named by one rule: a section, a dot, and the parameter's name
// in lower-case words joined by dashes (pipeline.poll-interval, pg.dsn); the few settings of
// the whole process have no section (instance, shadow, shutdown-timeout). Each section is one
// struct of Config. The environment variable is MSGX_ + the key in upper case with '.' and
// '-' replaced by '_' (pipeline.poll-interval → MSGX_PIPELINE_POLL_INTERVAL). Keys spelled
// before the rule (pg-dsn, control-token, ...) are accepted as aliases for one release
// (docs/environment.md, "Renamed keys"); their variables did not change.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/msgexchange/msgexchange/pkg/retry"
)

// Config is the whole configuration, one field per key section. Services read the parts they
// need; Load validates only the sections of the service it loads for.
type Config struct {
	// Instance names this process in logs and the role's lock holder (instance).
	Instance string
	// Shadow forbids every write to the shared MySQL (markers and COUTMSGS) (shadow).
	Shadow bool
	// ShutdownTimeout bounds a graceful stop after SIGTERM (shutdown-timeout).
	ShutdownTimeout time.Duration

	Log         Log
	PG          PG
	MySQL       MySQL
	Inbox       Inbox
	Redis       Redis
	Kafka       Kafka
	Admin       Admin
	GRPC        GRPC
	HTTP        HTTP
	Control     Control
	Pipeline    Pipeline
	Schd        Schd
	Flight      Flight
	Retention   Retention
	Consistency Consistency
	Identity    Identity
	Airport     Airport
	Backfill    Backfill
	Codec       Codec
	Outbound    Outbound
	Req         Req
	Dispatcher  Dispatcher
	Tracing     Tracing

	// SecretFiles records which secrets came from a file (key → path), for start-up logs.
	SecretFiles map[string]string
	// Deprecated lists the old key spellings the configuration used, for a start-up warning.
	Deprecated []string
}

// Log holds log.*.
type Log struct {
	// Level is debug, info, warn or error.
	Level string
}

// PG holds pg.*: the service's PostgreSQL.
type PG struct {
	DSN string
	// MaxConns is the size of a service's pool (the leader's lock connection is not part of it).
	MaxConns int
}

// MySQL holds mysql.*: the shared MySQL of the inbox (CMINMSGS) and the outbound table
// (COUTMSGS).
type MySQL struct {
	DSN string
}

// Inbox holds inbox.*.
type Inbox struct {
	// Timeout bounds every call to the shared MySQL. It stays well below the leader lease
	// (10 s), since the backfill holds its lock connection in a transaction around the marker
	// write.
	Timeout time.Duration
}

// Redis holds redis.*: the projection's Redis.
type Redis struct {
	URL string
	// Prefix starts every Redis key this system writes (tests give each run its own).
	Prefix string
	// Timeout bounds every Redis call.
	Timeout time.Duration
	// Sentinel names a master under Redis Sentinel, in place of URL.
	Sentinel RedisSentinel
}

// RedisSentinel holds redis.sentinel-*: a master found through Sentinel (go-redis's failover
// client). Set means Master is set; then URL stays empty (a rule in validate.go).
type RedisSentinel struct {
	Master string
	Addrs  []string
	// SentinelPassword authenticates to the sentinels (their requirepass), Username and
	// Password to the master and replicas (the ACL user or requirepass of the data nodes).
	SentinelPassword string
	Username         string
	Password         string
	DB               int
	// TLS speaks TLS to the sentinels and the data nodes alike, verified against the system's
	// roots, as rediss:// does for a single server.
	TLS bool
}

// Set reports whether the Sentinel shape is configured.
func (s RedisSentinel) Set() bool { return s.Master != "" }

// Kafka holds kafka.*.
type Kafka struct {
	Brokers []string
	// TopicMsg and TopicSchd are the topics of the two outbox targets.
	TopicMsg  string
	TopicSchd string
	// MaxMessageBytes is the largest record batch the brokers accept (their
	// message.max.bytes): the dispatcher refuses a record that cannot fit in one, instead of
	// sending it and retrying the broker's refusal.
	MaxMessageBytes int
	// TransactionalID is the dispatcher's transactional id prefix, the same for every
	// instance: each term's producer fences the previous holder's.
	TransactionalID string
	// SendTimeout bounds one publish round of the dispatcher; records without an answer by
	// then count as a failed attempt.
	SendTimeout time.Duration
	// TLS and SASL secure the connections to the brokers (docs/dispatcher.md, "Secured
	// connections").
	TLS  KafkaTLS
	SASL KafkaSASL
}

// KafkaTLS is kafka.tls*: TLS to the brokers, their certificates always verified.
type KafkaTLS struct {
	Enabled bool
	// CA is a PEM bundle of the CAs that sign the brokers' certificates; empty: the system's.
	CA string
	// ServerName is the name the brokers' certificates are verified against, when it is not
	// the host of the bootstrap address (a load balancer, an IP address).
	ServerName string
	// Cert and Key are the client certificate and its key (PEM files) for mutual TLS.
	Cert, Key string
}

// KafkaSASL is kafka.sasl*: the dispatcher's principal, authenticated over TLS.
type KafkaSASL struct {
	// Mechanism is empty (no SASL) or one of SASLMechanisms.
	Mechanism string
	Username  string
	Password  string
}

// SASLMechanisms are the SASL mechanisms kafka.sasl-mechanism takes.
func SASLMechanisms() []string { return []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} }

// Admin holds admin.*: every service's admin listener (metrics, health).
type Admin struct {
	Addr string
}

// GRPC holds grpc.*: control's gRPC listener.
type GRPC struct {
	Addr string
}

// HTTP holds http.*: ingest's compat HTTP entry.
type HTTP struct {
	Addr string
	// MaxBody bounds the request body; MaxInFlight the requests served at once (503 with
	// Retry-After past it).
	MaxBody     int
	MaxInFlight int
	// TLSCert and TLSKey make the entry serve HTTPS.
	TLSCert string
	TLSKey  string
	// Token is the entry's bearer token; Insecure serves it without one (development only).
	// With neither, the entry is not served.
	Token    string
	Insecure bool
}

// Control holds control.*: the control API.
type Control struct {
	// Token is the operator token (every RPC); ReaderToken the reader token (the reads only).
	// The operator token kept the old single token's name, so a deployment that set only
	// MSGX_CONTROL_TOKEN keeps full access.
	Token       string
	ReaderToken string
	// Tokens are the named tokens (control.tokens, ParseCallerTokens): each caller's name is
	// what the audit and requested_by show instead of the role's token name.
	Tokens string
	// RequireComment refuses a mutating call (not a dry run) without a comment, so every change
	// in the audit says why.
	RequireComment bool
	// OperatorSubjects and ReaderSubjects grant a role by the verified client certificate's
	// subject (mTLS), in Go's RFC 2253 form ("CN=ops,O=Airport").
	OperatorSubjects []string
	ReaderSubjects   []string
	// Insecure lets control start without a token (development only).
	Insecure bool
	// TLSCert and TLSKey are PEM files that make the gRPC listener serve TLS; ClientCA, a PEM
	// bundle, makes it require and verify client certificates (mTLS).
	TLSCert  string
	TLSKey   string
	ClientCA string
	// CallTimeout is the server-side deadline of every RPC; ReadTimeout the statement timeout
	// of its reads; PoolWait how long a call waits for a free pool connection before it is
	// refused as UNAVAILABLE.
	CallTimeout time.Duration
	ReadTimeout time.Duration
	PoolWait    time.Duration
	// Bounds are the server's global limits: what all clients together can make it hold,
	// whatever their credentials (docs/security.md, "Control API: limits").
	Bounds
}

// Bounds holds the control server's global bounds. Their defaults keep control well under the
// chart's memory limit (256 Mi) with every bound reached at once.
type Bounds struct {
	// MaxConnections bounds the open gRPC connections; a connection past it is closed as soon
	// as it is accepted (control.max-connections).
	MaxConnections int
	// MaxAnonymousCalls bounds the calls of the credential-free services (health, reflection)
	// in flight, over all connections (control.max-anonymous-calls).
	MaxAnonymousCalls int
	// MaxCalls bounds the authenticated calls of the API in flight, over all connections
	// (control.max-calls).
	MaxCalls int
	// MaxConnectionAge is how long a connection may live before the server asks the client to
	// reconnect (GOAWAY); MaxConnectionAgeGrace is how long its calls then have to finish.
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration
	// MaxBodyChars bounds the message text one response carries: GetMessage truncates longer
	// text and GetMessageBody returns at most this many characters per call
	// (control.max-body-chars).
	MaxBodyChars int
	// PageBytes bounds the bytes of one page of a list or history answer, and of GetMessage's
	// flight changes and events: a page stops before the row that would pass it (it holds one
	// row at least), and a history value or event payload longer than an eighth of it is cut,
	// its length and digest kept (control.page-bytes).
	PageBytes int
	// MaxQueuedBytesPerConnection and MaxQueuedBytes bound the response bytes queued for
	// clients that have not read them, on one connection and over all; the first is also the
	// largest response (control.max-queued-bytes-per-connection, control.max-queued-bytes).
	MaxQueuedBytesPerConnection int
	MaxQueuedBytes              int
	// SendStallTimeout is how long a connection's queued responses may make no progress
	// before the connection is closed (control.send-stall-timeout).
	SendStallTimeout time.Duration
}

// Pipeline holds pipeline.*.
type Pipeline struct {
	PollInterval time.Duration
	// BusyPollInterval is ingest's wait after a round that moved the watermark (R-INGEST-13);
	// above PollInterval, PollInterval applies.
	BusyPollInterval    time.Duration
	ClaimBatch          int
	MaxCommitDelay      time.Duration
	LateDetectPeriod    time.Duration
	MaxAttempts         int
	Backoff             []time.Duration
	BackoffCap          time.Duration
	BackfillPeriod      time.Duration
	BackfillBackoff     time.Duration
	BackfillBackoffCap  time.Duration
	BackfillBatch       int
	OverdueBackfill     time.Duration // R
	BackfillMaxAttempts int
	HeadAgeAlert        time.Duration
	EventRetention      time.Duration
	ProcRetention       time.Duration
	// ReqRetention is how long closed (DONE, EXPIRED) req_track rows are kept.
	ReqRetention time.Duration
	// LateWatchRetention is how long a released hole is watched for late arrivals; unset in the
	// configuration, it is OverdueBackfill (R).
	LateWatchRetention time.Duration
	// CutoverWatermark is empty (seeding is explicit) or min, zero, max or an inbox ID.
	CutoverWatermark string
	// StepTimeout bounds one message's processing step in the pump; the inbox and Redis calls
	// inside it have their own, shorter bounds.
	StepTimeout time.Duration
	// RecordTimeout bounds writing a message's outcome and releasing the pipeline lock.
	RecordTimeout time.Duration
	// BacklogInterval is how often the pump refreshes its backlog gauges.
	BacklogInterval time.Duration
}

// Schd holds schd.*: schedule snapshots and their publication.
type Schd struct {
	FlushPeriod      time.Duration
	FlushLimit       int
	SnapLogRetention time.Duration
	// BatchSize bounds the changed flights a schedule snapshot (SCHD DNLD/RESP) writes per
	// transaction; a code-share group is never split (docs/schedule.md).
	BatchSize int
	// DailyRequest registers the next day's RQFD every day at DailyRequestAt (a time of day,
	// airport time) from the active control instance (schd.daily-request-at; off when empty).
	DailyRequest   bool
	DailyRequestAt time.Duration
}

// Flight holds flight.*: the flight history sweep's rule (R-RETAIN-4).
type Flight struct {
	HistoryRetention time.Duration
	QuietPeriod      time.Duration
}

// Retention holds retention.*: each sweep deletes at most Batch rows per statement and waits a
// random pause of up to Pause between two full batches, so that a sweep of a million expired
// rows never holds locks or I/O long enough to stall the pipeline.
type Retention struct {
	Batch int
	Pause time.Duration // 0: no pause
	// Jobs is how long a republish or projection rebuild is kept after it ended (DONE,
	// CANCELLED); open jobs are never deleted.
	Jobs time.Duration
}

// Consistency holds consistency-check.*: the Redis projection's consistency sentinel
// (docs/redis.md).
type Consistency struct {
	OnStartup   bool
	SampleRatio float64
	// FullBelow: a start-up check compares every flight while there are fewer than this many.
	FullBelow int
	Period    time.Duration
	// RebuildOnLoss: the backfill rebuilds the whole projection on its own when Redis lost the
	// projection's sentinel key (docs/redis.md, "Redis lost its data").
	RebuildOnLoss bool
}

// Identity holds identity.*.
type Identity struct {
	IncludeDayBoundary bool
}

// Airport holds airport.*.
type Airport struct {
	// Zone is the zone of every SIS time (R-FACT-4).
	Zone *time.Location
	// OperationDayCutover is the local time of day before which a flight belongs to the
	// previous operation day (0 = midnight).
	OperationDayCutover time.Duration
}

// Backfill holds backfill.*.
type Backfill struct {
	// MarkerStatus is written to CMINMSGS_STATUS with the processed marker (R-BACKFILL-9).
	MarkerStatus string
}

// Codec holds codec.*: what the SIS decoder accepts, the message, its nesting and each value
// (element text, attribute) in bytes.
type Codec struct {
	MaxBytes int
	MaxDepth int
	MaxText  int
}

// Outbound holds outbound.*: the requests this system writes to COUTMSGS.
type Outbound struct {
	// Sender is this system's SNDR.
	Sender string
	// RoutingID is COUTMSGS.ROUTINGID of the requests written.
	RoutingID string
}

// Req holds req.*: the upstream requests (RQFD, RQRD) and their lifecycle (docs/control.md,
// "Upstream requests").
type Req struct {
	// Timeout is how long a SENT request waits for its answer before it is EXPIRED.
	Timeout time.Duration
	// CallerPerMinute and CallerBurst rate-limit the registrations of each caller; MaxOpen caps
	// the open requests and DayWindow bounds an RQFD's days around today (R-REQ-6).
	CallerPerMinute int
	CallerBurst     int
	MaxOpen         int
	DayWindow       int
}

// Dispatcher holds dispatcher.*.
type Dispatcher struct {
	// Batch bounds the KAFKA:msg events one round reads.
	Batch int
	// Gather is the least time between the starts of two rounds of the KAFKA:msg lane that a
	// wake-up starts: events committed meanwhile go in one round.
	Gather time.Duration
	// ReadTimeout bounds one read of the outbox (a batch, the lag gauges).
	ReadTimeout time.Duration
	// StatsPeriod is how often the dispatcher refreshes its outbox gauges.
	StatsPeriod time.Duration
}

// Tracing holds tracing.*.
type Tracing struct {
	// UIURL is a trace's address in the tracing UI with {trace_id} where the ID goes
	// (GetMessage's trace_url); empty for none.
	UIURL string
}

// Env is a process environment by variable name.
type Env map[string]string

// Environ is the process's environment.
func Environ() Env {
	env := Env{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// FromEnv loads the configuration of service from the process environment; MSGX_CONFIG_FILE
// names an optional YAML file.
func FromEnv(service Service) (Config, error) { return Load(Environ(), service) }

// Load builds the configuration of service: defaults, then the YAML file named by
// MSGX_CONFIG_FILE (a flat map of keys, with or without the "msgx." prefix), then the MSGX_*
// variables. An unknown key or MSGX_ variable is refused with the closest known key, so a
// misspelled setting never leaves its default in place unnoticed. Only the parameters service
// reads are checked against their limits and rules. It returns every problem found, not only
// the first.
func Load(env Env, service Service) (Config, error) {
	var c Config
	var errs []error
	ps := registry()
	final := map[string]string{} // the value each key ended with, for its limit
	for _, p := range ps {
		if err := p.set.fn(&c, p.def); err != nil {
			errs = append(errs, fmt.Errorf("default of %s: %w", p.key, err))
		}
		final[p.key] = p.def
	}
	apply := func(p param, v string, where func() string) {
		final[p.key] = v
		if err := p.set.fn(&c, v); err != nil && p.by&service != 0 {
			errs = append(errs, fmt.Errorf("%s: %w", where(), err))
		}
	}
	if path := env[configFileVar]; path != "" {
		fileValues, err := readFile(path)
		if err != nil {
			return c, err
		}
		byKey := map[string]param{}
		for _, p := range ps {
			byKey[p.key] = p
			for _, a := range p.aliases {
				byKey[a] = p
			}
		}
		for _, k := range sortedKeys(fileValues) {
			p, ok := byKey[k]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unknown key %q%s", path, k, suggest(k, ps, func(p param) string { return p.key })))
				continue
			}
			if k != p.key {
				c.Deprecated = append(c.Deprecated, fmt.Sprintf("%s: key %q is now %q", path, k, p.key))
			}
			apply(p, fileValues[k], func() string { return fmt.Sprintf("%s: %s=%q", path, k, fileValues[k]) })
		}
	}
	for _, p := range ps {
		name := EnvName(p.key)
		if v, ok := env[name]; ok {
			apply(p, v, func() string { return fmt.Sprintf("%s=%q", name, v) })
		}
	}
	errs = append(errs, unknownVariables(env, ps)...)
	errs = append(errs, c.readSecretFiles(service)...)
	if len(errs) == 0 {
		errs = append(errs, check(c, final, ps, service)...)
	}
	// Resolved here, so that no service repeats the rule: unset means R.
	c.Pipeline.LateWatchRetention = cmp.Or(c.Pipeline.LateWatchRetention, c.Pipeline.OverdueBackfill)
	if c.Instance == "" {
		host, _ := os.Hostname()
		c.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
	}
	return c, nil
}

// Default returns the configuration with every default and no environment applied.
func Default() Config {
	c, err := Load(nil, AllServices)
	if err != nil {
		panic(err) // the defaults are part of the program
	}
	return c
}

// SecretValues are the configured credentials, for redacting them from logs.
func (c Config) SecretValues() []string {
	var out []string
	for _, sk := range secrets() {
		if v := *sk.field(&c); v != "" {
			out = append(out, v)
		}
	}
	// Each named token alone too: a log line holding one of them holds no whole list.
	if ts, err := ParseCallerTokens(c.Control.Tokens); err == nil {
		for _, t := range ts {
			out = append(out, t.Token)
		}
	}
	return out
}

// Retry is the retry policy of messages, events and requests: pipeline.max-attempts,
// pipeline.backoff capped at pipeline.backoff-cap.
func (p Pipeline) Retry() retry.Policy {
	return retry.Policy{MaxAttempts: p.MaxAttempts, Backoff: p.Backoff, Cap: p.BackoffCap}
}

// BackfillRetry is the retry policy of marker writes: pipeline.backfill-backoff doubled up to
// pipeline.backfill-backoff-cap, with no attempt limit: a marker is retried until R, and
// pipeline.backfill-max-attempts is only an alert threshold.
func (p Pipeline) BackfillRetry() retry.Policy {
	return retry.Policy{Backoff: retry.Doubling(p.BackfillBackoff, p.BackfillBackoffCap), Cap: p.BackfillBackoffCap}
}

func readFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	out := map[string]string{}
	for k, v := range raw {
		out[strings.TrimPrefix(k, "msgx.")] = fmt.Sprint(v)
	}
	return out, nil
}
