package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/msgexchange/msgexchange/pkg/config"
)

// Refused tells, of an error New returned, a refusal that waiting cannot cure (R-START-2) from
// an outage (R-START-1): a configuration sarama refuses, or a broker that answered and refused
// this client (Config in the table of broker errors: an ACL, a SASL setup, a broker too old for
// idempotence). Every other failure (a refused or reset connection, a timeout, no broker left to
// talk to, a coordinator or a leader not available yet while the brokers start) is an outage:
// the dispatcher stays up, not ready, and tries again. New's own checks (no brokers, an empty
// transactional id, a configuration that breaks the contract) are settings the caller checks
// before it waits: they are not sarama's and are not recognised here.
// A TLS connection the brokers or the dispatcher refuse (refusedTLS) is such a refusal too.
func Refused(err error) bool {
	var ce sarama.ConfigurationError
	return errors.As(err, &ce) || Classify(err) == VerdictConfig || refusedTLS(err)
}

// withSetting names, in a refusal of the connection's security, the settings to look at: the
// operator reads which setting to fix, never a secret.
func withSetting(err error) error {
	env := config.EnvName
	switch {
	case refusedTLS(err):
		return fmt.Errorf("the TLS connection was refused (check %s, %s, and %s/%s if the brokers require a client certificate): %w",
			env("kafka.tls-ca"), env("kafka.tls-server-name"), env("kafka.tls-cert"), env("kafka.tls-key"), err)
	case errors.Is(err, sarama.ErrSASLAuthenticationFailed), errors.Is(err, sarama.ErrUnsupportedSASLMechanism), errors.Is(err, sarama.ErrIllegalSASLState):
		return fmt.Errorf("the brokers refused the SASL login (check %s, %s and %s): %w",
			env("kafka.sasl-mechanism"), env("kafka.sasl-username"), env("kafka.sasl-password"), err)
	}
	return err
}

// Answers reports whether one of the brokers answers an ApiVersions request before ctx ends
// (nil), else the last failure. It is the dispatcher's readiness check once its producer is
// built: it fails only when no broker of the list answers, never for a partition without a
// leader, which delivery waits out on its own while the other partitions go on
// (docs/dispatcher.md, "Start-up and readiness").
func Answers(ctx context.Context, brokers []string, clientID string, sec Security) error {
	if len(brokers) == 0 {
		return errors.New("kafka: no brokers configured (MSGX_KAFKA_BROKERS)")
	}
	var last error
	for _, addr := range brokers {
		if err := ctx.Err(); err != nil {
			if last != nil {
				return last
			}
			return fmt.Errorf("kafka: %w", err)
		}
		if last = answers(ctx, addr, clientID, sec); last == nil {
			return nil
		}
	}
	return last
}

// answers asks one broker, with every network bound set to what is left of ctx (sarama's
// Broker takes no context).
func answers(ctx context.Context, addr, clientID string, sec Security) error {
	bound := 2 * time.Second
	if d, ok := ctx.Deadline(); ok {
		bound = max(time.Until(d), 10*time.Millisecond)
	}
	cfg := sarama.NewConfig()
	cfg.ClientID = clientID
	cfg.Version = protocolVersion
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = bound, bound, bound
	sec.apply(cfg)
	b := sarama.NewBroker(addr)
	if err := b.Open(cfg); err != nil {
		return fmt.Errorf("kafka: broker %s: %w", addr, err)
	}
	defer func() { _ = b.Close() }()
	if _, err := b.ApiVersions(&sarama.ApiVersionsRequest{}); err != nil {
		return fmt.Errorf("kafka: broker %s: %w", addr, err)
	}
	return nil
}
