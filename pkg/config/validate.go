package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// check holds every parameter service reads to its declared limit, then applies the rules
// that relate parameters.
func check(c Config, final map[string]string, ps []param, service Service) []error {
	var errs []error
	for _, p := range ps {
		if p.by&service == 0 || p.limit == (Limit{}) {
			continue
		}
		if err := p.limit.check(p.key, p.set.kind, final[p.key], p.why); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range rules() {
		if r.by&service == 0 {
			continue
		}
		if err := r.check(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// check refuses a value outside l. The value has parsed already (its setter ran).
func (l Limit) check(key string, kind Kind, v string, why string) error {
	var val, lo, hi int64
	loOK, hiOK := l.Min != "", l.Max != ""
	show := func(n int64) string { return strconv.FormatInt(n, 10) }
	parse := func(s string) int64 { n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64); return n }
	if kind == KindDuration {
		show = func(n int64) string { return time.Duration(n).String() }
		parse = func(s string) int64 { d, _ := ParseDuration(s); return int64(d) }
	}
	val = parse(v)
	if loOK {
		lo = parse(l.Min)
	}
	if hiOK {
		hi = parse(l.Max)
	}
	if (!loOK || val >= lo) && (!hiOK || val <= hi) {
		return nil
	}
	var msg string
	switch {
	case loOK && hiOK:
		msg = fmt.Sprintf("%s must be between %s and %s, got %s", key, l.Min, l.Max, show(val))
	case loOK && (l.Min == "1" || l.Min == "1ns"):
		msg = fmt.Sprintf("%s must be positive, got %s", key, show(val))
	case loOK:
		msg = fmt.Sprintf("%s must be at least %s, got %s", key, l.Min, show(val))
	default:
		msg = fmt.Sprintf("%s must be at most %s, got %s", key, l.Max, show(val))
	}
	if why != "" {
		msg += " (" + why + ")"
	}
	return errors.New(msg)
}

// rule relates parameters; by are the services that read them all.
type rule struct {
	by    Service
	check func(c Config) error
}

// rules are the checks of more than one parameter; docs/environment.md lists them.
func rules() []rule {
	pipeline := readers["pipeline"]
	return []rule{
		// A password never crosses the network in the clear, and a TLS setting that would be
		// ignored is a mistake the operator should hear of at once.
		{ServiceDispatcher, func(c Config) error {
			k := c.Kafka
			switch {
			case k.SASL.Mechanism != "" && !k.TLS.Enabled:
				return errors.New("kafka.sasl-mechanism needs kafka.tls=true: the password would cross the network in the clear")
			case k.SASL.Mechanism != "" && (k.SASL.Username == "" || k.SASL.Password == ""):
				return fmt.Errorf("kafka.sasl-mechanism %s needs kafka.sasl-username and kafka.sasl-password (or kafka.sasl-password-file)", k.SASL.Mechanism)
			case k.SASL.Mechanism == "" && (k.SASL.Username != "" || k.SASL.Password != ""):
				return errors.New("kafka.sasl-username or kafka.sasl-password is set but kafka.sasl-mechanism is empty: name the mechanism")
			case !k.TLS.Enabled && (k.TLS.CA != "" || k.TLS.ServerName != "" || k.TLS.Cert != "" || k.TLS.Key != ""):
				return errors.New("a kafka.tls-* setting is set but kafka.tls is false: set kafka.tls=true or clear it")
			case (k.TLS.Cert == "") != (k.TLS.Key == ""):
				return errors.New("kafka.tls-cert and kafka.tls-key go together: a client certificate needs its key")
			}
			return nil
		}},
		// One Redis, named one way: a URL and sentinel settings together would leave the
		// operator guessing which server the projection lives on.
		{readers["redis"], func(c Config) error { return c.Redis.check() }},
		// R-PUMP-5: a backoff table with steps that never fire, or attempts without a step,
		// must not pass the start-up check.
		{pipeline, func(c Config) error {
			if p := c.Pipeline; len(p.Backoff) != p.MaxAttempts {
				return fmt.Errorf("pipeline.backoff has %d steps but pipeline.max-attempts is %d: they must match", len(p.Backoff), p.MaxAttempts)
			}
			return nil
		}},
		{pipeline, func(c Config) error {
			if p := c.Pipeline; p.OverdueBackfill > 0 && p.OverdueBackfill < p.BackfillPeriod {
				return fmt.Errorf("pipeline.overdue-backfill (%s) must not be shorter than pipeline.backfill-period (%s)", p.OverdueBackfill, p.BackfillPeriod)
			}
			return nil
		}},
		// The statement timeout and the pool wait must end before the call's own deadline, so a
		// slow database answers UNAVAILABLE with its cause instead of a bare DEADLINE_EXCEEDED.
		{ServiceControl, func(c Config) error {
			if k := c.Control; k.ReadTimeout >= k.CallTimeout || k.PoolWait >= k.CallTimeout {
				return fmt.Errorf("control.read-timeout (%s) and control.pool-wait (%s) must be shorter than control.call-timeout (%s)",
					k.ReadTimeout, k.PoolWait, k.CallTimeout)
			}
			return nil
		}},
		// Reads wait for their slot inside a call: with fewer calls than reads in flight the read
		// bound would never be reached and the call bound would refuse what the pool could serve.
		{ServiceControl, func(c Config) error {
			if n := c.Control.MaxCalls; n > 0 && n < c.PG.MaxConns {
				return fmt.Errorf("control.max-calls (%d) must be at least pg.max-conns (%d)", n, c.PG.MaxConns)
			}
			return nil
		}},
		// One connection's queue is part of the total: a total below it would refuse a response
		// that the connection's bound lets through.
		{ServiceControl, func(c Config) error {
			if k := c.Control; k.MaxQueuedBytes > 0 && k.MaxQueuedBytes < k.MaxQueuedBytesPerConnection {
				return fmt.Errorf("control.max-queued-bytes (%d) must be at least control.max-queued-bytes-per-connection (%d)",
					k.MaxQueuedBytes, k.MaxQueuedBytesPerConnection)
			}
			return nil
		}},
		{ServiceIngest, func(c Config) error {
			if (c.HTTP.TLSCert == "") != (c.HTTP.TLSKey == "") {
				return errors.New("set both http.tls-cert and http.tls-key, or neither")
			}
			return nil
		}},
		{ServicePump, func(c Config) error {
			if k := c.Codec; k.MaxText > 0 && k.MaxBytes > 0 && k.MaxText > k.MaxBytes {
				return fmt.Errorf("codec.max-text (%d) must not exceed codec.max-bytes (%d)", k.MaxText, k.MaxBytes)
			}
			return nil
		}},
		// Each topic's transactional id is derived from the topic: two lanes on one topic would
		// share it and fence each other's producer on every round.
		{ServiceDispatcher, func(c Config) error {
			if c.Kafka.TopicMsg == c.Kafka.TopicSchd {
				return fmt.Errorf("kafka.topic-msg and kafka.topic-schd must differ, both are %q", c.Kafka.TopicMsg)
			}
			return nil
		}},
	}
}

// readSecretFiles replaces each secret of service that names a file with the file's content,
// trimmed (secrets written with echo or an editor end in a newline that is not part of them).
// A value and a file for the same secret is refused as ambiguous.
func (c *Config) readSecretFiles(service Service) []error {
	var errs []error
	for _, sk := range secrets() {
		path, ok := c.SecretFiles[sk.key]
		if !ok || readers[sectionOf(sk.key)]&service == 0 {
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

// check refuses a Redis named both ways, or a Sentinel setup missing a part.
func (r Redis) check() error {
	s := r.Sentinel
	other := len(s.Addrs) > 0 || s.SentinelPassword != "" || s.Username != "" || s.Password != "" || s.DB != 0 || s.TLS
	switch {
	case r.URL != "" && (s.Set() || other):
		return errors.New("redis.url and redis.sentinel-* are both set: name one Redis, either a single server (redis.url) or a Sentinel master (redis.sentinel-master and redis.sentinel-addrs, credentials in redis.sentinel-password and redis.sentinel-data-password)")
	case s.Set() && len(s.Addrs) == 0:
		return fmt.Errorf("redis.sentinel-master %q needs redis.sentinel-addrs: the sentinels to ask for it (host:port, comma-separated)", s.Master)
	case !s.Set() && other:
		return errors.New("a redis.sentinel-* setting is set but redis.sentinel-master is empty: name the master the sentinels monitor")
	}
	for _, a := range s.Addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return fmt.Errorf("redis.sentinel-addrs: %q is not host:port (a sentinel's address, usually port 26379)", a)
		}
	}
	return nil
}
