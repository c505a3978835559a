package config

import (
	"strconv"
	"time"
)

// Limit is the range one parameter's value must lie in, the single-field part of validate in
// a form other tools read: the chart's values schema is generated from it (tools/chartcheck),
// and a test loads each bound and its neighbour so the two cannot disagree. Min and Max are in
// the parameter's own syntax (a number, a Go duration); empty means unbounded on that side.
type Limit struct {
	Min, Max string
}

// limits holds every single-field bound validate applies. Cross-field rules (a < b, a list as
// long as a count) are validate's alone; docs/environment.md lists them.
func limits() map[string]Limit {
	positiveInts := []string{
		"pipeline.claim-batch", "pipeline.max-attempts", "pipeline.backfill-batch", "pipeline.backfill-max-attempts",
		"schd.flush-limit", "schd.batch-size", "codec.max-depth", "codec.max-text", "dispatcher.batch",
		"http.max-in-flight", "pg.max-conns", "req.caller-per-minute", "req.caller-burst", "req.max-open",
		"req.day-window", "control.max-connections", "control.max-anonymous-calls", "control.max-calls",
	}
	positiveDurations := []string{
		"pipeline.max-commit-delay", "pipeline.late-detect-period", "pipeline.backoff-cap",
		"pipeline.backfill-period", "pipeline.backfill-backoff", "pipeline.backfill-backoff-cap",
		"pipeline.overdue-backfill", "pipeline.head-age-alert", "pipeline.event-retention",
		"schd.flush-period", "schd.snap-log-retention", "shutdown-timeout", "consistency-check.period",
		"pipeline.req-retention", "flight.history-retention", "flight.quiet-period", "kafka.send-timeout",
		"req.timeout", "control.call-timeout", "control.read-timeout", "control.pool-wait",
		"control.max-connection-age", "control.max-connection-age-grace",
	}
	out := map[string]Limit{}
	for _, k := range positiveInts {
		out[k] = Limit{Min: "1"}
	}
	for _, k := range positiveDurations {
		out[k] = Limit{Min: "1ns"}
	}
	itoa := strconv.Itoa
	// The leader lease of the lock connection outlives no call longer than 8s.
	out["inbox.timeout"] = Limit{Min: "1ns", Max: (8 * time.Second).String()}
	out["redis.timeout"] = Limit{Min: "1ns", Max: (8 * time.Second).String()}
	out["pipeline.poll-interval"] = Limit{Min: "50ms"}
	out["pipeline.busy-poll-interval"] = Limit{Min: "50ms"}
	// R-RETAIN-1: terminal records are kept 1 to 7 days.
	out["pipeline.proc-retention"] = Limit{Min: "24h0m0s", Max: "168h0m0s"}
	out["airport.operation-day-cutover"] = Limit{Min: "0s", Max: (24*time.Hour - time.Nanosecond).String()}
	out["codec.max-bytes"] = Limit{Min: itoa(MinCodecMaxBytes), Max: itoa(MaxCodecMaxBytes)}
	out["http.max-body"] = Limit{Min: "1", Max: itoa(MaxCodecMaxBytes)}
	out["kafka.max-message-bytes"] = Limit{Min: itoa(MinKafkaMaxMessageBytes), Max: itoa(MaxKafkaMaxMessageBytes - 1)}
	out["control.max-body-chars"] = Limit{Min: itoa(MinControlBodyChars), Max: itoa(MaxControlBodyChars)}
	out["retention.batch"] = Limit{Min: "1", Max: itoa(MaxRetentionBatch)}
	out["retention.pause"] = Limit{Min: "0s", Max: MaxRetentionPause.String()}
	return out
}
