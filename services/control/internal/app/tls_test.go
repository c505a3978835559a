package app_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/service"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/services/control/internal/app"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate and returns its certificate and key as PEM.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"airport ops"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsFiles are the PEM files of one mTLS setup.
type tlsFiles struct {
	dir                       string
	ca, serverCert, serverKey string
	clientCert, clientKey     string
	strangerCert, strangerKey string // signed by a CA the server does not trust
	caPool                    *x509.CertPool
	client, stranger          tls.Certificate
	issuer                    *testCA
}

// caCert is the CA the server trusts, to issue more client certificates.
func (f *tlsFiles) caCert(t *testing.T) *testCA {
	t.Helper()
	return f.issuer
}

func newTLSFiles(t *testing.T) *tlsFiles {
	t.Helper()
	ca, other := newCA(t, "msgx test CA"), newCA(t, "someone else's CA")
	dir := t.TempDir()
	f := &tlsFiles{dir: dir, ca: writeFile(t, dir, "ca.pem", ca.pem), issuer: ca}
	sc, sk := ca.issue(t, "msgx-control", true)
	f.serverCert, f.serverKey = writeFile(t, dir, "server.pem", sc), writeFile(t, dir, "server-key.pem", sk)
	cc, ck := ca.issue(t, "operator-alice", false)
	f.clientCert, f.clientKey = writeFile(t, dir, "client.pem", cc), writeFile(t, dir, "client-key.pem", ck)
	xc, xk := other.issue(t, "mallory", false)
	f.strangerCert, f.strangerKey = writeFile(t, dir, "stranger.pem", xc), writeFile(t, dir, "stranger-key.pem", xk)
	f.caPool = x509.NewCertPool()
	f.caPool.AddCert(ca.cert)
	var err error
	if f.client, err = tls.X509KeyPair(cc, ck); err != nil {
		t.Fatal(err)
	}
	if f.stranger, err = tls.X509KeyPair(xc, xk); err != nil {
		t.Fatal(err)
	}
	return f
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) controlv1.ControlServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return controlv1.NewControlServiceClient(conn)
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	procRow(t, db, 1, "DEAD", "EXHAUSTED", time.Now())
	f := newTLSFiles(t)
	logs := &testlog.Buffer{}
	in := startWith(t, db, "control-mtls", time.Now(), func(cfg *config.Config) {
		cfg.Control.TLSCert, cfg.Control.TLSKey, cfg.Control.ClientCA = f.serverCert, f.serverKey, f.ca
	}, logs)

	operator := dial(t, in.addr, credentials.NewTLS(&tls.Config{RootCAs: f.caPool, Certificates: []tls.Certificate{f.client}}))
	testwait.For(t, 15*time.Second, "the instance to become active", func() bool {
		st, err := operator.GetStatus(withToken(callCtx(t), token), &controlv1.GetStatusRequest{})
		if err != nil {
			t.Fatalf("GetStatus with a client certificate: %v", err)
		}
		return st.GetServedByActive()
	})
	if _, err := operator.Replay(withToken(callCtx(t), token), &controlv1.ReplayRequest{MsgIds: []int64{1}, DryRun: true}); err != nil {
		t.Fatalf("Replay with a client certificate: %v", err)
	}
	var subject string
	for _, a := range audits(logs) {
		if c, ok := a["caller"].(map[string]any); ok {
			subject, _ = c["cert_subject"].(string)
		}
	}
	if !strings.Contains(subject, "CN=operator-alice") {
		t.Errorf("audited certificate subject = %q, want CN=operator-alice", subject)
	}
	// The token is still required on top of the certificate.
	if _, err := operator.GetStatus(callCtx(t), &controlv1.GetStatusRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("certificate without token = %v, want Unauthenticated", err)
	}

	refused := map[string]credentials.TransportCredentials{
		"no client certificate": credentials.NewTLS(&tls.Config{RootCAs: f.caPool}),
		"untrusted client CA":   credentials.NewTLS(&tls.Config{RootCAs: f.caPool, Certificates: []tls.Certificate{f.stranger}}),
		"plaintext":             insecure.NewCredentials(),
	}
	for name, creds := range refused {
		_, err := dial(t, in.addr, creds).GetStatus(withToken(callCtx(t), token), &controlv1.GetStatusRequest{})
		if code := status.Code(err); code != codes.Unavailable {
			t.Errorf("%s: GetStatus = %v, want the connection refused (Unavailable)", name, err)
		}
	}
}

func TestTLSConfigurationIsAllOrNothing(t *testing.T) {
	t.Parallel()
	f := newTLSFiles(t)
	db := pgtest.New(t)
	for name, edit := range map[string]func(*config.Config){
		"cert without key": func(c *config.Config) { c.Control.TLSCert = f.serverCert },
		"client CA alone":  func(c *config.Config) { c.Control.ClientCA = f.ca },
		"CA file not PEM": func(c *config.Config) {
			c.Control.TLSCert, c.Control.TLSKey, c.Control.ClientCA = f.serverCert, f.serverKey, f.serverKey
		},
		"key does not match": func(c *config.Config) { c.Control.TLSCert, c.Control.TLSKey = f.serverCert, f.clientKey },
	} {
		t.Run(name, func(t *testing.T) {
			if err := newApp(t, db, edit); err == nil {
				t.Errorf("app.New accepted %s", name)
			} else {
				t.Logf("refused: %v", err)
			}
		})
	}
}

// newApp builds (but does not run) an instance with the configuration edited, and returns
// app.New's error.
func newApp(t *testing.T, db *pgtest.DB, edit func(*config.Config)) error {
	t.Helper()
	cfg := config.Default()
	cfg.PG.DSN = db.DSN
	cfg.Admin.Addr = "127.0.0.1:0"
	cfg.Control.Token = token
	edit(&cfg)
	b, err := service.New(t.Context(), "control", cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = app.New(b)
	return err
}

// With mTLS, a listed certificate subject is a role without a token: the reader subject reads
// and is refused the mutating calls, and the audit line names the role and the subject.
func TestCertificateSubjectRoles(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	procRow(t, db, 1, "DEAD", "EXHAUSTED", time.Now())
	f := newTLSFiles(t)
	logs := &testlog.Buffer{}
	in := startWith(t, db, "control-subjects", time.Now(), func(cfg *config.Config) {
		cfg.Control.TLSCert, cfg.Control.TLSKey, cfg.Control.ClientCA = f.serverCert, f.serverKey, f.ca
		cfg.Control.ReaderSubjects = []string{"CN=operator-alice,O=airport ops"} // alice only reads here
	}, logs)
	reader := dial(t, in.addr, credentials.NewTLS(&tls.Config{RootCAs: f.caPool, Certificates: []tls.Certificate{f.client}}))
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := reader.GetStatus(callCtx(t), &controlv1.GetStatusRequest{})
		if err != nil {
			t.Fatalf("GetStatus by a reader subject without a token: %v", err)
		}
		if st.GetServedByActive() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the instance never became active")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := reader.Replay(callCtx(t), &controlv1.ReplayRequest{MsgIds: []int64{1}, DryRun: true, Comment: "x"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Replay by a reader subject: %v, want PERMISSION_DENIED", err)
	}
	// The operator token on the same connection raises the caller to operator.
	if _, err := reader.Replay(withToken(callCtx(t), token), &controlv1.ReplayRequest{MsgIds: []int64{1}, DryRun: true, Comment: "x"}); status.Code(err) == codes.PermissionDenied {
		t.Errorf("Replay with the operator token: %v", err)
	}
	var roles []string
	for _, a := range audits(logs) {
		if c, ok := a["caller"].(map[string]any); ok && strings.Contains(c["cert_subject"].(string), "CN=operator-alice") {
			roles = append(roles, c["role"].(string)+":"+a["code"].(string))
		}
	}
	if strings.Join(roles, ",") != "reader:PermissionDenied,operator:OK" {
		t.Errorf("audited roles = %v, want reader:PermissionDenied then operator:OK", roles)
	}
}
