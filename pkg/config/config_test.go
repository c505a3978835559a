package config

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The defaults are the parameter table of docs/environment.md.
func TestDefaultsMatchTheSeedsTable(t *testing.T) {
	c := Default()
	p := c.Pipeline
	durations := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"pipeline.poll-interval", p.PollInterval, time.Second},
		{"pipeline.busy-poll-interval", p.BusyPollInterval, 100 * time.Millisecond},
		{"pipeline.max-commit-delay", p.MaxCommitDelay, 5 * time.Minute},
		{"pipeline.late-detect-period", p.LateDetectPeriod, time.Minute},
		{"pipeline.backoff-cap", p.BackoffCap, time.Minute},
		{"pipeline.backfill-period", p.BackfillPeriod, time.Second},
		{"pipeline.backfill-backoff", p.BackfillBackoff, 30 * time.Second},
		{"pipeline.backfill-backoff-cap", p.BackfillBackoffCap, 15 * time.Minute},
		{"pipeline.overdue-backfill", p.OverdueBackfill, 30 * 24 * time.Hour},
		{"pipeline.head-age-alert", p.HeadAgeAlert, 10 * time.Minute},
		{"pipeline.event-retention", p.EventRetention, 7 * 24 * time.Hour},
		{"pipeline.proc-retention", p.ProcRetention, 24 * time.Hour},
		{"schd.flush-period", c.Schd.FlushPeriod, 3 * time.Second},
		{"schd.snap-log-retention", c.Schd.SnapLogRetention, 90 * 24 * time.Hour},
		{"req.timeout", c.Req.Timeout, 30 * time.Minute},
		{"control.max-connection-age", c.Control.MaxConnectionAge, 30 * time.Minute},
		{"control.max-connection-age-grace", c.Control.MaxConnectionAgeGrace, time.Minute},
	}
	for _, d := range durations {
		if d.got != d.want {
			t.Errorf("%s = %s, want %s", d.name, d.got, d.want)
		}
	}
	ints := []struct {
		name      string
		got, want int
	}{
		{"pipeline.claim-batch", p.ClaimBatch, 500},
		{"pipeline.max-attempts", p.MaxAttempts, 5},
		{"pipeline.backfill-batch", p.BackfillBatch, 200},
		{"pipeline.backfill-max-attempts", p.BackfillMaxAttempts, 20},
		{"schd.flush-limit", c.Schd.FlushLimit, 500},
		// Chosen (docs/codec.md §6): four times a generated 2,000-flight schedule, and a value
		// bound far above any SIS field.
		{"codec.max-bytes", c.Codec.MaxBytes, 8 << 20},
		{"codec.max-text", c.Codec.MaxText, 4 << 10},
		// The broker's own default message.max.bytes.
		{"kafka.max-message-bytes", c.Kafka.MaxMessageBytes, 1048588},
		{"schd.batch-size", c.Schd.BatchSize, 200},
		// Sized for the chart's 256 Mi (docs/security.md, "Control API: limits").
		{"control.max-connections", c.Control.MaxConnections, 128},
		{"control.max-anonymous-calls", c.Control.MaxAnonymousCalls, 128},
		{"control.max-calls", c.Control.MaxCalls, 64},
		{"control.max-body-chars", c.Control.MaxBodyChars, 256 << 10},
		// A quarter of the 4 MiB a gRPC client accepts by default.
		{"control.page-bytes", c.Control.PageBytes, 1 << 20},
		{"control.max-queued-bytes-per-connection", c.Control.MaxQueuedBytesPerConnection, 8 << 20},
		{"control.max-queued-bytes", c.Control.MaxQueuedBytes, 16 << 20},
	}
	for _, i := range ints {
		if i.got != i.want {
			t.Errorf("%s = %d, want %d", i.name, i.got, i.want)
		}
	}
	wantBackoff := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
	if len(p.Backoff) != len(wantBackoff) {
		t.Fatalf("pipeline.backoff = %v, want %v", p.Backoff, wantBackoff)
	}
	for i := range wantBackoff {
		if p.Backoff[i] != wantBackoff[i] {
			t.Errorf("pipeline.backoff[%d] = %s, want %s", i, p.Backoff[i], wantBackoff[i])
		}
	}
	if c.Identity.IncludeDayBoundary || p.CutoverWatermark != "" || c.Shadow {
		t.Errorf("identity day boundary %v, cutover %q, shadow %v: want off, unset, off", c.Identity.IncludeDayBoundary, p.CutoverWatermark, c.Shadow)
	}
	if c.Schd.DailyRequest || c.Outbound.RoutingID != "AODB" {
		t.Errorf("daily request %v, routing id %q: want off, AODB", c.Schd.DailyRequest, c.Outbound.RoutingID)
	}
	if c.Airport.Zone.String() != "Asia/Shanghai" {
		t.Errorf("airport zone = %s, want Asia/Shanghai", c.Airport.Zone)
	}
}

func TestEnvironmentOverridesFileOverridesDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "msgx.yaml")
	if err := os.WriteFile(path, []byte("msgx.pipeline.poll-interval: 200ms\npipeline.claim-batch: 50\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(map[string]string{
		"MSGX_CONFIG_FILE":          path,
		"MSGX_PIPELINE_CLAIM_BATCH": "70",
		"MSGX_KAFKA_BROKERS":        "a:9092, b:9092",
	}, AllServices)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pipeline.PollInterval != 200*time.Millisecond {
		t.Errorf("poll interval from the file = %s, want 200ms", c.Pipeline.PollInterval)
	}
	if c.Pipeline.ClaimBatch != 70 {
		t.Errorf("claim batch = %d, want the environment's 70 over the file's 50", c.Pipeline.ClaimBatch)
	}
	if strings.Join(c.Kafka.Brokers, "|") != "a:9092|b:9092" {
		t.Errorf("brokers = %q", c.Kafka.Brokers)
	}
}

func TestInvalidConfigurationIsRefusedWithEveryReason(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"backoff steps must match attempts", map[string]string{"MSGX_PIPELINE_MAX_ATTEMPTS": "3"},
			[]string{"pipeline.backoff has 5 steps but pipeline.max-attempts is 3"}},
		{"poll interval floor", map[string]string{"MSGX_PIPELINE_POLL_INTERVAL": "10ms"},
			[]string{"at least 50ms"}},
		{"not a duration and not an integer at once", map[string]string{"MSGX_PIPELINE_MAX_COMMIT_DELAY": "soon", "MSGX_PIPELINE_CLAIM_BATCH": "many"},
			[]string{"MSGX_PIPELINE_MAX_COMMIT_DELAY", "MSGX_PIPELINE_CLAIM_BATCH"}},
		{"cutover watermark", map[string]string{"MSGX_PIPELINE_CUTOVER_WATERMARK": "latest"},
			[]string{"min, zero, max or an inbox ID"}},
		{"unknown zone", map[string]string{"MSGX_AIRPORT_TIME_ZONE": "Mars/Olympus"}, []string{"MSGX_AIRPORT_TIME_ZONE"}},
		{"inbox timeout above the leader lease", map[string]string{"MSGX_INBOX_TIMEOUT": "30s"}, []string{"leader lease"}},
		{"proc retention below a day", map[string]string{"MSGX_PIPELINE_PROC_RETENTION": "12h"}, []string{"pipeline.proc-retention must be between 1d and 7d"}},
		{"proc retention above a week", map[string]string{"MSGX_PIPELINE_PROC_RETENTION": "8d"}, []string{"pipeline.proc-retention must be between 1d and 7d"}},
		{"one topic for both lanes", map[string]string{"MSGX_KAFKA_TOPIC_SCHD": "msgx.flight.msg"}, []string{"kafka.topic-msg and kafka.topic-schd must differ"}},
		{"message bound above the inbox column", map[string]string{"MSGX_CODEC_MAX_BYTES": "33554432"}, []string{"codec.max-bytes must be between 65536 and 16777216, got 33554432 (64 KiB to 16 MiB, the inbox column)"}},
		{"message bound below a schedule", map[string]string{"MSGX_CODEC_MAX_BYTES": "8"}, []string{"codec.max-bytes must be between"}},
		{"retention batch of nothing", map[string]string{"MSGX_RETENTION_BATCH": "0"}, []string{"retention.batch must be between 1 and 50000, got 0"}},
		{"retention batch past its statement timeout", map[string]string{"MSGX_RETENTION_BATCH": "1000000"}, []string{"retention.batch must be between 1 and 50000"}},
		{"retention pause that lets expiries outrun the sweep", map[string]string{"MSGX_RETENTION_PAUSE": "1m"}, []string{"retention.pause must be between 0s and 10s, got 1m0s"}},
		{"text bound not positive", map[string]string{"MSGX_CODEC_MAX_TEXT": "0"}, []string{"codec.max-text must be positive"}},
		{"text bound above the message bound", map[string]string{"MSGX_CODEC_MAX_BYTES": "65536", "MSGX_CODEC_MAX_TEXT": "65537"},
			[]string{"codec.max-text (65537) must not exceed codec.max-bytes (65536)"}},
		{"record bound below a header", map[string]string{"MSGX_KAFKA_MAX_MESSAGE_BYTES": "100"}, []string{"kafka.max-message-bytes must be between 1024 and 104857599, got 100"}},
		{"record bound at the request size", map[string]string{"MSGX_KAFKA_MAX_MESSAGE_BYTES": "104857600"}, []string{"kafka.max-message-bytes must be between 1024 and 104857599, got 104857600"}},
		{"daily request not a time of day", map[string]string{"MSGX_SCHD_DAILY_REQUEST_AT": "3am"}, []string{"MSGX_SCHD_DAILY_REQUEST_AT", "HH:MM"}},
		{"daily request past midnight", map[string]string{"MSGX_SCHD_DAILY_REQUEST_AT": "24:00"}, []string{"HH:MM"}},
		{"routing id longer than the column", map[string]string{"MSGX_OUTBOUND_ROUTING_ID": "ABCDEFGHIJKLMNOPQRSTUVWX"}, []string{"MSGX_OUTBOUND_ROUTING_ID", "1 to 23 characters"}},
		{"request timeout not positive", map[string]string{"MSGX_REQ_TIMEOUT": "0s"}, []string{"req.timeout must be positive"}},
		{"record bound not a number", map[string]string{"MSGX_KAFKA_MAX_MESSAGE_BYTES": "1MiB"}, []string{"MSGX_KAFKA_MAX_MESSAGE_BYTES"}},
		{"trace link without its placeholder", map[string]string{"MSGX_TRACING_UI_URL": "http://jaeger:16686/trace/"}, []string{"MSGX_TRACING_UI_URL", "{trace_id}"}},
		{"trace link not http", map[string]string{"MSGX_TRACING_UI_URL": "jaeger/{trace_id}"}, []string{"MSGX_TRACING_UI_URL"}},
		{"control body bound above a safe chunk", map[string]string{"MSGX_CONTROL_MAX_BODY_CHARS": "1048576"}, []string{"control.max-body-chars must be between 4096 and 524288"}},
		{"control body bound below a message head", map[string]string{"MSGX_CONTROL_MAX_BODY_CHARS": "100"}, []string{"control.max-body-chars must be between"}},
		{"control bounds not positive", map[string]string{"MSGX_CONTROL_MAX_CONNECTIONS": "0", "MSGX_CONTROL_MAX_ANONYMOUS_CALLS": "-1", "MSGX_CONTROL_MAX_CONNECTION_AGE": "0s"},
			[]string{"control.max-connections must be positive", "control.max-anonymous-calls must be positive", "control.max-connection-age must be positive"}},
		{"control calls below the pool", map[string]string{"MSGX_CONTROL_MAX_CALLS": "5", "MSGX_PG_MAX_CONNS": "10"}, []string{"control.max-calls (5) must be at least pg.max-conns (10)"}},
		{"control connection queue below the largest response", map[string]string{"MSGX_CONTROL_MAX_QUEUED_BYTES_PER_CONNECTION": "1048576"},
			[]string{"control.max-queued-bytes-per-connection must be at least 4194304"}},
		{"redis named as a URL and a sentinel master at once", map[string]string{"MSGX_REDIS_URL": "redis://r:6379/0", "MSGX_REDIS_SENTINEL_MASTER": "mymaster", "MSGX_REDIS_SENTINEL_ADDRS": "s1:26379"},
			[]string{"redis.url and redis.sentinel-* are both set"}},
		{"redis URL with a stray sentinel password", map[string]string{"MSGX_REDIS_URL": "redis://r:6379/0", "MSGX_REDIS_SENTINEL_PASSWORD": "pw"},
			[]string{"redis.url and redis.sentinel-* are both set"}},
		{"sentinel master without sentinels", map[string]string{"MSGX_REDIS_SENTINEL_MASTER": "mymaster"}, []string{"redis.sentinel-master \"mymaster\" needs redis.sentinel-addrs"}},
		{"sentinels without a master", map[string]string{"MSGX_REDIS_SENTINEL_ADDRS": "s1:26379"}, []string{"redis.sentinel-master is empty"}},
		{"sentinel address without a port", map[string]string{"MSGX_REDIS_SENTINEL_MASTER": "m", "MSGX_REDIS_SENTINEL_ADDRS": "s1:26379,s2"}, []string{"redis.sentinel-addrs: \"s2\" is not host:port"}},
		{"control total queue below a connection's", map[string]string{"MSGX_CONTROL_MAX_QUEUED_BYTES": "4194304"},
			[]string{"control.max-queued-bytes (4194304) must be at least control.max-queued-bytes-per-connection (8388608)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.env, AllServices)
			if err == nil {
				t.Fatal("Load accepted an invalid configuration")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestDailyRequestAt(t *testing.T) {
	c, err := Load(map[string]string{"MSGX_SCHD_DAILY_REQUEST_AT": "03:30"}, AllServices)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Schd.DailyRequest || c.Schd.DailyRequestAt != 3*time.Hour+30*time.Minute {
		t.Errorf("daily %v at %s, want on at 3h30m", c.Schd.DailyRequest, c.Schd.DailyRequestAt)
	}
}

func TestTracingUIURL(t *testing.T) {
	c, err := Load(map[string]string{"MSGX_TRACING_UI_URL": " http://jaeger:16686/trace/{trace_id} "}, AllServices)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing.UIURL != "http://jaeger:16686/trace/{trace_id}" {
		t.Errorf("tracing.ui-url = %q", c.Tracing.UIURL)
	}
}

func TestUnknownKeyInFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "msgx.yaml")
	if err := os.WriteFile(path, []byte("pipeline.pol-interval: 1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(map[string]string{"MSGX_CONFIG_FILE": path}, AllServices); err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Fatalf("Load = %v, want an unknown key error", err)
	}
}

// TestRetryPolicies: the defaults give the documented waits (the policy's own rules are tested
// in pkg/retry).
func TestRetryPolicies(t *testing.T) {
	p := Default().Pipeline
	p.BackoffCap = 10 * time.Second
	r := p.Retry()
	for attempt, want := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 9: 10 * time.Second} {
		if got := r.After(attempt); got != want {
			t.Errorf("Retry().After(%d) = %s, want %s", attempt, got, want)
		}
	}
	if r.MaxAttempts != p.MaxAttempts {
		t.Errorf("Retry().MaxAttempts = %d, want %d", r.MaxAttempts, p.MaxAttempts)
	}
	b := Default().Pipeline.BackfillRetry()
	for attempt, want := range map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 5: 8 * time.Minute, 6: 15 * time.Minute, 40: 15 * time.Minute} {
		if got := b.After(attempt); got != want {
			t.Errorf("BackfillRetry().After(%d) = %s, want %s", attempt, got, want)
		}
	}
}

func TestEnvName(t *testing.T) {
	if got := EnvName("pipeline.poll-interval"); got != "MSGX_PIPELINE_POLL_INTERVAL" {
		t.Errorf("EnvName = %s", got)
	}
}

// TestSizeBoundsAtTheirLimits: the edges of the start-up checks are accepted and reach the
// configuration.
func TestSizeBoundsAtTheirLimits(t *testing.T) {
	for _, env := range []map[string]string{
		{"MSGX_CODEC_MAX_BYTES": "16777216", "MSGX_CODEC_MAX_TEXT": "16777216", "MSGX_KAFKA_MAX_MESSAGE_BYTES": "104857599"},
		{"MSGX_CODEC_MAX_BYTES": "65536", "MSGX_CODEC_MAX_TEXT": "1", "MSGX_KAFKA_MAX_MESSAGE_BYTES": "1024"},
	} {
		c, err := Load(env, AllServices)
		if err != nil {
			t.Fatalf("%v refused: %v", env, err)
		}
		got := map[string]int{"MSGX_CODEC_MAX_BYTES": c.Codec.MaxBytes, "MSGX_CODEC_MAX_TEXT": c.Codec.MaxText,
			"MSGX_KAFKA_MAX_MESSAGE_BYTES": c.Kafka.MaxMessageBytes}
		for k, v := range env {
			if strconv.Itoa(got[k]) != v {
				t.Errorf("%s=%s read as %d", k, v, got[k])
			}
		}
	}
}

// An unset pipeline.late-watch-retention is R, resolved once here for every service.
func TestLateWatchRetentionDefaultsToR(t *testing.T) {
	c, err := Load(map[string]string{"MSGX_PIPELINE_OVERDUE_BACKFILL": "10d"}, AllServices)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pipeline.LateWatchRetention != 10*24*time.Hour {
		t.Errorf("late-watch-retention %s, want R (10d)", c.Pipeline.LateWatchRetention)
	}
	c, err = Load(map[string]string{"MSGX_PIPELINE_LATE_WATCH_RETENTION": "2d"}, AllServices)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pipeline.LateWatchRetention != 2*24*time.Hour {
		t.Errorf("late-watch-retention %s, want the 2d set", c.Pipeline.LateWatchRetention)
	}
}

// Every secret may come from a file: trimmed, and refused when the value is set too, when the
// file is missing or empty.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dsn := write("pg", "postgres://msgx_app:pw@db/msgx\n")
	tok := write("tok", "  http-token\n")
	c, err := Load(map[string]string{
		"MSGX_PG_DSN_FILE": dsn, "MSGX_HTTP_TOKEN_FILE": tok,
		"MSGX_CONTROL_READER_TOKEN_FILE": write("rd", "reader\n"), "MSGX_REDIS_URL_FILE": write("rd2", "redis://:x@r/0"),
		"MSGX_MYSQL_DSN_FILE": write("my", "u:p@tcp(h)/d"), "MSGX_CONTROL_TOKEN_FILE": write("op", "operator"),
	}, AllServices)
	if err != nil {
		t.Fatal(err)
	}
	if c.PG.DSN != "postgres://msgx_app:pw@db/msgx" || c.HTTP.Token != "http-token" || c.Control.ReaderToken != "reader" ||
		c.Redis.URL != "redis://:x@r/0" || c.MySQL.DSN != "u:p@tcp(h)/d" || c.Control.Token != "operator" {
		t.Errorf("secrets from files: %+v", c)
	}
	if c.SecretFiles["pg.dsn"] != dsn {
		t.Errorf("SecretFiles = %v", c.SecretFiles)
	}
	for name, env := range map[string]map[string]string{
		"both":    {"MSGX_PG_DSN": "x", "MSGX_PG_DSN_FILE": dsn},
		"missing": {"MSGX_HTTP_TOKEN_FILE": filepath.Join(dir, "nope")},
		"empty":   {"MSGX_CONTROL_TOKEN_FILE": write("empty", "\n")},
	} {
		if _, err := Load(env, AllServices); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c, err = Load(map[string]string{
		"MSGX_REDIS_SENTINEL_MASTER": "mymaster", "MSGX_REDIS_SENTINEL_ADDRS": "s1:26379, s2:26379,s3:26379",
		"MSGX_REDIS_SENTINEL_PASSWORD_FILE": write("sp", "sentinel-pw\n"), "MSGX_REDIS_SENTINEL_DATA_PASSWORD_FILE": write("dp", "data-pw\n"),
	}, AllServices)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Redis.Sentinel; s.SentinelPassword != "sentinel-pw" || s.Password != "data-pw" || len(s.Addrs) != 3 || s.Addrs[1] != "s2:26379" {
		t.Errorf("sentinel settings: %+v", s)
	}
	if _, err := Load(map[string]string{"MSGX_HTTP_MAX_BODY": "33554432"}, AllServices); err == nil {
		t.Error("a compat body limit above the inbox column was accepted")
	}
}

// A log level that does not parse is refused at start-up, not silently read as info.
func TestLogLevelRefused(t *testing.T) {
	for _, v := range []string{"verbose", "warning", "", "INF"} {
		_, err := Load(map[string]string{"MSGX_LOG_LEVEL": v}, AllServices)
		if err == nil || !strings.Contains(err.Error(), "MSGX_LOG_LEVEL") {
			t.Errorf("MSGX_LOG_LEVEL=%q: err %v, want a refusal naming the variable", v, err)
		}
	}
	for _, v := range []string{"debug", "INFO", "warn", "error"} {
		if _, err := Load(map[string]string{"MSGX_LOG_LEVEL": v}, AllServices); err != nil {
			t.Errorf("MSGX_LOG_LEVEL=%q refused: %v", v, err)
		}
	}
}

// Every parameter has a kind, and its default is a value of that kind.
func TestParamKinds(t *testing.T) {
	probe := map[Kind][]string{
		KindDuration: {"90s", "30d"}, KindInteger: {"12"}, KindNumber: {"0.5"}, KindBoolean: {"true", "0"},
		KindLevel: {"debug"}, KindTimeZone: {"UTC"}, KindTimeOfDay: {"06:30"}, KindList: {"a,b"}, KindString: {"x"},
	}
	for _, p := range Params() {
		vs, ok := probe[p.Kind]
		if !ok {
			t.Errorf("%s: kind %q has no probe here", p.Key, p.Kind)
			continue
		}
		switch p.Key {
		case "pipeline.backoff":
			vs = []string{"1s,2s"}
		case "tracing.ui-url":
			vs = []string{"http://jaeger:16686/trace/{trace_id}"}
		case "pipeline.cutover-watermark":
			vs = []string{"max", "42"}
		case "kafka.sasl-mechanism":
			vs = SASLMechanisms()
		}
		for _, v := range vs {
			var c Config
			for _, q := range params() {
				if q.key == p.Key {
					if err := q.set.fn(&c, v); err != nil {
						t.Errorf("%s (%s) refuses %q: %v", p.Key, p.Kind, v, err)
					}
				}
			}
		}
	}
}

// A misspelled variable is refused with the closest parameter's variable, so it can never leave
// its parameter at the default unnoticed; the harness variables pass.
func TestUnknownVariableIsRefusedWithTheClosestKey(t *testing.T) {
	_, err := Load(map[string]string{"MSGX_PIPELINE_MAX_ATEMPTS": "3", "MSGX_PG_DNS": "x"}, ServicePump)
	if err == nil {
		t.Fatal("Load accepted MSGX_PIPELINE_MAX_ATEMPTS")
	}
	for _, want := range []string{"unknown variable MSGX_PIPELINE_MAX_ATEMPTS (did you mean MSGX_PIPELINE_MAX_ATTEMPTS?)",
		"unknown variable MSGX_PG_DNS (did you mean MSGX_PG_DSN?)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := Load(map[string]string{"MSGX_NOTHING_LIKE_ANY_KEY_AT_ALL_HERE": "1"}, ServicePump); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a variable near no key: %v, want refused without a guess", err)
	}
	harness := map[string]string{"MSGX_TEST_PG_DSN": "x", "MSGX_BENCH_SCALE": "full", "MSGX_CHAOS_SEED": "1", "MSGX_ORDER_SEED": "2",
		"MSGX_SIS_SAMPLES": "/tmp", "MSGX_PROMTOOL": "promtool", "MSGX_CONFIG_FILE": "", "PATH": "/bin"}
	if _, err := Load(harness, AllServices); err != nil {
		t.Errorf("harness variables refused: %v", err)
	}
}

// An old spelling in the file is the new key's value, and is reported for the start-up warning;
// a misspelled key names the closest one.
func TestRenamedKeysAreAliasesInTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "msgx.yaml")
	if err := os.WriteFile(path, []byte("msgx.log-level: debug\nredis-prefix: \"t:\"\npg-dsn-file: /run/pg\nkafka.brokers: k:9092\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(map[string]string{"MSGX_CONFIG_FILE": path}, ServicePump)
	if err == nil || !strings.Contains(err.Error(), "MSGX_PG_DSN_FILE") {
		t.Fatalf("Load = %v, want the missing secret file refused under its variable", err)
	}
	if c.Log.Level != "debug" || c.Redis.Prefix != "t:" || c.SecretFiles["pg.dsn"] != "/run/pg" || strings.Join(c.Kafka.Brokers, ",") != "k:9092" {
		t.Errorf("aliases not applied: level %q prefix %q files %v brokers %v", c.Log.Level, c.Redis.Prefix, c.SecretFiles, c.Kafka.Brokers)
	}
	got := strings.Join(c.Deprecated, "; ")
	for _, want := range []string{`"log-level" is now "log.level"`, `"redis-prefix" is now "redis.prefix"`, `"pg-dsn-file" is now "pg.dsn-file"`} {
		if !strings.Contains(got, want) {
			t.Errorf("Deprecated = %q, want %q", got, want)
		}
	}
	if strings.Contains(got, "kafka.brokers") {
		t.Errorf("Deprecated = %q names a key spelled by the rule", got)
	}
	if err := os.WriteFile(path, []byte("pipeline.max-atempts: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(map[string]string{"MSGX_CONFIG_FILE": path}, AllServices); err == nil || !strings.Contains(err.Error(), `unknown key "pipeline.max-atempts" (did you mean pipeline.max-attempts?)`) {
		t.Errorf("Load = %v, want the misspelled key named with its closest", err)
	}
}

// Every key follows the one naming rule: lower-case words joined by dashes, a dot after the
// section, and the section is one struct of Config; no alias follows it.
func TestKeysFollowTheNamingRule(t *testing.T) {
	word := `[a-z][a-z0-9]*(-[a-z0-9]+)*`
	rule := regexp.MustCompile(`^(` + word + `\.)?` + word + `$`)
	for _, p := range Params() {
		if !rule.MatchString(p.Key) || strings.Count(p.Key, ".") > 1 {
			t.Errorf("%s does not follow section.name-with-dashes", p.Key)
		}
		if _, ok := readers[sectionOf(p.Key)]; !ok {
			t.Errorf("%s: section %q has no readers", p.Key, sectionOf(p.Key))
		}
		if p.Readers == 0 {
			t.Errorf("%s is read by no service", p.Key)
		}
		for _, a := range p.Aliases {
			if _, taken := Keys()[a]; taken || EnvName(a) != EnvName(p.Key) {
				t.Errorf("%s: alias %s is a key of its own or names another variable", p.Key, a)
			}
		}
	}
}

// Each service checks only what it reads: a control bound below the pool size stops control,
// never the pump, and a bad value of a setting only ingest reads stops only ingest.
func TestEachServiceChecksWhatItReads(t *testing.T) {
	env := map[string]string{"MSGX_PG_MAX_CONNS": "100", "MSGX_HTTP_MAX_IN_FLIGHT": "many"}
	for _, s := range []Service{ServicePump, ServiceDispatcher, ServiceBackfill} {
		if _, err := Load(env, s); err != nil {
			t.Errorf("service %d refused a setting it does not read: %v", s, err)
		}
	}
	if _, err := Load(env, ServiceControl); err == nil || !strings.Contains(err.Error(), "control.max-calls (64) must be at least pg.max-conns (100)") {
		t.Errorf("control: %v, want its call bound refused", err)
	}
	if _, err := Load(env, ServiceIngest); err == nil || !strings.Contains(err.Error(), "MSGX_HTTP_MAX_IN_FLIGHT") {
		t.Errorf("ingest: %v, want its bad value refused", err)
	}
	for _, name := range []string{"ingest", "pump", "dispatcher", "backfill", "control"} {
		if _, ok := ServiceNamed(name); !ok {
			t.Errorf("no service named %s", name)
		}
	}
}

// control.tokens (issue #56 finding 8): entries by ";" or by line, comments and blank lines
// skipped in a file, each one refused with its position when malformed.
func TestParseCallerTokens(t *testing.T) {
	got, err := ParseCallerTokens("alice:operator=tok1; bob:reader = tok2\n# on call\n\ncarol@ops:operator=t=3")
	if err != nil {
		t.Fatal(err)
	}
	want := []CallerToken{{"alice", "operator", "tok1"}, {"bob", "reader", "tok2"}, {"carol@ops", "operator", "t=3"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for v, wantErr := range map[string]string{
		"alice=tok1":                    "entry 1 is not name:role=token",
		"alice:admin=tok1":              `role "admin"`,
		"a:operator=x;a:reader=y":       `"a" is given twice`,
		"al ice:operator=x":             `name "al ice"`,
		"alice:operator=":               "entry 1 is not",
		"ok:operator=x;-bad:operator=y": `entry 2: name "-bad"`,
	} {
		if _, err := ParseCallerTokens(v); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseCallerTokens(%q) = %v, want %q", v, err, wantErr)
		}
	}
	c := Default()
	c.Control.Tokens = "alice:operator=alice-secret-token"
	if !slices.Contains(c.SecretValues(), "alice-secret-token") {
		t.Errorf("SecretValues %v do not hold the named token alone", c.SecretValues())
	}
}
