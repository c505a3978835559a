package app_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

var (
	oidCN = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidO  = asn1.ObjectIdentifier{2, 5, 4, 10}
)

// issueRaw signs a client certificate with exactly the subject RDNs given (DER order: most
// general first) and the URI SANs.
func (ca *testCA) issueRaw(t *testing.T, seq pkix.RDNSequence, uris ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tpl := &x509.Certificate{
		SerialNumber: serial,
		RawSubject:   raw,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tpl.URIs = append(tpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func rdn(oid asn1.ObjectIdentifier, v string) pkix.RelativeDistinguishedNameSET {
	return pkix.RelativeDistinguishedNameSET{{Type: oid, Value: v}}
}

// The probe of the entry-point review: a CA-signed certificate "CN=ops,CN=mallory,O=Airport" printed as
// "CN=ops,O=Airport" by Go's Subject.String() and got the operator role. Subjects now match
// their parsed RDN sequence exactly, or a URI SAN.
func TestSubjectRulesMatchTheWholeRDNSequence(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	procRow(t, db, 1, "DEAD", "EXHAUSTED", time.Now())
	f := newTLSFiles(t)
	ca := f.caCert(t)
	in := startWith(t, db, "control-rdn", time.Now(), func(cfg *config.Config) {
		cfg.Control.TLSCert, cfg.Control.TLSKey, cfg.Control.ClientCA = f.serverCert, f.serverKey, f.ca
		cfg.Control.OperatorSubjects = []string{"CN=ops,O=Airport", "URI:spiffe://airport/ops"}
	}, &testlog.Buffer{})
	certs := []struct {
		name     string
		cert     tls.Certificate
		operator bool
	}{
		{"CN=ops,O=Airport", ca.issueRaw(t, pkix.RDNSequence{rdn(oidO, "Airport"), rdn(oidCN, "ops")}), true},
		{"CN=ops,CN=mallory,O=Airport", ca.issueRaw(t, pkix.RDNSequence{rdn(oidO, "Airport"), rdn(oidCN, "mallory"), rdn(oidCN, "ops")}), false},
		{"CN=mallory,CN=ops,O=Airport", ca.issueRaw(t, pkix.RDNSequence{rdn(oidO, "Airport"), rdn(oidCN, "ops"), rdn(oidCN, "mallory")}), false},
		{"O=Airport,CN=ops (reordered)", ca.issueRaw(t, pkix.RDNSequence{rdn(oidCN, "ops"), rdn(oidO, "Airport")}), false},
		{"CN=ops+O=Airport (one RDN)", ca.issueRaw(t, pkix.RDNSequence{{{Type: oidCN, Value: "ops"}, {Type: oidO, Value: "Airport"}}}), false},
		{"CN=ops", ca.issueRaw(t, pkix.RDNSequence{rdn(oidCN, "ops")}), false},
		{"CN=x with URI SAN spiffe://airport/ops", ca.issueRaw(t, pkix.RDNSequence{rdn(oidCN, "x")}, "spiffe://airport/ops"), true},
		{"CN=x with URI SAN spiffe://airport/ops/x", ca.issueRaw(t, pkix.RDNSequence{rdn(oidCN, "x")}, "spiffe://airport/ops/x"), false},
	}
	granted := 0
	for i, c := range certs {
		client := dial(t, in.addr, credentials.NewTLS(&tls.Config{RootCAs: f.caPool, Certificates: []tls.Certificate{c.cert}}))
		if i == 0 {
			testwait.For(t, 15*time.Second, "the instance to become active", func() bool {
				st, err := client.GetStatus(callCtx(t), &controlv1.GetStatusRequest{})
				if err != nil {
					t.Fatalf("GetStatus by %s: %v", c.name, err)
				}
				return st.GetServedByActive()
			})
		}
		_, err := client.Replay(callCtx(t), &controlv1.ReplayRequest{MsgIds: []int64{1}, DryRun: true, Comment: "subject probe"})
		switch {
		case c.operator && err != nil:
			t.Errorf("%s: Replay = %v, want the operator role", c.name, err)
		case !c.operator && status.Code(err) != codes.Unauthenticated:
			t.Errorf("%s: Replay = %v, want UNAUTHENTICATED", c.name, err)
		}
		if err == nil {
			granted++
		}
	}
	t.Logf("%d certificates, %d got the operator role (want 2: the exact subject and the SPIFFE ID)", len(certs), granted)
}

// Subject rules that do not parse stop the start-up, naming the variable.
func TestSubjectRulesThatDoNotParseAreRefused(t *testing.T) {
	t.Parallel()
	f := newTLSFiles(t)
	db := pgtest.New(t)
	for _, rule := range []string{"CN", "XX=ops", "CN=ops,", "CN=#0403616263", "URI:"} {
		err := newApp(t, db, func(c *config.Config) {
			c.Control.TLSCert, c.Control.TLSKey, c.Control.ClientCA = f.serverCert, f.serverKey, f.ca
			c.Control.OperatorSubjects = []string{rule}
		})
		if err == nil || !strings.Contains(err.Error(), "MSGX_CONTROL_OPERATOR_SUBJECTS") {
			t.Errorf("rule %q: app.New = %v, want an error naming MSGX_CONTROL_OPERATOR_SUBJECTS", rule, err)
		}
	}
}
