package kafkatest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Secured is a broker of the test's own with one listener per way the dispatcher secures its
// connections (docs/dispatcher.md, "Secured connections"), beside the PLAINTEXT listener its
// admin client (Cluster) uses:
//   - TLS: TLS, the broker's certificate verified by the client;
//   - MTLS: TLS that also requires a client certificate signed by the test's CA;
//   - SASL: SASL over TLS, taking PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for User.
//
// The certificates are made for the test, by a CA of its own.
type Secured struct {
	*Server
	TLS, MTLS, SASL *Listener
	// CA is the PEM file of the CA that signed the broker's and the client's certificates;
	// OtherCA that of a CA that signed nothing here.
	CA, OtherCA string
	// ServerName is a name the broker's certificate holds besides 127.0.0.1.
	ServerName string
	// ClientCert and ClientKey are a client certificate the MTLS listener accepts.
	ClientCert, ClientKey string
	// User and Password log in with every mechanism of the SASL listener.
	User, Password string
}

// The SASL mechanisms the SASL listener takes.
var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Authorizer are the broker configs of a cluster with authorization on (StandardAuthorizer):
// no ACL, no access, but for the PLAINTEXT and controller listeners' anonymous principal, the
// test's own admin, which is a super user.
var Authorizer = map[string]string{
	"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"super.users":                    "User:ANONYMOUS",
	"allow.everyone.if.no.acl.found": "false",
}

// OwnSecured starts a Secured broker with the given broker configs on top of its own (nil for
// none; Authorizer turns authorization on) and waits until it answers.
func OwnSecured(t testing.TB, extra map[string]string) *Secured {
	t.Helper()
	dir := t.TempDir()
	s := &Secured{
		TLS:        &Listener{Name: "TLS", Protocol: "SSL"},
		MTLS:       &Listener{Name: "MTLS", Protocol: "SSL"},
		SASL:       &Listener{Name: "SASL", Protocol: "SASL_SSL"},
		ServerName: "kafka.test",
		User:       "msgx-dispatcher",
		Password:   rand.Text(),
	}
	ca, caKey := newCA(t, "msgx test CA")
	other, _ := newCA(t, "another test CA")
	s.CA = writePEM(t, dir, "ca.pem", pemCert(ca))
	s.OtherCA = writePEM(t, dir, "other-ca.pem", pemCert(other))
	// The broker's keystore: its key (PKCS #8) and its certificate in one PEM file, as Kafka
	// reads a PEM keystore; its truststore verifies the client certificates of MTLS.
	brokerCert, brokerKey := issue(t, ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "broker"},
		DNSNames:    []string{s.ServerName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	keystore := writePEM(t, dir, "broker.pem", append(pemKey(t, brokerKey), pemCert(brokerCert)...))
	clientCert, clientKey := issue(t, ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: s.User},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	s.ClientCert = writePEM(t, dir, "client.pem", pemCert(clientCert))
	s.ClientKey = writePEM(t, dir, "client-key.pem", pemKey(t, clientKey))

	configs := map[string]string{
		"ssl.keystore.type":                  "PEM",
		"ssl.keystore.location":              keystore,
		"ssl.truststore.type":                "PEM",
		"ssl.truststore.location":            s.CA,
		"listener.name.mtls.ssl.client.auth": "required",
		"sasl.enabled.mechanisms":            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl.plain.sasl.jaas.config": fmt.Sprintf(
			`org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";`, s.User, s.Password),
		"listener.name.sasl.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"listener.name.sasl.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
	}
	maps.Copy(configs, extra)
	// The SCRAM credentials are made when the data folder is formatted, before the broker
	// first starts: KRaft keeps them in its metadata log.
	var scram []string
	for _, m := range saslMechanisms[1:] {
		scram = append(scram, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", m, s.User, s.Password))
	}
	s.Server = own(t, configs, []*Listener{s.TLS, s.MTLS, s.SASL}, scram)
	return s
}

// newCA makes a self-signed CA.
func newCA(t testing.TB, name string) (*x509.Certificate, *rsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// issue signs tmpl's certificate, valid for a day, with the CA.
func issue(t testing.TB, ca *x509.Certificate, caKey *rsa.PrivateKey, tmpl *x509.Certificate) (*x509.Certificate, *rsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// newKey is an RSA key: Kafka's PEM keystore reads RSA keys on every JRE.
func newKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func pemKey(t testing.TB, key *rsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func writePEM(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Grant allows the broker's User what b names (a resource, its pattern and the operations), from
// any host.
func (s *Secured) Grant(t testing.TB, b *kadm.ACLBuilder) {
	t.Helper()
	s.acl(t, "grant", func(ctx context.Context, b *kadm.ACLBuilder) ([]error, error) {
		res, err := s.Admin().CreateACLs(ctx, b)
		errs := make([]error, len(res))
		for i, r := range res {
			errs[i] = r.Err
		}
		return errs, err
	}, b)
}

// Revoke takes back what Grant allowed with the same builder.
func (s *Secured) Revoke(t testing.TB, b *kadm.ACLBuilder) {
	t.Helper()
	s.acl(t, "revoke", func(ctx context.Context, b *kadm.ACLBuilder) ([]error, error) {
		res, err := s.Admin().DeleteACLs(ctx, b)
		errs := make([]error, len(res))
		for i, r := range res {
			errs[i] = r.Err
		}
		return errs, err
	}, b)
}

// acl runs an ACL request for the User's b and fails the test on any error of it.
func (s *Secured) acl(t testing.TB, what string, request func(context.Context, *kadm.ACLBuilder) ([]error, error), b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs, err := request(ctx, b.Allow("User:"+s.User).AllowHosts())
	if err = errors.Join(append(errs, err)...); err != nil {
		t.Fatalf("kafkatest: %s ACL: %v", what, err)
	}
}
