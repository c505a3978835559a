// Package config loads the configuration every service shares: defaults from the parameter
// table of docs/environment.md, then an optional YAML file, then environment variables. Every parameter has
// one key (its name in docs/environment.md, without the "msgx." prefix) and one environment variable derived
// from it: MSGX_ + the key in upper case with '.' and '-' replaced by '_'
// (pipeline.poll-interval → MSGX_PIPELINE_POLL_INTERVAL).
package config

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/msgexchange/msgexchange/pkg/logging"
	"github.com/msgexchange/msgexchange/pkg/retry"
)

// Config is the whole configuration. Services read the parts they need.
type Config struct {
	// Connections and listeners.
	PGDSN    string
	MySQLDSN string
	RedisURL string
	// RedisPrefix starts every Redis key this system writes (tests give each run its own).
	RedisPrefix  string
	KafkaBrokers []string
	AdminAddr    string
	HTTPAddr     string
	GRPCAddr     string
	// ControlToken is the control API's operator token (every RPC); ControlReaderToken the
	// reader token (the reads only). The operator token kept the old single token's name, so a
	// deployment that set only MSGX_CONTROL_TOKEN keeps full access.
	ControlToken       string
	ControlReaderToken string
	// ControlOperatorSubjects and ControlReaderSubjects grant a role by the verified client
	// certificate's subject (mTLS), in Go's RFC 2253 form ("CN=ops,O=Airport").
	ControlOperatorSubjects []string
	ControlReaderSubjects   []string
	// ControlInsecure lets control start without a token (development only).
	ControlInsecure bool
	// ControlTLSCert and ControlTLSKey are PEM files that make control's gRPC listener serve
	// TLS; ControlClientCA, a PEM bundle, makes it require and verify client certificates (mTLS).
	ControlTLSCert  string
	ControlTLSKey   string
	ControlClientCA string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	Instance string

	Pipeline Pipeline
	Schd     Schd
	// Retention bounds the retention sweeps' work (docs/performance.md).
	Retention Retention
	// Consistency is the Redis projection's consistency sentinel (docs/redis.md).
	Consistency Consistency
	// Requests are the upstream requests (RQFD, RQRD) and their lifecycle.
	Requests Requests

	IdentityIncludeDayBoundary bool
	// AirportZone is the zone of every SIS time (R-FACT-4).
	AirportZone *time.Location
	// OperationDayCutover is the local time of day before which a flight belongs to the previous
	// operation day (0 = midnight).
	OperationDayCutover time.Duration
	// Shadow forbids every write to the shared MySQL (markers and COUTMSGS).
	Shadow bool
	// MarkerStatus is written to CMINMSGS_STATUS with the processed marker (R-BACKFILL-9).
	MarkerStatus string
	// CodecMaxBytes, CodecMaxDepth and CodecMaxText bound what the SIS decoder accepts: the
	// message, its nesting and each value (element text, attribute) in bytes.
	CodecMaxBytes int
	CodecMaxDepth int
	CodecMaxText  int
	// Kafka topics for the two outbox targets.
	TopicMsg  string
	TopicSchd string
	// KafkaMaxMessageBytes is the largest record batch the brokers accept (their
	// message.max.bytes): the dispatcher refuses a record that cannot fit in one, instead of
	// sending it and retrying the broker's refusal.
	KafkaMaxMessageBytes int
	// KafkaTransactionalID is the dispatcher's transactional id prefix, the same for every
	// instance: each term's producer fences the previous holder's.
	KafkaTransactionalID string
	// OutboundSender is this system's SNDR in outbound requests.
	OutboundSender string
	// ShutdownTimeout bounds a graceful stop after SIGTERM.
	ShutdownTimeout time.Duration
	// HTTPMaxBody bounds the compat HTTP request body; HTTPMaxInFlight the requests it serves
	// at once (503 with Retry-After past it).
	HTTPMaxBody     int
	HTTPMaxInFlight int
	// HTTPTLSCert and HTTPTLSKey make the compat entry serve HTTPS.
	HTTPTLSCert string
	HTTPTLSKey  string
	// PGMaxConns is the size of a service's PostgreSQL pool (the leader's lock connection is
	// not part of it).
	PGMaxConns int
	// ControlCallTimeout is the server-side deadline of every control RPC; ControlReadTimeout
	// the statement timeout of its reads; ControlPoolWait how long a call waits for a free
	// pool connection before it is refused as UNAVAILABLE.
	ControlCallTimeout time.Duration
	ControlReadTimeout time.Duration
	ControlPoolWait    time.Duration
	// ControlBounds are the control server's global limits: what all clients together can make
	// it hold, whatever their credentials (docs/security.md, "Control API: limits").
	ControlBounds ControlBounds
	// SecretFiles records which secrets came from a file (key → path), for start-up logs.
	SecretFiles map[string]string
	// HTTPToken is the bearer token of ingest's compat HTTP entry; HTTPInsecure serves it
	// without one (development only). With neither, the entry is not served.
	HTTPToken    string
	HTTPInsecure bool
	// InboxTimeout bounds every call to the shared MySQL. It stays well below the leader
	// lease (10 s), since the backfill holds its lock connection in a transaction around the
	// marker write.
	InboxTimeout time.Duration
	// RedisTimeout bounds every Redis call.
	RedisTimeout time.Duration
	// KafkaSendTimeout bounds one publish round of the dispatcher; records without an answer
	// by then count as a failed attempt.
	KafkaSendTimeout time.Duration
	// DispatcherBatch bounds the KAFKA:msg events one dispatcher round reads.
	DispatcherBatch int
	// DispatcherGather is the least time between the starts of two rounds of the KAFKA:msg
	// lane that a wake-up starts: events committed meanwhile go in one round.
	DispatcherGather time.Duration
	// TracingUIURL is a trace's address in the tracing UI with {trace_id} where the ID goes
	// (GetMessage's trace_url); empty for none.
	TracingUIURL string
}

// ControlBounds holds the control server's global bounds. Their defaults keep control well
// under the chart's memory limit (256 Mi) with every bound reached at once.
type ControlBounds struct {
	// MaxConnections bounds the open gRPC connections; a connection past it is closed as
	// soon as it is accepted (control.max-connections).
	MaxConnections int
	// MaxAnonymousCalls bounds the calls of the credential-free services (health, reflection)
	// in flight, over all connections (control.max-anonymous-calls).
	MaxAnonymousCalls int
	// MaxCalls bounds the authenticated calls of the API in flight, over all connections
	// (control.max-calls).
	MaxCalls int
	// MaxConnectionAge is how long a connection may live before the server asks the client
	// to reconnect (GOAWAY); MaxConnectionAgeGrace is how long its calls then have to finish.
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration
	// MaxBodyChars bounds the message text one response carries: GetMessage truncates
	// longer text and GetMessageBody returns at most this many characters per call
	// (control.max-body-chars).
	MaxBodyChars int
}

// Bounds of control.max-body-chars: below the lower one a message's head would not show its
// type; above the upper one a chunk of 4-byte characters could pass the 4 MiB a gRPC client
// accepts by default.
const (
	MinControlBodyChars = 4 << 10
	MaxControlBodyChars = 512 << 10
)

// Pipeline holds the msgx.pipeline.* parameters.
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
}

// Retention holds the msgx.retention.* parameters: each sweep deletes at most Batch rows per
// statement and waits a random pause of up to Pause between two full batches, so that a sweep
// of a million expired rows never holds locks or I/O long enough to stall the pipeline.
type Retention struct {
	Batch int
	Pause time.Duration // 0: no pause
}

// Schd holds the msgx.schd.* parameters.
type Schd struct {
	FlushPeriod      time.Duration
	FlushLimit       int
	SnapLogRetention time.Duration
	// BatchSize bounds the changed flights a schedule snapshot (SCHD DNLD/RESP) writes per
	// transaction; a code-share group is never split (docs/schedule.md).
	BatchSize int
	// HistoryRetention and QuietPeriod are the flight history sweep's rule (R-RETAIN-4).
	HistoryRetention time.Duration
	QuietPeriod      time.Duration
}

// Consistency holds the msgx.consistency-check.* parameters.
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

// Requests holds the upstream request parameters (req.*, outbound.routing-id and the daily
// schedule request; docs/control.md, "Upstream requests").
type Requests struct {
	// Timeout is how long a SENT request waits for its answer before it is EXPIRED (req.timeout).
	Timeout time.Duration
	// RoutingID is COUTMSGS.ROUTINGID of the requests written (outbound.routing-id).
	RoutingID string
	// Daily registers the next day's RQFD every day at DailyAt (a time of day, airport time)
	// from the active control instance (schd.daily-request-at; off when empty).
	Daily   bool
	DailyAt time.Duration
	// CallerPerMinute and CallerBurst rate-limit the registrations of each caller
	// (req.caller-per-minute, req.caller-burst); MaxOpen caps the open requests (req.max-open)
	// and DayWindow bounds an RQFD's days around today (req.day-window), R-REQ-6.
	CallerPerMinute int
	CallerBurst     int
	MaxOpen         int
	DayWindow       int
}

// param binds one key to its default and its field.
type param struct {
	key string
	def string
	set setter
}

// setter parses a value into its field; kind says what values it takes.
type setter struct {
	kind Kind
	fn   func(c *Config, v string) error
}

// Kind is the type of value a parameter takes. The chart's values schema is generated from it
// (tools/chartcheck), so a value of the wrong type is refused by `helm install` already.
type Kind string

// The kinds of parameter values.
const (
	KindString    Kind = "string"
	KindDuration  Kind = "duration" // a Go duration or a whole number of days (ParseDuration)
	KindInteger   Kind = "integer"
	KindNumber    Kind = "number"
	KindBoolean   Kind = "boolean" // what strconv.ParseBool accepts
	KindList      Kind = "list"    // comma-separated
	KindLevel     Kind = "level"   // a log level (logging.ParseLevel)
	KindTimeZone  Kind = "time-zone"
	KindTimeOfDay Kind = "time-of-day" // HH:MM
)

// custom is a setter of its own parsing.
func custom(kind Kind, fn func(c *Config, v string) error) setter { return setter{kind: kind, fn: fn} }

// Param describes one parameter: its key, its default (the empty string may mean "unset") and
// the kind of value it takes.
type Param struct {
	Key     string
	Default string
	Kind    Kind
	// Limit is the range validate holds the value to; zero when it has none of its own.
	Limit Limit
}

// Params lists every parameter, in the registry's order.
func Params() []Param {
	ps := params()
	lim := limits()
	out := make([]Param, len(ps))
	for i, p := range ps {
		out[i] = Param{Key: p.key, Default: p.def, Kind: p.set.kind, Limit: lim[p.key]}
	}
	return out
}

func params() []param {
	return []param{
		// No default connection: a default would be a superuser on localhost, and a forgotten
		// setting must stop the service with the variable's name instead.
		{key: "pg-dsn", def: "", set: str(func(c *Config) *string { return &c.PGDSN })},
		{key: "mysql-dsn", def: "", set: str(func(c *Config) *string { return &c.MySQLDSN })},
		{key: "redis-url", def: "", set: str(func(c *Config) *string { return &c.RedisURL })},
		{key: "pg.max-conns", def: "10", set: num(func(c *Config) *int { return &c.PGMaxConns })},
		{key: "redis-prefix", def: "msgx:", set: str(func(c *Config) *string { return &c.RedisPrefix })},
		{key: "kafka-brokers", def: "", set: custom(KindList, func(c *Config, v string) error { c.KafkaBrokers = splitList(v); return nil })},
		// Listeners default to loopback: reaching one from the network is a deployment's
		// explicit choice (the chart binds admin to the pod IP).
		{key: "admin-addr", def: "127.0.0.1:9090", set: str(func(c *Config) *string { return &c.AdminAddr })},
		{key: "http-addr", def: "127.0.0.1:8080", set: str(func(c *Config) *string { return &c.HTTPAddr })},
		{key: "grpc-addr", def: "127.0.0.1:9000", set: str(func(c *Config) *string { return &c.GRPCAddr })},
		{key: "control-token", def: "", set: str(func(c *Config) *string { return &c.ControlToken })},
		{key: "control-reader-token", def: "", set: str(func(c *Config) *string { return &c.ControlReaderToken })},
		{key: "control-operator-subjects", def: "", set: custom(KindList, func(c *Config, v string) error {
			c.ControlOperatorSubjects = splitSubjects(v)
			return nil
		})},
		{key: "control-reader-subjects", def: "", set: custom(KindList, func(c *Config, v string) error {
			c.ControlReaderSubjects = splitSubjects(v)
			return nil
		})},
		{key: "control.call-timeout", def: "10s", set: dur(func(c *Config) *time.Duration { return &c.ControlCallTimeout })},
		{key: "control.read-timeout", def: "5s", set: dur(func(c *Config) *time.Duration { return &c.ControlReadTimeout })},
		{key: "control.pool-wait", def: "2s", set: dur(func(c *Config) *time.Duration { return &c.ControlPoolWait })},
		// The control server's global bounds (ControlBounds, docs/security.md).
		{key: "control.max-connections", def: "128", set: num(func(c *Config) *int { return &c.ControlBounds.MaxConnections })},
		{key: "control.max-anonymous-calls", def: "128", set: num(func(c *Config) *int { return &c.ControlBounds.MaxAnonymousCalls })},
		{key: "control.max-calls", def: "64", set: num(func(c *Config) *int { return &c.ControlBounds.MaxCalls })},
		{key: "control.max-connection-age", def: "30m", set: dur(func(c *Config) *time.Duration { return &c.ControlBounds.MaxConnectionAge })},
		{key: "control.max-connection-age-grace", def: "1m", set: dur(func(c *Config) *time.Duration { return &c.ControlBounds.MaxConnectionAgeGrace })},
		{key: "control.max-body-chars", def: "262144", set: num(func(c *Config) *int { return &c.ControlBounds.MaxBodyChars })},
		{key: "control-insecure", def: "false", set: boolean(func(c *Config) *bool { return &c.ControlInsecure })},
		{key: "control-tls-cert", def: "", set: str(func(c *Config) *string { return &c.ControlTLSCert })},
		{key: "control-tls-key", def: "", set: str(func(c *Config) *string { return &c.ControlTLSKey })},
		{key: "control-client-ca", def: "", set: str(func(c *Config) *string { return &c.ControlClientCA })},
		{key: "log-level", def: "info", set: custom(KindLevel, func(c *Config, v string) error {
			c.LogLevel = v
			_, err := logging.ParseLevel(v)
			return err
		})},
		{key: "instance", def: "", set: str(func(c *Config) *string { return &c.Instance })},

		{key: "pipeline.poll-interval", def: "1s", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.PollInterval })},
		{key: "pipeline.busy-poll-interval", def: "100ms", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BusyPollInterval })},
		{key: "pipeline.claim-batch", def: "500", set: num(func(c *Config) *int { return &c.Pipeline.ClaimBatch })},
		{key: "pipeline.max-commit-delay", def: "5m", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.MaxCommitDelay })},
		{key: "pipeline.late-detect-period", def: "1m", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.LateDetectPeriod })},
		{key: "pipeline.late-watch-retention", def: "", set: custom(KindDuration, func(c *Config, v string) error {
			if strings.TrimSpace(v) == "" {
				c.Pipeline.LateWatchRetention = 0 // R
				return nil
			}
			d, err := ParseDuration(v)
			if err == nil && d <= 0 {
				err = fmt.Errorf("must be positive (or empty for pipeline.overdue-backfill)")
			}
			c.Pipeline.LateWatchRetention = d
			return err
		})},
		{key: "pipeline.max-attempts", def: "5", set: num(func(c *Config) *int { return &c.Pipeline.MaxAttempts })},
		{key: "pipeline.backoff", def: "1s,2s,4s,8s,16s", set: custom(KindList, func(c *Config, v string) error {
			var out []time.Duration
			for _, s := range splitList(v) {
				d, err := ParseDuration(s)
				if err != nil {
					return err
				}
				out = append(out, d)
			}
			c.Pipeline.Backoff = out
			return nil
		})},
		{key: "pipeline.backoff-cap", def: "60s", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BackoffCap })},
		{key: "pipeline.backfill-period", def: "30s", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BackfillPeriod })},
		{key: "pipeline.backfill-backoff", def: "30s", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BackfillBackoff })},
		{key: "pipeline.backfill-backoff-cap", def: "15m", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BackfillBackoffCap })},
		{key: "pipeline.backfill-batch", def: "200", set: num(func(c *Config) *int { return &c.Pipeline.BackfillBatch })},
		{key: "pipeline.overdue-backfill", def: "30d", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.OverdueBackfill })},
		{key: "pipeline.backfill-max-attempts", def: "20", set: num(func(c *Config) *int { return &c.Pipeline.BackfillMaxAttempts })},
		{key: "pipeline.head-age-alert", def: "10m", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.HeadAgeAlert })},
		{key: "pipeline.event-retention", def: "7d", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.EventRetention })},
		{key: "pipeline.proc-retention", def: "1d", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.ProcRetention })},
		{key: "pipeline.req-retention", def: "30d", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.ReqRetention })},
		{key: "pipeline.cutover-watermark", def: "", set: str(func(c *Config) *string { return &c.Pipeline.CutoverWatermark })},

		{key: "schd.flush-period", def: "3s", set: dur(func(c *Config) *time.Duration { return &c.Schd.FlushPeriod })},
		{key: "schd.flush-limit", def: "500", set: num(func(c *Config) *int { return &c.Schd.FlushLimit })},
		{key: "schd.batch-size", def: "200", set: num(func(c *Config) *int { return &c.Schd.BatchSize })},
		{key: "schd.snap-log-retention", def: "90d", set: dur(func(c *Config) *time.Duration { return &c.Schd.SnapLogRetention })},
		{key: "flight.history-retention", def: "3d", set: dur(func(c *Config) *time.Duration { return &c.Schd.HistoryRetention })},
		{key: "flight.quiet-period", def: "2d", set: dur(func(c *Config) *time.Duration { return &c.Schd.QuietPeriod })},

		// The retention sweeps' batch bound and pause; their retention periods are above.
		{key: "retention.batch", def: "500", set: num(func(c *Config) *int { return &c.Retention.Batch })},
		{key: "retention.pause", def: "1s", set: dur(func(c *Config) *time.Duration { return &c.Retention.Pause })},

		{key: "consistency-check.on-startup", def: "true", set: boolean(func(c *Config) *bool { return &c.Consistency.OnStartup })},
		{key: "consistency-check.daily-sample-ratio", def: "0.01", set: custom(KindNumber, func(c *Config, v string) error {
			r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || r <= 0 || r > 1 {
				return fmt.Errorf("not a ratio in (0, 1]")
			}
			c.Consistency.SampleRatio = r
			return nil
		})},
		{key: "consistency-check.full-below", def: "50000", set: num(func(c *Config) *int { return &c.Consistency.FullBelow })},
		{key: "consistency-check.period", def: "24h", set: dur(func(c *Config) *time.Duration { return &c.Consistency.Period })},

		// A Redis that lost its data (FLUSHALL, a restart without persistence) is found by the
		// projection's sentinel key and rebuilt from PostgreSQL without waiting for an operator.
		{key: "consistency-check.rebuild-on-loss", def: "true", set: boolean(func(c *Config) *bool { return &c.Consistency.RebuildOnLoss })},
		{key: "identity.include-day-boundary", def: "false", set: boolean(func(c *Config) *bool { return &c.IdentityIncludeDayBoundary })},
		{key: "airport.time-zone", def: "Asia/Shanghai", set: custom(KindTimeZone, func(c *Config, v string) error {
			loc, err := time.LoadLocation(v)
			if err != nil {
				return err
			}
			c.AirportZone = loc
			return nil
		})},
		{key: "airport.operation-day-cutover", def: "0s", set: dur(func(c *Config) *time.Duration { return &c.OperationDayCutover })},
		{key: "shadow", def: "false", set: boolean(func(c *Config) *bool { return &c.Shadow })},
		{key: "backfill.marker-status", def: "PROCESSED", set: str(func(c *Config) *string { return &c.MarkerStatus })},
		{key: "codec.max-bytes", def: "8388608", set: num(func(c *Config) *int { return &c.CodecMaxBytes })},
		{key: "codec.max-depth", def: "64", set: num(func(c *Config) *int { return &c.CodecMaxDepth })},
		{key: "codec.max-text", def: "4096", set: num(func(c *Config) *int { return &c.CodecMaxText })},
		{key: "kafka.topic-msg", def: "msgx.flight.msg", set: str(func(c *Config) *string { return &c.TopicMsg })},
		{key: "kafka.topic-schd", def: "msgx.flight.schd", set: str(func(c *Config) *string { return &c.TopicSchd })},
		{key: "kafka.max-message-bytes", def: "1048588", set: num(func(c *Config) *int { return &c.KafkaMaxMessageBytes })},
		{key: "kafka.transactional-id", def: "msgx-dispatcher", set: str(func(c *Config) *string { return &c.KafkaTransactionalID })},
		{key: "outbound.sndr", def: "OMMS", set: str(func(c *Config) *string { return &c.OutboundSender })},
		{key: "outbound.routing-id", def: "AODB", set: str(func(c *Config) *string { return &c.Requests.RoutingID })},
		{key: "req.timeout", def: "30m", set: dur(func(c *Config) *time.Duration { return &c.Requests.Timeout })},
		// The bounds of what a caller of RequestSchedule and RequestReference registers
		// (R-REQ-6): a flood of requests is refused before it reaches COUTMSGS.
		{key: "req.caller-per-minute", def: "10", set: num(func(c *Config) *int { return &c.Requests.CallerPerMinute })},
		{key: "req.caller-burst", def: "10", set: num(func(c *Config) *int { return &c.Requests.CallerBurst })},
		{key: "req.max-open", def: "50", set: num(func(c *Config) *int { return &c.Requests.MaxOpen })},
		{key: "req.day-window", def: "31", set: num(func(c *Config) *int { return &c.Requests.DayWindow })},
		{key: "schd.daily-request-at", def: "", set: custom(KindTimeOfDay, func(c *Config, v string) error {
			c.Requests.Daily, c.Requests.DailyAt = false, 0
			v = strings.TrimSpace(v)
			if v == "" {
				return nil
			}
			at, err := time.Parse("15:04", v)
			if err != nil || len(v) != 5 {
				return fmt.Errorf("want HH:MM (airport time, 00:00 to 23:59) or empty for off")
			}
			c.Requests.Daily, c.Requests.DailyAt = true, time.Duration(at.Hour())*time.Hour+time.Duration(at.Minute())*time.Minute
			return nil
		})},
		{key: "shutdown-timeout", def: "20s", set: dur(func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
		{key: "inbox.timeout", def: "5s", set: dur(func(c *Config) *time.Duration { return &c.InboxTimeout })},
		{key: "redis.timeout", def: "3s", set: dur(func(c *Config) *time.Duration { return &c.RedisTimeout })},
		{key: "kafka.send-timeout", def: "30s", set: dur(func(c *Config) *time.Duration { return &c.KafkaSendTimeout })},
		{key: "dispatcher.batch", def: "500", set: num(func(c *Config) *int { return &c.DispatcherBatch })},
		{key: "dispatcher.gather", def: "20ms", set: dur(func(c *Config) *time.Duration { return &c.DispatcherGather })},
		{key: "http.max-body", def: "16711680", set: num(func(c *Config) *int { return &c.HTTPMaxBody })},
		{key: "http.max-in-flight", def: "4", set: num(func(c *Config) *int { return &c.HTTPMaxInFlight })},
		{key: "http.tls-cert", def: "", set: str(func(c *Config) *string { return &c.HTTPTLSCert })},
		{key: "http.tls-key", def: "", set: str(func(c *Config) *string { return &c.HTTPTLSKey })},
		{key: "http.token", def: "", set: str(func(c *Config) *string { return &c.HTTPToken })},
		{key: "http.insecure", def: "false", set: boolean(func(c *Config) *bool { return &c.HTTPInsecure })},
		{key: "tracing.ui-url", def: "", set: custom(KindString, func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if v == "" {
				c.TracingUIURL = ""
				return nil
			}
			u, err := url.Parse(strings.ReplaceAll(v, TraceIDPlaceholder, "0"))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(v, TraceIDPlaceholder) {
				return fmt.Errorf("want an http(s) URL with %s where the trace ID goes, e.g. http://jaeger:16686/trace/%s", TraceIDPlaceholder, TraceIDPlaceholder)
			}
			c.TracingUIURL = v
			return nil
		})},
	}
}

// TraceIDPlaceholder is where tracing.ui-url takes the trace ID.
const TraceIDPlaceholder = "{trace_id}"

// secrets are the keys whose values are credentials. Each has a "<key>-file" twin
// (MSGX_PG_DSN_FILE, ...) naming a file that holds the value, so that a mounted secret never
// has to pass through the process environment or the pod spec.
func secrets() []struct {
	key   string
	field func(*Config) *string
} {
	return []struct {
		key   string
		field func(*Config) *string
	}{
		{"pg-dsn", func(c *Config) *string { return &c.PGDSN }},
		{"mysql-dsn", func(c *Config) *string { return &c.MySQLDSN }},
		{"redis-url", func(c *Config) *string { return &c.RedisURL }},
		{"control-token", func(c *Config) *string { return &c.ControlToken }},
		{"control-reader-token", func(c *Config) *string { return &c.ControlReaderToken }},
		{"http-token", func(c *Config) *string { return &c.HTTPToken }},
	}
}

// fileParams are the "<key>-file" parameters of the secrets.
func fileParams() []param {
	var out []param
	for _, sk := range secrets() {
		key := sk.key + "-file"
		if sk.key == "http-token" {
			key = "http.token-file"
		}
		out = append(out, param{key: key, def: "", set: custom(KindString, func(c *Config, v string) error {
			if c.SecretFiles == nil {
				c.SecretFiles = map[string]string{}
			}
			if v = strings.TrimSpace(v); v == "" {
				delete(c.SecretFiles, sk.key)
			} else {
				c.SecretFiles[sk.key] = v
			}
			return nil
		})})
	}
	return out
}

// readSecretFiles replaces each secret that names a file with the file's content, trimmed
// (secrets written with echo or an editor end in a newline that is not part of them). A value
// and a file for the same secret is refused as ambiguous.
func (c *Config) readSecretFiles() []error {
	var errs []error
	for _, sk := range secrets() {
		path, ok := c.SecretFiles[sk.key]
		if !ok {
			continue
		}
		env := EnvName(sk.key)
		if *sk.field(c) != "" {
			errs = append(errs, fmt.Errorf("both %s and %s_FILE are set: set only one", env, env))
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s_FILE: %w", env, err))
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			errs = append(errs, fmt.Errorf("%s_FILE: %s is empty", env, path))
			continue
		}
		*sk.field(c) = v
	}
	return errs
}

// SecretValues are the configured credentials, for redacting them from logs.
func (c Config) SecretValues() []string {
	var out []string
	for _, sk := range secrets() {
		if v := *sk.field(&c); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// EnvName is the environment variable that sets key.
func EnvName(key string) string {
	return "MSGX_" + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(key))
}

// Keys lists every parameter key with its default, sorted, for documentation and tests.
func Keys() map[string]string {
	out := map[string]string{}
	for _, p := range append(params(), fileParams()...) {
		out[p.key] = p.def
	}
	return out
}

// FromEnv loads the configuration from the process environment; MSGX_CONFIG_FILE names an
// optional YAML file.
func FromEnv() (Config, error) { return Load(os.LookupEnv) }

// Load builds the configuration: defaults, then the YAML file named by MSGX_CONFIG_FILE (a flat
// map of keys, with or without the "msgx." prefix), then the MSGX_* variables. It returns every
// problem found, not only the first.
func Load(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	var errs []error
	ps := append(params(), fileParams()...)
	for _, p := range ps {
		if err := p.set.fn(&c, p.def); err != nil {
			errs = append(errs, fmt.Errorf("default of %s: %w", p.key, err))
		}
	}
	if path, ok := lookup("MSGX_CONFIG_FILE"); ok && path != "" {
		fileValues, err := readFile(path)
		if err != nil {
			return c, err
		}
		known := map[string]bool{}
		for _, p := range ps {
			known[p.key] = true
		}
		for k := range fileValues {
			if !known[k] {
				errs = append(errs, fmt.Errorf("%s: unknown key %q", path, k))
			}
		}
		for _, p := range ps {
			if v, ok := fileValues[p.key]; ok {
				if err := p.set.fn(&c, v); err != nil {
					errs = append(errs, fmt.Errorf("%s: %s=%q: %w", path, p.key, v, err))
				}
			}
		}
	}
	for _, p := range ps {
		if v, ok := lookup(EnvName(p.key)); ok {
			if err := p.set.fn(&c, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", EnvName(p.key), v, err))
			}
		}
	}
	errs = append(errs, c.readSecretFiles()...)
	if len(errs) == 0 {
		errs = append(errs, c.validate()...)
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
	c, err := Load(func(string) (string, bool) { return "", false })
	if err != nil {
		panic(err) // the defaults are part of the program
	}
	return c
}

func (c Config) validate() []error {
	var errs []error
	p := c.Pipeline
	positive := map[string]time.Duration{
		"pipeline.poll-interval": p.PollInterval, "pipeline.busy-poll-interval": p.BusyPollInterval,
		"pipeline.max-commit-delay":   p.MaxCommitDelay,
		"pipeline.late-detect-period": p.LateDetectPeriod, "pipeline.backoff-cap": p.BackoffCap,
		"pipeline.backfill-period": p.BackfillPeriod, "pipeline.backfill-backoff": p.BackfillBackoff,
		"pipeline.backfill-backoff-cap": p.BackfillBackoffCap, "pipeline.overdue-backfill": p.OverdueBackfill,
		"pipeline.head-age-alert": p.HeadAgeAlert, "pipeline.event-retention": p.EventRetention,
		"pipeline.proc-retention": p.ProcRetention, "schd.flush-period": c.Schd.FlushPeriod,
		"schd.snap-log-retention": c.Schd.SnapLogRetention, "shutdown-timeout": c.ShutdownTimeout,
		"consistency-check.period": c.Consistency.Period,
		"pipeline.req-retention":   p.ReqRetention, "flight.history-retention": c.Schd.HistoryRetention, "flight.quiet-period": c.Schd.QuietPeriod,
		"inbox.timeout": c.InboxTimeout, "redis.timeout": c.RedisTimeout,
		"kafka.send-timeout": c.KafkaSendTimeout, "req.timeout": c.Requests.Timeout,
		"control.call-timeout": c.ControlCallTimeout, "control.read-timeout": c.ControlReadTimeout,
		"control.pool-wait": c.ControlPoolWait, "control.max-connection-age": c.ControlBounds.MaxConnectionAge,
		"control.max-connection-age-grace": c.ControlBounds.MaxConnectionAgeGrace,
	}
	keys := make([]string, 0, len(positive))
	for k := range positive {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if positive[k] <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", k, positive[k]))
		}
	}
	ints := []struct {
		key string
		v   int
	}{
		{"pipeline.claim-batch", p.ClaimBatch}, {"pipeline.max-attempts", p.MaxAttempts},
		{"pipeline.backfill-batch", p.BackfillBatch}, {"pipeline.backfill-max-attempts", p.BackfillMaxAttempts},
		{"schd.flush-limit", c.Schd.FlushLimit}, {"schd.batch-size", c.Schd.BatchSize}, {"codec.max-bytes", c.CodecMaxBytes},
		{"codec.max-depth", c.CodecMaxDepth}, {"codec.max-text", c.CodecMaxText}, {"http.max-body", c.HTTPMaxBody},
		{"dispatcher.batch", c.DispatcherBatch}, {"kafka.max-message-bytes", c.KafkaMaxMessageBytes},
		{"http.max-in-flight", c.HTTPMaxInFlight}, {"pg.max-conns", c.PGMaxConns},
		{"req.caller-per-minute", c.Requests.CallerPerMinute}, {"req.caller-burst", c.Requests.CallerBurst},
		{"req.max-open", c.Requests.MaxOpen}, {"req.day-window", c.Requests.DayWindow},
		{"control.max-connections", c.ControlBounds.MaxConnections}, {"control.max-anonymous-calls", c.ControlBounds.MaxAnonymousCalls},
		{"control.max-calls", c.ControlBounds.MaxCalls},
	}
	for _, i := range ints {
		if i.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", i.key, i.v))
		}
	}
	for _, k := range []string{"pipeline.poll-interval", "pipeline.busy-poll-interval"} {
		if d := positive[k]; d > 0 && d < 50*time.Millisecond {
			errs = append(errs, fmt.Errorf("%s must be at least 50ms, got %s", k, d))
		}
	}
	// R-PUMP-5: a backoff table with steps that never fire, or attempts without a step,
	// must not pass the start-up check.
	if len(p.Backoff) != p.MaxAttempts {
		errs = append(errs, fmt.Errorf("pipeline.backoff has %d steps but pipeline.max-attempts is %d: they must match",
			len(p.Backoff), p.MaxAttempts))
	}
	for i, d := range p.Backoff {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("pipeline.backoff step %d must be positive, got %s", i+1, d))
		}
	}
	if p.OverdueBackfill > 0 && p.OverdueBackfill < p.BackfillPeriod {
		errs = append(errs, fmt.Errorf("pipeline.overdue-backfill (%s) must not be shorter than pipeline.backfill-period (%s)",
			p.OverdueBackfill, p.BackfillPeriod))
	}
	// One batch must fit its statement timeout (5s) with the pipeline's writes going on; a
	// pause longer than a few seconds would let a day's expiries outrun the sweep.
	if b := c.Retention.Batch; b < 1 || b > MaxRetentionBatch {
		errs = append(errs, fmt.Errorf("retention.batch must be between 1 and %d, got %d", MaxRetentionBatch, b))
	}
	if d := c.Retention.Pause; d < 0 || d > MaxRetentionPause {
		errs = append(errs, fmt.Errorf("retention.pause must be between 0 and %s, got %s", MaxRetentionPause, d))
	}
	// R-RETAIN-1 bounds the retention of terminal records to 1–7 days.
	if r := p.ProcRetention; r > 0 && (r < 24*time.Hour || r > 7*24*time.Hour) {
		errs = append(errs, fmt.Errorf("pipeline.proc-retention must be between 1d and 7d, got %s", r))
	}
	if cw := p.CutoverWatermark; cw != "" && cw != "min" && cw != "zero" && cw != "max" {
		if id, err := strconv.ParseInt(cw, 10, 64); err != nil || id < 0 {
			errs = append(errs, fmt.Errorf("pipeline.cutover-watermark must be min, zero, max or an inbox ID, got %q", cw))
		}
	}
	if c.MarkerStatus == "" || len(c.MarkerStatus) > 20 {
		errs = append(errs, fmt.Errorf("backfill.marker-status must be 1 to 20 characters (CMINMSGS_STATUS), got %q", c.MarkerStatus))
	}
	if c.InboxTimeout > 8*time.Second || c.RedisTimeout > 8*time.Second {
		errs = append(errs, fmt.Errorf("inbox.timeout (%s) and redis.timeout (%s) must stay under 8s: longer calls would outlive the leader lease of the lock connection",
			c.InboxTimeout, c.RedisTimeout))
	}
	// The inbox column CMINMSGS_CLOB_MSG is MEDIUMTEXT: no message is larger than 16 MiB, and a
	// bound far below a schedule's size would dead-letter every schedule.
	if m := c.CodecMaxBytes; m > 0 && (m < MinCodecMaxBytes || m > MaxCodecMaxBytes) {
		errs = append(errs, fmt.Errorf("codec.max-bytes must be between %d (64 KiB) and %d (16 MiB, the inbox column), got %d",
			MinCodecMaxBytes, MaxCodecMaxBytes, m))
	}
	// A body larger than the inbox column (or the server's default max_allowed_packet) can
	// never be stored: accepting it would only turn into a retry that never succeeds.
	if c.HTTPMaxBody > MaxCodecMaxBytes {
		errs = append(errs, fmt.Errorf("http.max-body must not exceed %d (16 MiB, the inbox column), got %d", MaxCodecMaxBytes, c.HTTPMaxBody))
	}
	// The statement timeout and the pool wait must end before the call's own deadline, so a
	// slow database answers UNAVAILABLE with its cause instead of a bare DEADLINE_EXCEEDED.
	if c.ControlReadTimeout >= c.ControlCallTimeout || c.ControlPoolWait >= c.ControlCallTimeout {
		errs = append(errs, fmt.Errorf("control.read-timeout (%s) and control.pool-wait (%s) must be shorter than control.call-timeout (%s)",
			c.ControlReadTimeout, c.ControlPoolWait, c.ControlCallTimeout))
	}
	if n := c.ControlBounds.MaxBodyChars; n < MinControlBodyChars || n > MaxControlBodyChars {
		errs = append(errs, fmt.Errorf("control.max-body-chars must be between %d and %d, got %d", MinControlBodyChars, MaxControlBodyChars, n))
	}
	// Reads wait for their slot inside a call: with fewer calls than reads in flight the read
	// bound would never be reached and the call bound would refuse what the pool could serve.
	if b := c.ControlBounds; b.MaxCalls > 0 && b.MaxCalls < c.PGMaxConns {
		errs = append(errs, fmt.Errorf("control.max-calls (%d) must be at least pg.max-conns (%d)", b.MaxCalls, c.PGMaxConns))
	}
	if (c.HTTPTLSCert == "") != (c.HTTPTLSKey == "") {
		errs = append(errs, errors.New("set both http.tls-cert and http.tls-key, or neither"))
	}
	if c.CodecMaxText > 0 && c.CodecMaxBytes > 0 && c.CodecMaxText > c.CodecMaxBytes {
		errs = append(errs, fmt.Errorf("codec.max-text (%d) must not exceed codec.max-bytes (%d)", c.CodecMaxText, c.CodecMaxBytes))
	}
	// A record batch needs room for its header and the record's; sarama refuses a limit of its
	// request size (100 MiB) or more.
	if m := c.KafkaMaxMessageBytes; m > 0 && (m < MinKafkaMaxMessageBytes || m >= MaxKafkaMaxMessageBytes) {
		errs = append(errs, fmt.Errorf("kafka.max-message-bytes must be at least %d and below %d (100 MiB), got %d",
			MinKafkaMaxMessageBytes, MaxKafkaMaxMessageBytes, m))
	}
	// ROUTINGID is VARCHAR(23) NOT NULL in the legacy COUTMSGS.
	if r := c.Requests.RoutingID; r == "" || len(r) > 23 {
		errs = append(errs, fmt.Errorf("outbound.routing-id must be 1 to 23 characters (COUTMSGS.ROUTINGID), got %q", r))
	}
	if c.OperationDayCutover < 0 || c.OperationDayCutover >= 24*time.Hour {
		errs = append(errs, fmt.Errorf("airport.operation-day-cutover must be within a day, got %s", c.OperationDayCutover))
	}
	// Each topic's transactional id is derived from the topic: two lanes on one topic would
	// share it and fence each other's producer on every round.
	if c.TopicMsg == c.TopicSchd {
		errs = append(errs, fmt.Errorf("kafka.topic-msg and kafka.topic-schd must differ, both are %q", c.TopicMsg))
	}
	return errs
}

// The bounds codec.max-bytes and kafka.max-message-bytes are checked against at start-up.
const (
	MinCodecMaxBytes        = 64 << 10
	MaxCodecMaxBytes        = 16 << 20
	MinKafkaMaxMessageBytes = 1 << 10
	MaxKafkaMaxMessageBytes = 100 << 20
)

// The bounds retention.batch and retention.pause are checked against at start-up.
const (
	MaxRetentionBatch = 50_000
	MaxRetentionPause = 10 * time.Second
)

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

// ParseDuration accepts Go durations plus a whole number of days ("30d").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
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

// splitSubjects splits a list of certificate subjects at ';': a subject itself holds commas.
func splitSubjects(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func str(field func(*Config) *string) setter {
	return setter{KindString, func(c *Config, v string) error { *field(c) = v; return nil }}
}

func dur(field func(*Config) *time.Duration) setter {
	return setter{KindDuration, func(c *Config, v string) error {
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		*field(c) = d
		return nil
	}}
}

func num(field func(*Config) *int) setter {
	return setter{KindInteger, func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		*field(c) = n
		return nil
	}}
}

func boolean(field func(*Config) *bool) setter {
	return setter{KindBoolean, func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not a boolean")
		}
		*field(c) = b
		return nil
	}}
}
