package config

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/msgexchange/msgexchange/pkg/logging"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

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

// Limit is the range one parameter's value must lie in, declared with the parameter and
// enforced from the declaration: the chart's values schema is generated from it
// (tools/chartcheck), and a test loads each bound and its neighbour. Min and Max are in the
// parameter's own syntax (a number, a duration); empty means unbounded on that side.
type Limit struct {
	Min, Max string
}

// Param describes one parameter: its key, its default (the empty string may mean "unset"),
// the kind of value it takes, its limit, its old spellings and the services that read it.
type Param struct {
	Key     string
	Default string
	Kind    Kind
	// Limit is the range Load holds the value to; zero when it has none of its own.
	Limit Limit
	// Why is the limit's reason, quoted when a value is refused (Load, and the chart).
	Why string
	// Aliases are the key's spellings before the naming rule, accepted for one release.
	Aliases []string
	// Readers are the services that read the parameter and check it.
	Readers Service
}

// param binds one key to its default, its field and its declared bounds.
type param struct {
	key     string
	def     string
	set     setter
	limit   Limit
	why     string // why the limit is what it is, quoted when a value is refused
	aliases []string
	by      Service
}

// setter parses a value into its field; kind says what values it takes.
type setter struct {
	kind Kind
	fn   func(c *Config, v string) error
}

// readers are the services that read each key section (the part before the dot).
var readers = map[string]Service{
	"": AllServices, "log": AllServices, "pg": AllServices, "mysql": AllServices, "inbox": AllServices,
	"admin": AllServices, "redis": ServicePump | ServiceBackfill | ServiceControl, "kafka": ServiceDispatcher, "grpc": ServiceControl,
	"http": ServiceIngest, "control": ServiceControl, "pipeline": ServiceIngest | ServicePump | ServiceDispatcher | ServiceBackfill,
	"schd": ServicePump | ServiceDispatcher | ServiceBackfill | ServiceControl, "flight": ServiceBackfill, "retention": ServiceBackfill,
	"consistency-check": ServiceBackfill, "identity": ServicePump, "airport": ServicePump | ServiceBackfill | ServiceControl,
	"backfill": ServiceBackfill, "codec": ServicePump, "outbound": ServiceControl, "req": ServicePump | ServiceDispatcher | ServiceControl,
	"dispatcher": ServiceDispatcher, "tracing": ServiceControl,
}

// sectionOf is the section of a key: what comes before its first dot.
func sectionOf(key string) string {
	s, _, ok := strings.Cut(key, ".")
	if !ok {
		return ""
	}
	return s
}

// The bounds of parameters that other packages size against.
const (
	// control.max-body-chars: below the lower one a message's head would not show its type;
	// above the upper one a chunk of 4-byte characters could pass the 4 MiB a gRPC client
	// accepts by default.
	MinControlBodyChars = 4 << 10
	MaxControlBodyChars = 512 << 10
	// control.page-bytes: below the lower one a page of history could not show a value's head;
	// above the upper one a GetMessage of control.max-body-chars 4-byte characters (2 MiB at
	// most) with its flight changes and events (one page) could pass the 4 MiB a gRPC client
	// accepts by default.
	MinControlPageBytes = 64 << 10
	MaxControlPageBytes = 3 << 19
	// control.max-queued-bytes-per-connection is also the largest response: below 4 MiB (what
	// a gRPC client accepts by default) a GetMessage of control.max-body-chars 4-byte
	// characters with its timeline might not be sent.
	MinControlQueuedBytesPerConnection = 4 << 20
	// codec.max-bytes: the inbox column CMINMSGS_CLOB_MSG is MEDIUMTEXT, so no message is
	// larger than 16 MiB, and a bound far below a schedule's size would dead-letter every
	// schedule.
	MinCodecMaxBytes = 64 << 10
	MaxCodecMaxBytes = 16 << 20
	// kafka.max-message-bytes: a record batch needs room for its header and the record's;
	// sarama refuses a limit of its request size (100 MiB) or more.
	MinKafkaMaxMessageBytes = 1 << 10
	MaxKafkaMaxMessageBytes = 100 << 20
	// retention.batch and retention.pause: one batch must fit its statement timeout (5s) with
	// the pipeline's writes going on; a pause longer than a few seconds would let a day's
	// expiries outrun the sweep.
	MaxRetentionBatch = 50_000
	MaxRetentionPause = 10 * time.Second
)

// TraceIDPlaceholder is where tracing.ui-url takes the trace ID.
const TraceIDPlaceholder = "{trace_id}"

var (
	positive   = Limit{Min: "1"}
	positiveD  = Limit{Min: "1ns"}
	pollFloor  = Limit{Min: "50ms"}
	leaseBound = Limit{Min: "1ns", Max: "8s"}
)

const leaseWhy = "longer calls would outlive the leader lease of the lock connection"

// registry lists every parameter, the secrets' "-file" twins last.
func registry() []param {
	ps := params()
	ps = append(ps, fileParams(ps)...)
	for i := range ps {
		if ps[i].by == 0 {
			ps[i].by = readers[sectionOf(ps[i].key)]
		}
	}
	return ps
}

func params() []param {
	itoa := strconv.Itoa
	return []param{
		{key: "instance", def: "", set: str(func(c *Config) *string { return &c.Instance })},
		{key: "shadow", def: "false", set: boolean(func(c *Config) *bool { return &c.Shadow })},
		{key: "shutdown-timeout", def: "20s", set: dur(func(c *Config) *time.Duration { return &c.ShutdownTimeout }), limit: positiveD},
		{key: "log.level", aliases: []string{"log-level"}, def: "info", set: custom(KindLevel, func(c *Config, v string) error {
			c.Log.Level = v
			_, err := logging.ParseLevel(v)
			return err
		})},

		// No default connection: a default would be a superuser on localhost, and a forgotten
		// setting must stop the service with the variable's name instead.
		{key: "pg.dsn", aliases: []string{"pg-dsn"}, def: "", set: str(func(c *Config) *string { return &c.PG.DSN })},
		{key: "pg.max-conns", def: "10", set: num(func(c *Config) *int { return &c.PG.MaxConns }), limit: positive},
		{key: "mysql.dsn", aliases: []string{"mysql-dsn"}, def: "", set: str(func(c *Config) *string { return &c.MySQL.DSN })},
		{key: "inbox.timeout", def: "5s", set: dur(func(c *Config) *time.Duration { return &c.Inbox.Timeout }), limit: leaseBound, why: leaseWhy},
		{key: "redis.url", aliases: []string{"redis-url"}, def: "", set: str(func(c *Config) *string { return &c.Redis.URL })},
		{key: "redis.prefix", aliases: []string{"redis-prefix"}, def: "msgx:", set: str(func(c *Config) *string { return &c.Redis.Prefix })},
		{key: "redis.timeout", def: "3s", set: dur(func(c *Config) *time.Duration { return &c.Redis.Timeout }), limit: leaseBound, why: leaseWhy},
		// Sentinel (docs/redis.md, "Sentinel"): the master's name and the sentinels to ask for
		// it, instead of redis.url. The data nodes' credentials are settings of their own, since
		// no URL names a server here; a rule refuses a mix of the two shapes.
		{key: "redis.sentinel-master", def: "", set: str(func(c *Config) *string { return &c.Redis.Sentinel.Master })},
		{key: "redis.sentinel-addrs", def: "", set: custom(KindList, func(c *Config, v string) error {
			c.Redis.Sentinel.Addrs = splitList(v)
			return nil
		})},
		{key: "redis.sentinel-password", def: "", set: str(func(c *Config) *string { return &c.Redis.Sentinel.SentinelPassword })},
		{key: "redis.sentinel-username", def: "", set: str(func(c *Config) *string { return &c.Redis.Sentinel.Username })},
		{key: "redis.sentinel-data-password", def: "", set: str(func(c *Config) *string { return &c.Redis.Sentinel.Password })},
		{key: "redis.sentinel-db", def: "0", set: num(func(c *Config) *int { return &c.Redis.Sentinel.DB }), limit: Limit{Min: "0", Max: "15"}},
		{key: "redis.sentinel-tls", def: "false", set: boolean(func(c *Config) *bool { return &c.Redis.Sentinel.TLS })},

		{key: "kafka.brokers", aliases: []string{"kafka-brokers"}, def: "", set: custom(KindList, func(c *Config, v string) error {
			c.Kafka.Brokers = splitList(v)
			return nil
		})},
		{key: "kafka.topic-msg", def: "msgx.flight.msg", set: str(func(c *Config) *string { return &c.Kafka.TopicMsg })},
		{key: "kafka.topic-schd", def: "msgx.flight.schd", set: str(func(c *Config) *string { return &c.Kafka.TopicSchd })},
		{key: "kafka.max-message-bytes", def: "1048588", set: num(func(c *Config) *int { return &c.Kafka.MaxMessageBytes }),
			limit: Limit{Min: itoa(MinKafkaMaxMessageBytes), Max: itoa(MaxKafkaMaxMessageBytes - 1)}, why: "a batch's header and sarama's 100 MiB request size"},
		{key: "kafka.transactional-id", def: "msgx-dispatcher", set: str(func(c *Config) *string { return &c.Kafka.TransactionalID })},
		{key: "kafka.send-timeout", def: "30s", set: dur(func(c *Config) *time.Duration { return &c.Kafka.SendTimeout }), limit: positiveD},
		// The connection's security (docs/dispatcher.md, "Secured connections"). The chart sets
		// them from its kafka values and verifies TLS by default; the programs' default is
		// plaintext, for a broker on the same machine, with a WARN at start-up.
		{key: "kafka.tls", def: "false", set: boolean(func(c *Config) *bool { return &c.Kafka.TLS.Enabled })},
		{key: "kafka.tls-ca", def: "", set: str(func(c *Config) *string { return &c.Kafka.TLS.CA })},
		{key: "kafka.tls-server-name", def: "", set: str(func(c *Config) *string { return &c.Kafka.TLS.ServerName })},
		{key: "kafka.tls-cert", def: "", set: str(func(c *Config) *string { return &c.Kafka.TLS.Cert })},
		{key: "kafka.tls-key", def: "", set: str(func(c *Config) *string { return &c.Kafka.TLS.Key })},
		{key: "kafka.sasl-mechanism", def: "", set: custom(KindString, func(c *Config, v string) error {
			v = strings.ToUpper(strings.TrimSpace(v))
			if v != "" && !slices.Contains(SASLMechanisms(), v) {
				return fmt.Errorf("want one of %s, or empty for none", strings.Join(SASLMechanisms(), ", "))
			}
			c.Kafka.SASL.Mechanism = v
			return nil
		})},
		{key: "kafka.sasl-username", def: "", set: str(func(c *Config) *string { return &c.Kafka.SASL.Username })},
		{key: "kafka.sasl-password", def: "", set: str(func(c *Config) *string { return &c.Kafka.SASL.Password })},

		// Listeners default to loopback: reaching one from the network is a deployment's
		// explicit choice (the chart binds admin to every interface of the pod).
		{key: "admin.addr", aliases: []string{"admin-addr"}, def: "127.0.0.1:9090", set: str(func(c *Config) *string { return &c.Admin.Addr })},
		{key: "grpc.addr", aliases: []string{"grpc-addr"}, def: "127.0.0.1:9000", set: str(func(c *Config) *string { return &c.GRPC.Addr })},
		{key: "http.addr", aliases: []string{"http-addr"}, def: "127.0.0.1:8080", set: str(func(c *Config) *string { return &c.HTTP.Addr })},
		// A body larger than the inbox column can never be stored: accepting it would only turn
		// into a retry that never succeeds.
		{key: "http.max-body", def: "16711680", set: num(func(c *Config) *int { return &c.HTTP.MaxBody }),
			limit: Limit{Min: "1", Max: itoa(MaxCodecMaxBytes)}, why: "16 MiB, the inbox column"},
		{key: "http.max-in-flight", def: "4", set: num(func(c *Config) *int { return &c.HTTP.MaxInFlight }), limit: positive},
		{key: "http.tls-cert", def: "", set: str(func(c *Config) *string { return &c.HTTP.TLSCert })},
		{key: "http.tls-key", def: "", set: str(func(c *Config) *string { return &c.HTTP.TLSKey })},
		{key: "http.token", def: "", set: str(func(c *Config) *string { return &c.HTTP.Token })},
		{key: "http.insecure", def: "false", set: boolean(func(c *Config) *bool { return &c.HTTP.Insecure })},

		{key: "control.token", aliases: []string{"control-token"}, def: "", set: str(func(c *Config) *string { return &c.Control.Token })},
		{key: "control.reader-token", aliases: []string{"control-reader-token"}, def: "", set: str(func(c *Config) *string { return &c.Control.ReaderToken })},
		// Named tokens, one per person or tool, so the audit says who acted (issue #56,
		// finding 8); parsed by ParseCallerTokens.
		{key: "control.tokens", def: "", set: str(func(c *Config) *string { return &c.Control.Tokens })},
		{key: "control.require-comment", def: "true", set: boolean(func(c *Config) *bool { return &c.Control.RequireComment })},
		{key: "control.operator-subjects", aliases: []string{"control-operator-subjects"}, def: "", set: custom(KindList, func(c *Config, v string) error {
			c.Control.OperatorSubjects = splitSubjects(v)
			return nil
		})},
		{key: "control.reader-subjects", aliases: []string{"control-reader-subjects"}, def: "", set: custom(KindList, func(c *Config, v string) error {
			c.Control.ReaderSubjects = splitSubjects(v)
			return nil
		})},
		{key: "control.insecure", aliases: []string{"control-insecure"}, def: "false", set: boolean(func(c *Config) *bool { return &c.Control.Insecure })},
		{key: "control.tls-cert", aliases: []string{"control-tls-cert"}, def: "", set: str(func(c *Config) *string { return &c.Control.TLSCert })},
		{key: "control.tls-key", aliases: []string{"control-tls-key"}, def: "", set: str(func(c *Config) *string { return &c.Control.TLSKey })},
		{key: "control.client-ca", aliases: []string{"control-client-ca"}, def: "", set: str(func(c *Config) *string { return &c.Control.ClientCA })},
		{key: "control.call-timeout", def: "10s", set: dur(func(c *Config) *time.Duration { return &c.Control.CallTimeout }), limit: positiveD},
		{key: "control.read-timeout", def: "5s", set: dur(func(c *Config) *time.Duration { return &c.Control.ReadTimeout }), limit: positiveD},
		{key: "control.pool-wait", def: "2s", set: dur(func(c *Config) *time.Duration { return &c.Control.PoolWait }), limit: positiveD},
		// The control server's global bounds (Bounds, docs/security.md).
		{key: "control.max-connections", def: "128", set: num(func(c *Config) *int { return &c.Control.MaxConnections }), limit: positive},
		{key: "control.max-anonymous-calls", def: "128", set: num(func(c *Config) *int { return &c.Control.MaxAnonymousCalls }), limit: positive},
		{key: "control.max-calls", def: "64", set: num(func(c *Config) *int { return &c.Control.MaxCalls }), limit: positive},
		{key: "control.max-connection-age", def: "30m", set: dur(func(c *Config) *time.Duration { return &c.Control.MaxConnectionAge }), limit: positiveD},
		{key: "control.max-connection-age-grace", def: "1m", set: dur(func(c *Config) *time.Duration { return &c.Control.MaxConnectionAgeGrace }), limit: positiveD},
		{key: "control.max-body-chars", def: "262144", set: num(func(c *Config) *int { return &c.Control.MaxBodyChars }),
			limit: Limit{Min: itoa(MinControlBodyChars), Max: itoa(MaxControlBodyChars)}},
		{key: "control.page-bytes", def: "1048576", set: num(func(c *Config) *int { return &c.Control.PageBytes }),
			limit: Limit{Min: itoa(MinControlPageBytes), Max: itoa(MaxControlPageBytes)}},
		{key: "control.max-queued-bytes-per-connection", def: "8388608", set: num(func(c *Config) *int { return &c.Control.MaxQueuedBytesPerConnection }),
			limit: Limit{Min: itoa(MinControlQueuedBytesPerConnection)}},
		{key: "control.max-queued-bytes", def: "16777216", set: num(func(c *Config) *int { return &c.Control.MaxQueuedBytes }),
			limit: Limit{Min: itoa(MinControlQueuedBytesPerConnection)}},
		{key: "control.send-stall-timeout", def: "30s", set: dur(func(c *Config) *time.Duration { return &c.Control.SendStallTimeout }), limit: positiveD},

		{key: "pipeline.poll-interval", def: "1s", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.PollInterval }), limit: pollFloor},
		{key: "pipeline.busy-poll-interval", def: "100ms", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BusyPollInterval }), limit: pollFloor},
		{key: "pipeline.claim-batch", def: "500", set: num(func(c *Config) *int { return &c.Pipeline.ClaimBatch }), limit: positive},
		{key: "pipeline.max-commit-delay", def: "5m", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.MaxCommitDelay }), limit: positiveD},
		{key: "pipeline.late-detect-period", def: "1m", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.LateDetectPeriod }), limit: positiveD},
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
		{key: "pipeline.max-attempts", def: "5", set: num(func(c *Config) *int { return &c.Pipeline.MaxAttempts }), limit: positive},
		{key: "pipeline.backoff", def: "1s,2s,4s,8s,16s", set: custom(KindList, func(c *Config, v string) error {
			var out []time.Duration
			for i, s := range splitList(v) {
				d, err := ParseDuration(s)
				if err != nil {
					return err
				}
				if d <= 0 {
					return fmt.Errorf("step %d must be positive, got %s", i+1, d)
				}
				out = append(out, d)
			}
			c.Pipeline.Backoff = out
			return nil
		})},
		{key: "pipeline.backoff-cap", def: "60s", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BackoffCap }), limit: positiveD},
		{key: "pipeline.backfill-period", def: "1s", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BackfillPeriod }), limit: positiveD},
		{key: "pipeline.backfill-backoff", def: "30s", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BackfillBackoff }), limit: positiveD},
		{key: "pipeline.backfill-backoff-cap", def: "15m", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BackfillBackoffCap }), limit: positiveD},
		{key: "pipeline.backfill-batch", def: "200", set: num(func(c *Config) *int { return &c.Pipeline.BackfillBatch }), limit: positive},
		{key: "pipeline.overdue-backfill", def: "30d", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.OverdueBackfill }), limit: positiveD},
		{key: "pipeline.backfill-max-attempts", def: "20", set: num(func(c *Config) *int { return &c.Pipeline.BackfillMaxAttempts }), limit: positive},
		{key: "pipeline.head-age-alert", def: "10m", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.HeadAgeAlert }), limit: positiveD},
		{key: "pipeline.event-retention", def: "7d", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.EventRetention }), limit: positiveD},
		// R-RETAIN-1 bounds the retention of terminal records to 1–7 days.
		{key: "pipeline.proc-retention", def: "1d", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.ProcRetention }),
			limit: Limit{Min: "1d", Max: "7d"}, why: "R-RETAIN-1"},
		{key: "pipeline.req-retention", def: "30d", set: dur(func(c *Config) *time.Duration { return &c.Pipeline.ReqRetention }), limit: positiveD},
		// The pump's own bounds: one message's step (its inbox and Redis calls are bounded
		// shorter by inbox.timeout and redis.timeout), the write of its outcome, and the
		// backlog gauges' refresh.
		{key: "pipeline.step-timeout", def: "1m", by: ServicePump, set: dur(func(c *Config) *time.Duration { return &c.Pipeline.StepTimeout }), limit: positiveD},
		{key: "pipeline.record-timeout", def: "10s", by: ServicePump, set: dur(func(c *Config) *time.Duration { return &c.Pipeline.RecordTimeout }), limit: positiveD},
		{key: "pipeline.backlog-interval", def: "15s", by: ServicePump, set: dur(func(c *Config) *time.Duration { return &c.Pipeline.BacklogInterval }), limit: positiveD},
		{key: "pipeline.cutover-watermark", def: "", set: custom(KindString, func(c *Config, v string) error {
			c.Pipeline.CutoverWatermark = v
			if v == "" || v == "min" || v == "zero" || v == "max" {
				return nil
			}
			if id, err := strconv.ParseInt(v, 10, 64); err != nil || id < 0 {
				return fmt.Errorf("want min, zero, max or an inbox ID")
			}
			return nil
		})},

		{key: "schd.flush-period", def: "3s", set: dur(func(c *Config) *time.Duration { return &c.Schd.FlushPeriod }), limit: positiveD},
		{key: "schd.flush-limit", def: "500", set: num(func(c *Config) *int { return &c.Schd.FlushLimit }), limit: positive},
		{key: "schd.batch-size", def: "200", set: num(func(c *Config) *int { return &c.Schd.BatchSize }), limit: positive},
		{key: "schd.snap-log-retention", def: "90d", set: dur(func(c *Config) *time.Duration { return &c.Schd.SnapLogRetention }), limit: positiveD},
		{key: "schd.daily-request-at", def: "", by: ServiceControl, set: custom(KindTimeOfDay, func(c *Config, v string) error {
			c.Schd.DailyRequest, c.Schd.DailyRequestAt = false, 0
			v = strings.TrimSpace(v)
			if v == "" {
				return nil
			}
			at, err := time.Parse("15:04", v)
			if err != nil || len(v) != 5 {
				return fmt.Errorf("want HH:MM (airport time, 00:00 to 23:59) or empty for off")
			}
			c.Schd.DailyRequest, c.Schd.DailyRequestAt = true, time.Duration(at.Hour())*time.Hour+time.Duration(at.Minute())*time.Minute
			return nil
		})},
		{key: "flight.history-retention", def: "3d", set: dur(func(c *Config) *time.Duration { return &c.Flight.HistoryRetention }), limit: positiveD},
		{key: "flight.quiet-period", def: "2d", set: dur(func(c *Config) *time.Duration { return &c.Flight.QuietPeriod }), limit: positiveD},

		// The retention sweeps' batch bound and pause; their retention periods are above.
		{key: "retention.batch", def: "500", set: num(func(c *Config) *int { return &c.Retention.Batch }),
			limit: Limit{Min: "1", Max: itoa(MaxRetentionBatch)}},
		{key: "retention.pause", def: "1s", set: dur(func(c *Config) *time.Duration { return &c.Retention.Pause }),
			limit: Limit{Min: "0s", Max: MaxRetentionPause.String()}},
		// The operator's jobs (republishes, projection rebuilds) that ended are kept this long for
		// their record, then deleted by the backfill's sweep (issue #57 finding 4).
		{key: "retention.jobs", def: "30d", set: dur(func(c *Config) *time.Duration { return &c.Retention.Jobs }), limit: positiveD},

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
		{key: "consistency-check.period", def: "24h", set: dur(func(c *Config) *time.Duration { return &c.Consistency.Period }), limit: positiveD},
		// A Redis that lost its data (FLUSHALL, a restart without persistence) is found by the
		// projection's sentinel key and rebuilt from PostgreSQL without waiting for an operator.
		{key: "consistency-check.rebuild-on-loss", def: "true", set: boolean(func(c *Config) *bool { return &c.Consistency.RebuildOnLoss })},

		{key: "identity.include-day-boundary", def: "false", set: boolean(func(c *Config) *bool { return &c.Identity.IncludeDayBoundary })},
		{key: "airport.time-zone", def: "Asia/Shanghai", set: custom(KindTimeZone, func(c *Config, v string) error {
			loc, err := time.LoadLocation(v)
			if err != nil {
				return err
			}
			c.Airport.Zone = loc
			return nil
		})},
		{key: "airport.operation-day-cutover", def: "0s", set: dur(func(c *Config) *time.Duration { return &c.Airport.OperationDayCutover }),
			limit: Limit{Min: "0s", Max: (24*time.Hour - time.Nanosecond).String()}, why: "within a day"},
		{key: "backfill.marker-status", def: "PROCESSED", set: custom(KindString, func(c *Config, v string) error {
			c.Backfill.MarkerStatus = v
			if v == "" || len(v) > 20 {
				return fmt.Errorf("want 1 to 20 characters (CMINMSGS_STATUS)")
			}
			return nil
		})},
		{key: "codec.max-bytes", def: itoa(sis.DefaultMaxBytes), set: num(func(c *Config) *int { return &c.Codec.MaxBytes }),
			limit: Limit{Min: itoa(MinCodecMaxBytes), Max: itoa(MaxCodecMaxBytes)}, why: "64 KiB to 16 MiB, the inbox column"},
		{key: "codec.max-depth", def: itoa(sis.DefaultMaxDepth), set: num(func(c *Config) *int { return &c.Codec.MaxDepth }), limit: positive},
		{key: "codec.max-text", def: itoa(sis.DefaultMaxText), set: num(func(c *Config) *int { return &c.Codec.MaxText }), limit: positive},
		{key: "outbound.sndr", def: "OMMS", set: str(func(c *Config) *string { return &c.Outbound.Sender })},
		{key: "outbound.routing-id", def: "AODB", set: custom(KindString, func(c *Config, v string) error {
			c.Outbound.RoutingID = v
			// ROUTINGID is VARCHAR(23) NOT NULL in the legacy COUTMSGS.
			if v == "" || len(v) > 23 {
				return fmt.Errorf("want 1 to 23 characters (COUTMSGS.ROUTINGID)")
			}
			return nil
		})},
		{key: "req.timeout", def: "30m", set: dur(func(c *Config) *time.Duration { return &c.Req.Timeout }), limit: positiveD},
		// The bounds of what a caller of RequestSchedule and RequestReference registers
		// (R-REQ-6): a flood of requests is refused before it reaches COUTMSGS.
		{key: "req.caller-per-minute", def: "10", by: ServiceControl, set: num(func(c *Config) *int { return &c.Req.CallerPerMinute }), limit: positive},
		{key: "req.caller-burst", def: "10", by: ServiceControl, set: num(func(c *Config) *int { return &c.Req.CallerBurst }), limit: positive},
		{key: "req.max-open", def: "50", by: ServiceControl, set: num(func(c *Config) *int { return &c.Req.MaxOpen }), limit: positive},
		{key: "req.day-window", def: "31", by: ServiceControl, set: num(func(c *Config) *int { return &c.Req.DayWindow }), limit: positive},
		{key: "dispatcher.batch", def: "500", set: num(func(c *Config) *int { return &c.Dispatcher.Batch }), limit: positive},
		{key: "dispatcher.gather", def: "20ms", set: dur(func(c *Config) *time.Duration { return &c.Dispatcher.Gather })},
		{key: "dispatcher.read-timeout", def: "5s", set: dur(func(c *Config) *time.Duration { return &c.Dispatcher.ReadTimeout }), limit: positiveD},
		{key: "dispatcher.stats-period", def: "5s", set: dur(func(c *Config) *time.Duration { return &c.Dispatcher.StatsPeriod }), limit: positiveD},
		{key: "tracing.ui-url", def: "", set: custom(KindString, func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if v == "" {
				c.Tracing.UIURL = ""
				return nil
			}
			u, err := url.Parse(strings.ReplaceAll(v, TraceIDPlaceholder, "0"))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(v, TraceIDPlaceholder) {
				return fmt.Errorf("want an http(s) URL with %s where the trace ID goes, e.g. http://jaeger:16686/trace/%s", TraceIDPlaceholder, TraceIDPlaceholder)
			}
			c.Tracing.UIURL = v
			return nil
		})},
	}
}

// secret is a key whose value is a credential.
type secret struct {
	key   string
	field func(*Config) *string
}

// secrets are the keys whose values are credentials. Each has a "<key>-file" twin
// (MSGX_PG_DSN_FILE, ...) naming a file that holds the value, so that a mounted secret never
// has to pass through the process environment or the pod spec.
func secrets() []secret {
	return []secret{
		{"pg.dsn", func(c *Config) *string { return &c.PG.DSN }},
		{"mysql.dsn", func(c *Config) *string { return &c.MySQL.DSN }},
		{"redis.url", func(c *Config) *string { return &c.Redis.URL }},
		{"redis.sentinel-password", func(c *Config) *string { return &c.Redis.Sentinel.SentinelPassword }},
		{"redis.sentinel-data-password", func(c *Config) *string { return &c.Redis.Sentinel.Password }},
		{"control.token", func(c *Config) *string { return &c.Control.Token }},
		{"control.reader-token", func(c *Config) *string { return &c.Control.ReaderToken }},
		{"control.tokens", func(c *Config) *string { return &c.Control.Tokens }},
		{"http.token", func(c *Config) *string { return &c.HTTP.Token }},
		{"kafka.sasl-password", func(c *Config) *string { return &c.Kafka.SASL.Password }},
	}
}

// fileParams are the "<key>-file" parameters of the secrets; the old spellings of the key
// name the old spellings of its file.
func fileParams(ps []param) []param {
	var out []param
	for _, sk := range secrets() {
		var aliases []string
		for _, p := range ps {
			if p.key == sk.key {
				for _, a := range p.aliases {
					aliases = append(aliases, a+"-file")
				}
			}
		}
		out = append(out, param{key: sk.key + "-file", aliases: aliases, def: "", set: custom(KindString, func(c *Config, v string) error {
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

// Params lists every parameter, in the registry's order.
func Params() []Param {
	ps := registry()
	out := make([]Param, len(ps))
	for i, p := range ps {
		out[i] = Param{Key: p.key, Default: p.def, Kind: p.set.kind, Limit: p.limit, Why: p.why, Aliases: p.aliases, Readers: p.by}
	}
	return out
}

// Keys lists every parameter key with its default, for documentation and tests.
func Keys() map[string]string {
	out := map[string]string{}
	for _, p := range registry() {
		out[p.key] = p.def
	}
	return out
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

// splitSubjects splits a list of certificate subjects at ';': a subject itself holds commas.
func splitSubjects(v string) []string { return split(v, ";") }

func splitList(v string) []string { return split(v, ",") }

func split(v, sep string) []string {
	var out []string
	for _, s := range strings.Split(v, sep) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// custom is a setter of its own parsing.
func custom(kind Kind, fn func(c *Config, v string) error) setter { return setter{kind: kind, fn: fn} }

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
