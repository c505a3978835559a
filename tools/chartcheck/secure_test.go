package chartcheck

import (
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// TestSecureDefaults renders the default values and checks what a secure install needs
// without any value set: the services connect as the DML-only role and the migration Job as the
// schema owner, every DSN example verifies the server's certificate, and a NetworkPolicy per
// service admits only the documented flows in and out (docs/security.md).
func TestSecureDefaults(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	chart := filepath.Join(root, chartDir)
	m := decodeAll(t, run(t, helm, "template", "msgx", chart, "-f", filepath.Join(chart, "ci/tokens-values.yaml")))
	const fullname = "msgx-msgexchange"

	conns := m.secrets[fullname+"-connections"]
	migrate := m.secrets[fullname+"-migrate"]
	if conns == nil || migrate == nil {
		t.Fatalf("want the connections Secret and the migration hook Secret, got %v", sortedKeys(m.secrets))
	}
	user := func(dsn string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("DSN does not parse: %v", err)
		}
		return u.User.Username()
	}
	if u := user(conns.StringData["pg-dsn"]); u != "msgx_app" {
		t.Errorf("the services connect as %q, want the DML-only role msgx_app", u)
	}
	if u := user(migrate.StringData["pg-dsn"]); u != "msgx" {
		t.Errorf("the migration Job connects as %q, want the schema owner msgx", u)
	}
	for key, want := range map[string]string{"pg-dsn": "sslmode=verify-full", "mysql-dsn": "tls=true", "redis-url": "rediss://"} {
		if v := conns.StringData[key]; !strings.Contains(v, want) {
			t.Errorf("the example %s %q does not verify TLS (%s)", key, v, want)
		}
	}
	if v := migrate.StringData["pg-dsn"]; !strings.Contains(v, "sslmode=verify-full") {
		t.Errorf("the example migration DSN %q does not verify TLS", v)
	}

	// Egress by role: DNS over UDP and TCP for every one, then what each connects to.
	wantEgress := map[string][]string{
		"ingest":     {"TCP/3306", "TCP/53", "TCP/5432", "UDP/53"},
		"pump":       {"TCP/3306", "TCP/53", "TCP/5432", "TCP/6379", "UDP/53"},
		"dispatcher": {"TCP/3306", "TCP/53", "TCP/5432", "TCP/9092", "UDP/53"},
		"backfill":   {"TCP/3306", "TCP/53", "TCP/5432", "TCP/6379", "UDP/53"},
		"control":    {"TCP/3306", "TCP/53", "TCP/5432", "TCP/6379", "UDP/53"},
	}
	for _, role := range roles {
		np := m.policies[fullname+"-"+role]
		if np == nil {
			t.Errorf("no NetworkPolicy for %s by default", role)
			continue
		}
		if !slices.Contains(np.Spec.PolicyTypes, "Ingress") || !slices.Contains(np.Spec.PolicyTypes, "Egress") {
			t.Errorf("NetworkPolicy %s: policyTypes %v, want Ingress and Egress", np.Name, np.Spec.PolicyTypes)
		}
		if got := egressPorts(np.Spec.Egress); !slices.Equal(got, wantEgress[role]) {
			t.Errorf("NetworkPolicy %s: egress %v, want %v", np.Name, got, wantEgress[role])
		}
		ingress := map[string]int{}
		for _, r := range np.Spec.Ingress {
			for _, p := range r.Ports {
				ingress[p.Port.String()] = len(r.From)
			}
		}
		want := map[string]int{"admin": 0} // open to every namespace when admin.namespaces is empty
		if role == "control" {
			want["grpc"] = 1 // the helm test pod only
		}
		if fmt.Sprint(ingress) != fmt.Sprint(want) {
			t.Errorf("NetworkPolicy %s: ingress ports (with their number of peers) %v, want %v (compat closed until senders are named)", np.Name, ingress, want)
		}
	}

	// The production values: tracing adds the OTLP port; named compat senders by CIDR.
	m = decodeAll(t, run(t, helm, "template", "gw", chart, "-f", filepath.Join(chart, "ci/production-values.yaml"),
		"--set", "networkPolicy.compat.ipBlocks={10.20.0.0/16}", "--set", "networkPolicy.egress.postgres.to[0].ipBlock.cidr=10.30.0.0/24"))
	np := m.policies["gw-msgexchange-ingest"]
	if np == nil {
		t.Fatal("no NetworkPolicy for ingest with the production values")
	}
	if got := egressPorts(np.Spec.Egress); !slices.Contains(got, "TCP/4317") {
		t.Errorf("ingest's egress %v lacks the OTLP collector's port 4317 with tracing.otlpEndpoint set", got)
	}
	var compat, pg []string
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			if p.Port.String() == "http" {
				for _, f := range r.From {
					if f.IPBlock != nil {
						compat = append(compat, f.IPBlock.CIDR)
					}
				}
			}
		}
	}
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			if p.Port.IntValue() == 5432 {
				for _, to := range r.To {
					if to.IPBlock != nil {
						pg = append(pg, to.IPBlock.CIDR)
					}
				}
			}
		}
	}
	if !slices.Equal(compat, []string{"10.20.0.0/16"}) || !slices.Equal(pg, []string{"10.30.0.0/24"}) {
		t.Errorf("compat ingress from %v and PostgreSQL egress to %v, want 10.20.0.0/16 and 10.30.0.0/24", compat, pg)
	}
}

func egressPorts(rules []networkingv1.NetworkPolicyEgressRule) []string {
	var out []string
	for _, r := range rules {
		for _, p := range r.Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			out = append(out, fmt.Sprintf("%s/%s", proto, p.Port.String()))
		}
	}
	sort.Strings(out)
	return out
}

// TestUnsafeValuesAreRefused: a render that would run the services as the schema owner, name
// certificate subjects no CA can verify, set a client CA without a server certificate, give
// the reader the operator's token (each a value control refuses at start-up), or connect to
// Kafka in the clear, fails with a message naming what to set; the explicit values that accept
// or fix it render.
func TestUnsafeValuesAreRefused(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	chart := filepath.Join(root, chartDir)
	tokens := filepath.Join(chart, "ci/tokens-values.yaml")
	cases := []struct {
		name   string
		set    []string
		refuse []string // substrings of the refusal; nil: it renders
	}{
		{"no migration DSN", []string{"connections.migrationPgDSN="}, []string{"connections.migrationPgDSN is empty", "connections.allowOwnerDSN=true"}},
		{"no migration DSN, accepted", []string{"connections.migrationPgDSN=", "connections.allowOwnerDSN=true"}, nil},
		{"the same DSN twice", []string{"connections.migrationPgDSN=postgres://msgx_app:msgx_app@postgresql:5432/msgx?sslmode=verify-full"},
			[]string{"equals connections.pgDSN", "connections.allowOwnerDSN=true"}},
		{"an existing Secret without migration-pg-dsn", []string{"connections.existingSecret=msgx-connections"},
			[]string{"existingSecretHasMigrationDSN", "connections.allowOwnerDSN=true"}},
		{"an existing Secret with migration-pg-dsn", []string{"connections.existingSecret=msgx-connections", "connections.existingSecretHasMigrationDSN=true"}, nil},
		{"an existing Secret without it, accepted", []string{"connections.existingSecret=msgx-connections", "connections.allowOwnerDSN=true"}, nil},
		{"operator subjects without a client CA", []string{"config.control\\.operator-subjects=CN=ops\\,O=Airport"},
			[]string{"config.control.operator-subjects", "services.control.tls.clientCASecret"}},
		{"reader subjects without a client CA", []string{"config.control\\.reader-subjects=CN=viewer", "services.control.tls.secretName=msgx-tls"},
			[]string{"config.control.reader-subjects", "services.control.tls.clientCASecret"}},
		{"subjects with a client CA", []string{"config.control\\.operator-subjects=CN=ops", "services.control.tls.secretName=msgx-tls",
			"services.control.tls.clientCASecret=msgx-ca"}, nil},
		{"a renamed key", []string{"config.log-level=info"}, []string{"config.log-level was renamed to config.log.level"}},
		{"a Redis URL and a Sentinel master", []string{"config.redis\\.sentinel-master=m", "config.redis\\.sentinel-addrs=s:26379"},
			[]string{"connections.redisURL", "name one Redis"}},
		{"a Sentinel master without sentinels", []string{"connections.redisURL=", "config.redis\\.sentinel-master=m"},
			[]string{"config.redis.sentinel-addrs"}},
		{"a sentinel password without a master", []string{"connections.redisSentinelPassword=pw"},
			[]string{"config.redis.sentinel-master is empty"}},
		{"Sentinel from an existing Secret", []string{"connections.existingSecret=msgx-connections", "connections.existingSecretHasMigrationDSN=true",
			"config.redis\\.sentinel-master=m", "config.redis\\.sentinel-addrs=s:26379", "connections.existingSecretHasRedisSentinelDataPassword=true"}, nil},
		{"a client CA without a server certificate", []string{"services.control.tls.clientCASecret=msgx-ca"},
			[]string{"services.control.tls.secretName is empty"}},
		{"the reader token equal to the operator's", []string{"tokens.readerToken=chart-check-operator-token-0123456789abcdef"},
			[]string{"tokens.readerToken equals tokens.controlToken"}},
		{"Kafka without TLS", []string{"kafka.tls.enabled=false"}, []string{"kafka.tls.enabled is false", "kafka.allowPlaintext=true"}},
		{"Kafka without TLS, accepted", []string{"kafka.tls.enabled=false", "kafka.allowPlaintext=true"}, nil},
		{"SASL without TLS", []string{"kafka.tls.enabled=false", "kafka.allowPlaintext=true", "kafka.sasl.mechanism=PLAIN",
			"kafka.sasl.username=msgx", "kafka.sasl.passwordSecret=msgx-kafka"}, []string{"kafka.sasl.mechanism needs kafka.tls.enabled"}},
		{"SASL without its password", []string{"kafka.sasl.mechanism=SCRAM-SHA-512", "kafka.sasl.username=msgx"},
			[]string{"kafka.sasl.passwordSecret"}},
		{"a SASL user without a mechanism", []string{"kafka.sasl.username=msgx"}, []string{"kafka.sasl.mechanism is empty"}},
		{"a Kafka CA without TLS", []string{"kafka.tls.enabled=false", "kafka.allowPlaintext=true", "kafka.tls.caSecret=kafka-ca"},
			[]string{"kafka.tls.enabled is false"}},
		{"an unknown SASL mechanism", []string{"kafka.sasl.mechanism=GSSAPI", "kafka.sasl.username=msgx", "kafka.sasl.passwordSecret=s"},
			[]string{"/kafka/sasl/mechanism", "SCRAM-SHA-512"}},
		{"mutual TLS and SCRAM", []string{"kafka.tls.caSecret=kafka-ca", "kafka.tls.clientCertSecret=msgx-kafka-client",
			"kafka.tls.serverName=kafka.airport.example", "kafka.sasl.mechanism=SCRAM-SHA-256", "kafka.sasl.username=msgx",
			"kafka.sasl.passwordSecret=msgx-kafka"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"template", "msgx", chart, "-f", tokens}
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			out, err := exec.Command(helm, args...).CombinedOutput()
			if c.refuse == nil {
				if err != nil {
					t.Fatalf("refused: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("rendered; want a refusal naming %v", c.refuse)
			}
			for _, want := range c.refuse {
				if !strings.Contains(string(out), want) {
					t.Errorf("the refusal does not name %q:\n%s", want, out)
				}
			}
		})
	}
}
