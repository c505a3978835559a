package kafka

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"

	"github.com/msgexchange/msgexchange/pkg/config"
)

// Security is how every client of the dispatcher connects to the brokers: the producer, the
// readiness probe and the version floor's reader (docs/dispatcher.md, "Secured connections").
// The zero value is plaintext without authentication.
type Security struct {
	// TLS is nil for plaintext; otherwise the brokers' certificates are always verified.
	TLS  *tls.Config
	SASL config.KafkaSASL
}

// NewSecurity reads the files the settings name (kafka.tls-ca, kafka.tls-cert, kafka.tls-key).
// Its errors name the setting: a file that cannot be read or parsed is a start-up error no
// broker can cure (R-START-2). The settings' combinations were checked by config.Load.
func NewSecurity(k config.Kafka) (Security, error) {
	s := Security{SASL: k.SASL}
	if !k.TLS.Enabled {
		return s, nil
	}
	s.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: k.TLS.ServerName}
	if k.TLS.CA != "" {
		pem, err := os.ReadFile(k.TLS.CA)
		if err != nil {
			return Security{}, fmt.Errorf("%s: %w", config.EnvName("kafka.tls-ca"), err)
		}
		s.TLS.RootCAs = x509.NewCertPool()
		if !s.TLS.RootCAs.AppendCertsFromPEM(pem) {
			return Security{}, fmt.Errorf("%s: %s holds no PEM certificate", config.EnvName("kafka.tls-ca"), k.TLS.CA)
		}
	}
	if k.TLS.Cert != "" {
		cert, err := tls.LoadX509KeyPair(k.TLS.Cert, k.TLS.Key)
		if err != nil {
			return Security{}, fmt.Errorf("%s and %s: %w", config.EnvName("kafka.tls-cert"), config.EnvName("kafka.tls-key"), err)
		}
		s.TLS.Certificates = []tls.Certificate{cert}
	}
	return s, nil
}

// Plaintext reports whether the connection goes without TLS (the dispatcher warns at start-up).
func (s Security) Plaintext() bool { return s.TLS == nil }

// String says how the clients connect, for the start-up log; it never shows a secret.
func (s Security) String() string {
	mode := "plaintext"
	if s.TLS != nil {
		mode = "TLS"
		if len(s.TLS.Certificates) > 0 {
			mode = "mutual TLS"
		}
	}
	if s.SASL.Mechanism != "" {
		mode += " with SASL/" + s.SASL.Mechanism + " as " + s.SASL.Username
	}
	return mode
}

// apply sets c's network security.
func (s Security) apply(c *sarama.Config) {
	if s.TLS != nil {
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = s.TLS.Clone()
	}
	if s.SASL.Mechanism == "" {
		return
	}
	c.Net.SASL.Enable = true
	c.Net.SASL.Handshake = true
	c.Net.SASL.User, c.Net.SASL.Password = s.SASL.Username, s.SASL.Password
	switch s.SASL.Mechanism {
	case "PLAIN":
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case "SCRAM-SHA-256":
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.HashGeneratorFcn(sha256.New)} }
	case "SCRAM-SHA-512":
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.HashGeneratorFcn(sha512.New)} }
	}
}

// KgoOpts are the franz-go client options of the same security, for the version floor's
// reader (D-19).
func (s Security) KgoOpts() []kgo.Opt {
	var opts []kgo.Opt
	if s.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(s.TLS.Clone()))
	}
	var m sasl.Mechanism
	switch s.SASL.Mechanism {
	case "PLAIN":
		m = plain.Auth{User: s.SASL.Username, Pass: s.SASL.Password}.AsMechanism()
	case "SCRAM-SHA-256":
		m = kscram.Auth{User: s.SASL.Username, Pass: s.SASL.Password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = kscram.Auth{User: s.SASL.Username, Pass: s.SASL.Password}.AsSha512Mechanism()
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

// scramClient is sarama's SCRAM conversation, done by xdg-go/scram: sarama leaves the SCRAM
// client to its user, and xdg-go's is the one its own examples use, kept up to date.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	cl, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }

// refusedTLS tells a TLS failure that waiting cannot cure: the broker's certificate did not
// verify (kafka.tls-ca, kafka.tls-server-name), the broker refused ours or the handshake (a
// remote TLS alert: kafka.tls-cert), or the listener does not speak TLS at all. A refused or
// reset connection is none of these: it is an outage.
func refusedTLS(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var header tls.RecordHeaderError
	var op *net.OpError
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) ||
		errors.As(err, &header) || (errors.As(err, &op) && op.Op == "remote error")
}
