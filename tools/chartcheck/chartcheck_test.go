// Package chartcheck renders the Helm chart deploy/helm/msgexchange with its default values and
// with production-like values, decodes every manifest strictly into the Kubernetes API types
// (an unknown or misspelt field fails), and checks what the chart promises: one Deployment per
// service with replicas 1 and Recreate, the restricted security context, probes on the admin
// port, the configuration the services accept, the secrets, the migration hook and one alert
// per condition docs/operations.md names, each with its runbook in docs/runbooks.md. Schema
// validators that download schemas cannot run here; the k8s.io/api types are the schema.
package chartcheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

const chartDir = "deploy/helm/msgexchange"

// withCRDs renders as on a cluster that serves the Prometheus Operator's CRDs: the chart renders
// the ServiceMonitor and the PrometheusRule only there.
var withCRDs = []string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"}

var roles = []string{"ingest", "pump", "dispatcher", "backfill", "control"}

// chartManaged are the parameters the chart sets itself rather than from values.config, and why.
var chartManaged = map[string]string{
	"pg.dsn":                            "a mounted file (pg.dsn-file) of the connections Secret",
	"mysql.dsn":                         "a mounted file (mysql.dsn-file) of the connections Secret",
	"redis.url":                         "a mounted file (redis.url-file) of the connections Secret",
	"pg.dsn-file":                       "the mounted connections Secret",
	"mysql.dsn-file":                    "the mounted connections Secret",
	"redis.url-file":                    "the mounted connections Secret",
	"control.token":                     "the token is a mounted file (control.token-file)",
	"control.token-file":                "the mounted tokens Secret",
	"control.reader-token":              "the token is a mounted file (control.reader-token-file)",
	"control.reader-token-file":         "the mounted tokens Secret",
	"control.tokens":                    "the named tokens are a mounted file (control.tokens-file) of tokens.callers",
	"control.tokens-file":               "the mounted tokens Secret, with tokens.callers",
	"http.token":                        "a mounted file (http.token-file) of the tokens Secret",
	"http.token-file":                   "the mounted tokens Secret",
	"control.tls-cert":                  "a mounted TLS Secret (services.control.tls)",
	"control.tls-key":                   "a mounted TLS Secret (services.control.tls)",
	"control.client-ca":                 "a mounted CA Secret (services.control.tls)",
	"admin.addr":                        "fixed: all interfaces, port 9090 (the probes, the ServiceMonitor, kubectl port-forward)",
	"http.addr":                         "fixed: the ingest Service targets port 8080",
	"grpc.addr":                         "fixed: the control Service targets port 9000",
	"instance":                          "the pod name",
	"control.insecure":                  "development only; the chart always provides a token",
	"http.insecure":                     "development only; the chart always provides a token",
	"kafka.tls":                         "values.kafka.tls.enabled (the chart verifies TLS by default)",
	"kafka.tls-ca":                      "a mounted CA Secret (kafka.tls.caSecret)",
	"kafka.tls-server-name":             "values.kafka.tls.serverName",
	"kafka.tls-cert":                    "a mounted TLS Secret (kafka.tls.clientCertSecret)",
	"kafka.tls-key":                     "a mounted TLS Secret (kafka.tls.clientCertSecret)",
	"kafka.sasl-mechanism":              "values.kafka.sasl.mechanism",
	"kafka.sasl-username":               "values.kafka.sasl.username",
	"kafka.sasl-password":               "a mounted file (kafka.sasl-password-file) of kafka.sasl.passwordSecret",
	"kafka.sasl-password-file":          "the mounted kafka.sasl.passwordSecret",
	"redis.sentinel-password":           "a mounted file (redis.sentinel-password-file) of the connections Secret",
	"redis.sentinel-password-file":      "the mounted connections Secret (connections.redisSentinelPassword)",
	"redis.sentinel-data-password":      "a mounted file (redis.sentinel-data-password-file) of the connections Secret",
	"redis.sentinel-data-password-file": "the mounted connections Secret (connections.redisSentinelDataPassword)",
}

// chartDefaults are values.config defaults that differ from the programs' on purpose.
var chartDefaults = map[string]string{
	// The programs' default is empty (the dispatcher refuses to start without one); a cluster
	// has a Kafka of its own.
	"kafka.brokers": "kafka:9092",
}

// wantAlerts are the alerts of the PrometheusRule: one per condition docs/operations.md names.
var wantAlerts = []string{
	"MsgxMessagesDead",            // DEAD messages
	"MsgxQueueHeadTooOld",         // head age over pipeline.head-age-alert
	"MsgxLateArrivalDetected",     // late arrival detected
	"MsgxIngestHoleStuck",         // hole stuck past pipeline.max-commit-delay
	"MsgxIngestWatermarkLag",      // watermark lag
	"MsgxIngestRowsWaiting",       // the oldest row beyond W waits past max-commit-delay
	"MsgxIngestContractViolation", // the inbox broke the ID or marker contract (issue #15)
	"MsgxBackfillAbandoned",       // backfill abandoned
	"MsgxBackfillRetriesExceeded", // pipeline.backfill-max-attempts (alert only)
	"MsgxDispatcherDead",          // dispatcher DEAD
	"MsgxDispatcherOldestPending", // delivery stalled (docs/dispatcher.md)
	"MsgxPumpBlocked",             // an outage holds the pump (docs/architecture.md)
	"MsgxIngestBlocked",           // an outage holds discovery
	"MsgxBackfillBlocked",         // an outage holds the backfill
	"MsgxProjectionDrift",         // the consistency sentinel keeps finding drift
	"MsgxEndToEndLatencyHigh",     // enqueue → Kafka acknowledgement too slow
	"MsgxRoleNoActiveInstance",    // a role with no active instance
}

// rendering is one `helm template` run and what it must contain.
type rendering struct {
	name      string
	release   string
	namespace string
	values    []string // -f files, relative to the chart
	// Secrets named in values that the chart must reference instead of rendering its own.
	connectionsSecret, tokensSecret string
	// kafkaSecrets are the existing Secrets values.kafka names (a CA, the SASL password).
	kafkaSecrets []string
	// redisSentinelPasswords: the values name Redis under Sentinel with both passwords.
	redisSentinelPasswords bool
	headAgeSeconds         string
	maxCommitDelaySeconds  string
	gracePeriod            int64
}

var renderings = []rendering{
	{
		name: "defaults", release: "msgx", namespace: "default", values: []string{"ci/tokens-values.yaml"},
		connectionsSecret: "msgx-msgexchange-connections", tokensSecret: "msgx-msgexchange-tokens",
		headAgeSeconds: "600", maxCommitDelaySeconds: "300", gracePeriod: 30,
	},
	{
		name: "production", release: "gw", namespace: "gateway", values: []string{"ci/production-values.yaml"},
		connectionsSecret: "msgx-connections", tokensSecret: "msgx-tokens", kafkaSecrets: []string{"kafka-cluster-ca", "msgx-kafka"},
		headAgeSeconds: "900", maxCommitDelaySeconds: "600", gracePeriod: 55,
	},
	{
		name: "sentinel", release: "msgx", namespace: "default", values: []string{"ci/tokens-values.yaml", "ci/sentinel-values.yaml"},
		connectionsSecret: "msgx-msgexchange-connections", tokensSecret: "msgx-msgexchange-tokens", redisSentinelPasswords: true,
		headAgeSeconds: "600", maxCommitDelaySeconds: "300", gracePeriod: 30,
	},
}

func TestChartRendersValidManifests(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	for _, r := range renderings {
		t.Run(r.name, func(t *testing.T) {
			args := append([]string{"template", r.release, filepath.Join(root, chartDir), "--namespace", r.namespace}, withCRDs...)
			for _, v := range r.values {
				args = append(args, "-f", filepath.Join(root, chartDir, v))
			}
			out := run(t, helm, args...)
			m := decodeAll(t, out)
			checkManifests(t, root, r, m)
		})
	}
}

// TestValuesListEveryParameter keeps values.yaml's config in step with pkg/config: every
// parameter an operator may set is there under its name in docs/environment.md, with the programs' default.
func TestValuesListEveryParameter(t *testing.T) {
	root := repo.Root(t)
	raw, err := os.ReadFile(filepath.Join(root, chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Config map[string]any `json:"config"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	keys := config.Keys()
	for k := range chartManaged {
		if _, ok := keys[k]; !ok {
			t.Errorf("chartManaged names %q, which pkg/config no longer has: remove it here", k)
		}
	}
	for k, def := range keys {
		if _, managed := chartManaged[k]; managed {
			if _, ok := values.Config[k]; ok {
				t.Errorf("values.yaml config sets %q, which the chart sets itself (%s)", k, chartManaged[k])
			}
			continue
		}
		v, ok := values.Config[k]
		if !ok {
			t.Errorf("values.yaml config lacks the parameter %q (default %q): add `%s: %q` to %s/values.yaml",
				k, def, k, def, chartDir)
			continue
		}
		want := def
		if d, ok := chartDefaults[k]; ok {
			want = d
		}
		if got := valueString(v); got != want {
			t.Errorf("values.yaml config %s = %q, but the default is %q", k, got, want)
		}
	}
	for k := range values.Config {
		if _, ok := keys[k]; !ok {
			t.Errorf("values.yaml config has %q, which is not a parameter of pkg/config", k)
		}
	}
}

// TestSecondsHelper checks the template helper that turns parameter durations into alert
// thresholds, with the durations pkg/config accepts.
func TestSecondsHelper(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	for _, c := range []struct {
		in   string
		want float64
	}{
		{"10m", 600}, {"90s", 90}, {"1h30m", 5400}, {"30d", 30 * 86400}, {"1500ms", 1.5}, {"2h0m5s", 7205},
	} {
		out := run(t, helm, append([]string{"template", "x", filepath.Join(root, chartDir), "-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml"), "--show-only", "templates/prometheusrule.yaml",
			"--set-string", "config.pipeline\\.head-age-alert=" + c.in}, withCRDs...)...)
		m := regexp.MustCompile(`msgx_pump_head_stuck_seconds\{[^}]*\}\) > ([0-9.e+]+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no head-age threshold in\n%s", c.in, out)
		}
		got, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil || got != c.want {
			t.Errorf("head-age-alert %s: threshold %s, want %v", c.in, m[1], c.want)
		}
		d, err := config.ParseDuration(c.in)
		if err != nil || d.Seconds() != c.want {
			t.Errorf("the case %s disagrees with config.ParseDuration (%v, %v)", c.in, d, err)
		}
	}
	cmd := exec.Command(helm, append([]string{"template", "x", filepath.Join(root, chartDir), "-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml"), "--set-string", "config.pipeline\\.head-age-alert=ten minutes"}, withCRDs...)...)
	// values.schema.json refuses it before the helper sees it; both name the parameter.
	if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("pipeline.head-age-alert")) {
		t.Errorf("an invalid duration must fail the rendering; got err=%v\n%s", err, out)
	}
}

// manifests are the decoded objects of one rendering.
type manifests struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	jobs        map[string]*batchv1.Job
	monitors    []*serviceMonitor
	rules       []*prometheusRule
	pdbs        map[string]*policyv1.PodDisruptionBudget
	policies    map[string]*networkingv1.NetworkPolicy
	accounts    map[string]*corev1.ServiceAccount
	tests       map[string]*corev1.Pod
}

// serviceMonitor and prometheusRule are the fields of the monitoring.coreos.com/v1 CRDs the
// chart uses (not in k8s.io/api); decoding is strict, so a field outside them fails.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert         string            `json:"alert,omitempty"`
				Record        string            `json:"record,omitempty"`
				Expr          string            `json:"expr"`
				For           string            `json:"for,omitempty"`
				KeepFiringFor string            `json:"keep_firing_for,omitempty"`
				Labels        map[string]string `json:"labels,omitempty"`
				Annotations   map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// decodeAll splits helm's output into documents and decodes each strictly by its kind.
func decodeAll(t *testing.T, out []byte) *manifests {
	t.Helper()
	m := &manifests{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}, jobs: map[string]*batchv1.Job{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, policies: map[string]*networkingv1.NetworkPolicy{},
		accounts: map[string]*corev1.ServiceAccount{}, tests: map[string]*corev1.Pod{},
	}
	for i, doc := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(out), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("document %d is not YAML: %v\n%s", i, err, doc)
		}
		var obj any
		var keep func()
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			d := &appsv1.Deployment{}
			obj, keep = d, func() { m.deployments[d.Name] = d }
		case "v1 Service":
			s := &corev1.Service{}
			obj, keep = s, func() { m.services[s.Name] = s }
		case "v1 ConfigMap":
			c := &corev1.ConfigMap{}
			obj, keep = c, func() { m.configMaps[c.Name] = c }
		case "v1 Secret":
			s := &corev1.Secret{}
			obj, keep = s, func() { m.secrets[s.Name] = s }
		case "batch/v1 Job":
			j := &batchv1.Job{}
			obj, keep = j, func() { m.jobs[j.Name] = j }
		case "policy/v1 PodDisruptionBudget":
			b := &policyv1.PodDisruptionBudget{}
			obj, keep = b, func() { m.pdbs[b.Name] = b }
		case "networking.k8s.io/v1 NetworkPolicy":
			n := &networkingv1.NetworkPolicy{}
			obj, keep = n, func() { m.policies[n.Name] = n }
		case "v1 ServiceAccount":
			a := &corev1.ServiceAccount{}
			obj, keep = a, func() { m.accounts[a.Name] = a }
		case "v1 Pod":
			p := &corev1.Pod{}
			obj, keep = p, func() { m.tests[p.Name] = p }
		case "monitoring.coreos.com/v1 ServiceMonitor":
			s := &serviceMonitor{}
			obj, keep = s, func() { m.monitors = append(m.monitors, s) }
		case "monitoring.coreos.com/v1 PrometheusRule":
			r := &prometheusRule{}
			obj, keep = r, func() { m.rules = append(m.rules, r) }
		default:
			t.Fatalf("document %d: unexpected kind %q %q; teach chartcheck to decode it\n%s", i, tm.APIVersion, tm.Kind, doc)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("document %d (%s): strict decoding failed: %v\n%s", i, tm.Kind, err, doc)
		}
		keep()
	}
	return m
}

func checkManifests(t *testing.T, root string, r rendering, m *manifests) {
	fullname := r.release + "-msgexchange"
	if len(m.deployments) != len(roles) {
		t.Errorf("%d Deployments, want one per service (%d)", len(m.deployments), len(roles))
	}
	cm, ok := m.configMaps[fullname+"-config"]
	if !ok {
		t.Fatalf("no ConfigMap %s-config", fullname)
	}
	for _, role := range roles {
		d, ok := m.deployments[fullname+"-"+role]
		if !ok {
			t.Errorf("no Deployment %s-%s", fullname, role)
			continue
		}
		checkDeployment(t, r, m, cm, role, d)
	}
	checkSecrets(t, r, m, fullname)
	checkServices(t, m, fullname)
	checkMigration(t, r, m, fullname)
	checkMonitoring(t, root, r, m, fullname)
	checkDashboard(t, root, m, fullname)
	checkHelmTest(t, r, m, fullname)
	checkPodSecurity(t, m)
}

// checkHelmTest: the `helm test` hook runs msgx-control probe on control's gRPC health (unless
// client certificates are required, which it cannot present) and every service's /readyz.
func checkHelmTest(t *testing.T, r rendering, m *manifests, fullname string) {
	t.Helper()
	p, ok := m.tests[fullname+"-test-health"]
	if !ok {
		t.Fatalf("no helm test Pod %s-test-health", fullname)
	}
	if p.Annotations["helm.sh/hook"] != "test" || p.Spec.RestartPolicy != corev1.RestartPolicyNever || len(p.Spec.Containers) != 1 {
		t.Fatalf("Pod %s: hook %q restartPolicy %q, want a test hook that runs once", p.Name, p.Annotations["helm.sh/hook"], p.Spec.RestartPolicy)
	}
	c := p.Spec.Containers[0]
	checkRestricted(t, "Pod "+p.Name, c.SecurityContext)
	if !strings.Contains(c.Image, "/msgx-control:") || len(c.Args) == 0 || c.Args[0] != "probe" {
		t.Errorf("Pod %s runs %s %v, want msgx-control probe", p.Name, c.Image, c.Args)
	}
	mTLS := r.name == "production" // services.control.tls.clientCASecret is set there
	if got := slices.Contains(c.Args, "-grpc="+fullname+"-control:9000"); got == mTLS {
		t.Errorf("Pod %s args %v: the gRPC health check must run unless client certificates are required", p.Name, c.Args)
	}
	for _, role := range roles {
		if !slices.Contains(c.Args, "-readyz=http://"+fullname+"-"+role+":9090/readyz") {
			t.Errorf("Pod %s does not check the /readyz of %s: %v", p.Name, role, c.Args)
		}
	}
}

func checkDeployment(t *testing.T, r rendering, m *manifests, cm *corev1.ConfigMap, role string, d *appsv1.Deployment) {
	t.Helper()
	where := "Deployment " + d.Name
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("%s: replicas %v, want 1 (single active instance per role)", where, d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("%s: strategy %q, want Recreate", where, d.Spec.Strategy.Type)
	}
	if !selectorMatches(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("%s: selector %v does not match the pod labels %v", where, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	pod := d.Spec.Template.Spec
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds != r.gracePeriod {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want %d (shutdown-timeout + 10s)", where, pod.TerminationGracePeriodSeconds, r.gracePeriod)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v, want runAsNonRoot and seccomp RuntimeDefault", where, psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", where, len(pod.Containers))
	}
	c := pod.Containers[0]
	if !strings.HasSuffix(strings.SplitN(c.Image, ":", 2)[0], "/msgx-"+role) {
		t.Errorf("%s: image %q is not msgx-%s", where, c.Image, role)
	}
	checkRestricted(t, where, c.SecurityContext)
	// Control is ready for traffic only while it holds the role (issue #56, finding 5).
	readiness := "/readyz"
	if role == "control" {
		readiness = "/readyz/active"
	}
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, readiness: c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s: probe %s missing or not on the admin port: %+v", where, name, p)
		}
	}
	if port(c.Ports, "admin") != 9090 {
		t.Errorf("%s: no admin port 9090", where)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: resources %+v, want cpu and memory requests and a memory limit", where, c.Resources)
	}

	// The environment the process gets: the ConfigMap, then the literal variables; the secret
	// references must name a Secret that holds the key.
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil || from.ConfigMapRef.Name != cm.Name {
			t.Errorf("%s: envFrom %+v, want the ConfigMap %s", where, from, cm.Name)
			continue
		}
		for k, v := range cm.Data {
			env[k] = v
		}
	}
	mounts := map[string]string{} // mount path → volume
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm.Name
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			checkSecretRef(t, where+" "+e.Name, r, m, ref.Name, ref.Key)
			env[e.Name] = "secret"
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = "pod-ip"
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = "pod-name"
		default:
			t.Errorf("%s: %s has an unexpected source %+v", where, e.Name, e.ValueFrom)
		}
	}
	secretFiles := map[string]string{"MSGX_PG_DSN": "pg-dsn", "MSGX_MYSQL_DSN": "mysql-dsn", "MSGX_REDIS_URL": "redis-url"}
	if env["MSGX_REDIS_SENTINEL_MASTER"] != "" {
		// One Redis, named one way: under Sentinel there is no URL, and the passwords are files.
		delete(secretFiles, "MSGX_REDIS_URL")
		if _, ok := env["MSGX_REDIS_URL_FILE"]; ok {
			t.Errorf("%s: MSGX_REDIS_URL_FILE is set beside MSGX_REDIS_SENTINEL_MASTER: the services refuse the mix", where)
		}
		for k, key := range map[string]string{"MSGX_REDIS_SENTINEL_PASSWORD": "redis-sentinel-password", "MSGX_REDIS_SENTINEL_DATA_PASSWORD": "redis-sentinel-data-password"} {
			if _, inEnv := env[k]; inEnv {
				t.Errorf("%s: %s is in the environment; it must be a file mounted from a Secret (%s_FILE)", where, k, k)
			}
			if r.redisSentinelPasswords {
				checkSecretFile(t, r, m, where, pod, mounts, k+"_FILE", env[k+"_FILE"], key)
			}
		}
	}
	for k, key := range secretFiles {
		if _, inEnv := env[k]; inEnv {
			t.Errorf("%s: %s is in the environment; it must be a file mounted from a Secret (%s_FILE)", where, k, k)
		}
		checkSecretFile(t, r, m, where, pod, mounts, k+"_FILE", env[k+"_FILE"], key)
	}
	if env["MSGX_INSTANCE"] != "pod-name" {
		t.Errorf("%s: MSGX_INSTANCE must be the pod name", where)
	}
	checkAdminAddr(t, where, env["MSGX_ADMIN_ADDR"], port(c.Ports, "admin"))
	switch role {
	case "ingest":
		if env["MSGX_HTTP_ADDR"] != ":8080" || port(c.Ports, "http") != 8080 {
			t.Errorf("%s: compat HTTP must listen on :8080", where)
		}
		checkSecretFile(t, r, m, where, pod, mounts, "MSGX_HTTP_TOKEN_FILE", env["MSGX_HTTP_TOKEN_FILE"], "http-token")
	case "control":
		if env["MSGX_GRPC_ADDR"] != ":9000" || port(c.Ports, "grpc") != 9000 {
			t.Errorf("%s: gRPC must listen on :9000", where)
		}
		checkSecretFile(t, r, m, where, pod, mounts, "MSGX_CONTROL_TOKEN_FILE", env["MSGX_CONTROL_TOKEN_FILE"], "control-token")
		checkSecretFile(t, r, m, where, pod, mounts, "MSGX_CONTROL_READER_TOKEN_FILE", env["MSGX_CONTROL_READER_TOKEN_FILE"], "control-reader-token")
	case "dispatcher":
		// TLS unless a value accepted plaintext; the password only ever a mounted file.
		if env["MSGX_KAFKA_TLS"] != "true" {
			t.Errorf("%s: MSGX_KAFKA_TLS is %q: the chart must verify TLS to Kafka unless kafka.allowPlaintext", where, env["MSGX_KAFKA_TLS"])
		}
		if _, inEnv := env["MSGX_KAFKA_SASL_PASSWORD"]; inEnv {
			t.Errorf("%s: MSGX_KAFKA_SASL_PASSWORD is in the environment; it must be a file mounted from a Secret", where)
		}
		if env["MSGX_KAFKA_SASL_MECHANISM"] != "" {
			checkSecretFile(t, r, m, where, pod, mounts, "MSGX_KAFKA_SASL_PASSWORD_FILE", env["MSGX_KAFKA_SASL_PASSWORD_FILE"], "sasl-password")
		}
		if ca := env["MSGX_KAFKA_TLS_CA"]; ca != "" {
			checkSecretFile(t, r, m, where, pod, mounts, "MSGX_KAFKA_TLS_CA", ca, "ca.crt")
		}
	}

	// What the chart renders must be a configuration the services accept.
	for k := range cm.Data {
		if !isParamEnv(k) {
			t.Errorf("ConfigMap %s: %s is not the variable of any parameter", cm.Name, k)
		}
	}
	loaded := config.Env{}
	for k, v := range env {
		switch k {
		case "MSGX_CONTROL_TOKEN_FILE", "MSGX_CONTROL_READER_TOKEN_FILE", "MSGX_HTTP_TOKEN_FILE", "MSGX_PG_DSN_FILE",
			"MSGX_MYSQL_DSN_FILE", "MSGX_REDIS_URL_FILE", "MSGX_CONTROL_TLS_CERT", "MSGX_CONTROL_TLS_KEY", "MSGX_CONTROL_CLIENT_CA",
			"MSGX_KAFKA_TLS_CA", "MSGX_KAFKA_TLS_CERT", "MSGX_KAFKA_TLS_KEY":
			// Paths inside the pod; checked above, not readable here.
			continue
		case "MSGX_REDIS_SENTINEL_PASSWORD_FILE", "MSGX_REDIS_SENTINEL_DATA_PASSWORD_FILE":
			loaded[strings.TrimSuffix(k, "_FILE")] = "from-the-mounted-secret"
			continue
		case "MSGX_KAFKA_SASL_PASSWORD_FILE":
			// The password the mounted file holds: what the rules relating the settings see.
			loaded["MSGX_KAFKA_SASL_PASSWORD"] = "from-the-mounted-secret"
			continue
		}
		loaded[k] = v
	}
	if _, err := config.Load(loaded, config.AllServices); err != nil {
		t.Errorf("%s: the rendered environment is refused by pkg/config: %v", where, err)
	}
}

func checkRestricted(t *testing.T, where string, sc *corev1.SecurityContext) {
	t.Helper()
	if sc == nil {
		t.Errorf("%s: no container securityContext", where)
		return
	}
	ok := sc.RunAsNonRoot != nil && *sc.RunAsNonRoot &&
		sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem &&
		sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation &&
		sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0 &&
		sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault &&
		(sc.Privileged == nil || !*sc.Privileged)
	if !ok {
		t.Errorf("%s: container securityContext %+v is not restricted (runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, drop ALL, seccomp RuntimeDefault)", where, sc)
	}
}

// checkSecretFile follows a _FILE variable to the Secret key it is mounted from.
func checkSecretFile(t *testing.T, r rendering, m *manifests, where string, pod corev1.PodSpec, mounts map[string]string, envName, path, key string) {
	t.Helper()
	dir, file := filepath.Split(path)
	volume, ok := mounts[filepath.Clean(dir)]
	if path == "" || !ok {
		t.Errorf("%s: %s %q is not in a mounted volume (%v)", where, envName, path, mounts)
		return
	}
	for _, v := range pod.Volumes {
		if v.Name != volume {
			continue
		}
		if v.Secret == nil {
			t.Errorf("%s: the volume %s of %s is not a Secret", where, volume, envName)
			return
		}
		for _, item := range v.Secret.Items {
			if item.Path == file {
				if item.Key != key {
					t.Errorf("%s: %s is the Secret key %q, want %q", where, envName, item.Key, key)
				}
				checkSecretRef(t, where+" "+envName, r, m, v.Secret.SecretName, item.Key)
				return
			}
		}
		t.Errorf("%s: the volume %s has no item %s", where, volume, file)
		return
	}
	t.Errorf("%s: no volume %s", where, volume)
}

// checkSecretRef checks that a reference names the release's own Secret holding the key, or
// the existing Secret named in values.
func checkSecretRef(t *testing.T, where string, r rendering, m *manifests, name, key string) {
	t.Helper()
	if name != r.connectionsSecret && name != r.tokensSecret && !slices.Contains(r.kafkaSecrets, name) {
		t.Errorf("%s: refers to Secret %q, want %s, %s or one of %v", where, name, r.connectionsSecret, r.tokensSecret, r.kafkaSecrets)
		return
	}
	s, rendered := m.secrets[name]
	if !rendered {
		return // an existing Secret from values: its keys are documented in values.yaml
	}
	_, inData := s.Data[key]
	_, inString := s.StringData[key]
	if !inData && !inString {
		t.Errorf("%s: Secret %s has no key %q", where, name, key)
	}
}

func checkSecrets(t *testing.T, r rendering, m *manifests, fullname string) {
	t.Helper()
	own := r.connectionsSecret == fullname+"-connections"
	if _, rendered := m.secrets[r.connectionsSecret]; rendered != own {
		t.Errorf("Secret %s rendered=%v, want %v", r.connectionsSecret, rendered, own)
	}
	if s, ok := m.secrets[r.tokensSecret]; ok {
		for _, k := range []string{"control-token", "control-reader-token", "http-token"} {
			if len(s.Data[k]) < 32 {
				t.Errorf("Secret %s: %s is %d bytes, want a generated token of at least 32", s.Name, k, len(s.Data[k]))
			}
		}
	}
	for name, s := range m.secrets {
		for k := range s.StringData {
			if strings.Contains(strings.ToUpper(k), "TOKEN") {
				t.Errorf("Secret %s: token %s in stringData", name, k)
			}
		}
	}
	if cm := m.configMaps[fullname+"-config"]; cm != nil {
		for k := range cm.Data {
			for _, secret := range []string{"MSGX_PG_DSN", "MSGX_MYSQL_DSN", "MSGX_REDIS_URL", "MSGX_CONTROL_TOKEN", "MSGX_CONTROL_READER_TOKEN", "MSGX_HTTP_TOKEN"} {
				if k == secret {
					t.Errorf("ConfigMap %s holds %s, which belongs in a Secret", cm.Name, k)
				}
			}
		}
	}
}

func checkServices(t *testing.T, m *manifests, fullname string) {
	t.Helper()
	for _, role := range roles {
		s, ok := m.services[fullname+"-"+role]
		if !ok {
			t.Errorf("no Service %s-%s (the ServiceMonitor scrapes through it)", fullname, role)
			continue
		}
		d := m.deployments[fullname+"-"+role]
		if d != nil && !selectorMatches(s.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("Service %s selects %v, not the pods of %s", s.Name, s.Spec.Selector, d.Name)
		}
		want := map[string]string{"admin": "admin"}
		switch role {
		case "ingest":
			want["http"] = "http"
		case "control":
			want["grpc"] = "grpc"
		}
		got := map[string]string{}
		for _, p := range s.Spec.Ports {
			got[p.Name] = p.TargetPort.String()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Service %s ports %v, want %v", s.Name, got, want)
		}
	}
	if p := servicePort(m.services[fullname+"-ingest"], "http"); p != 8080 {
		t.Errorf("ingest's compat HTTP Service port %d, want 8080", p)
	}
	if p := servicePort(m.services[fullname+"-control"], "grpc"); p != 9000 {
		t.Errorf("control's gRPC Service port %d, want 9000", p)
	}
}

func checkMigration(t *testing.T, r rendering, m *manifests, fullname string) {
	t.Helper()
	j, ok := m.jobs[fullname+"-migrate"]
	if !ok {
		t.Fatalf("no migration Job %s-migrate", fullname)
	}
	if hooks := j.Annotations["helm.sh/hook"]; hooks != "pre-install,pre-upgrade" {
		t.Errorf("Job %s: helm.sh/hook %q, want pre-install,pre-upgrade", j.Name, hooks)
	}
	pod := j.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || len(pod.Containers) != 1 {
		t.Fatalf("Job %s: restartPolicy %q with %d containers", j.Name, pod.RestartPolicy, len(pod.Containers))
	}
	c := pod.Containers[0]
	if !strings.Contains(c.Image, "/msgx-control:") || !slices.Equal(c.Args, []string{"migrate"}) || len(c.Command) != 0 {
		t.Errorf("Job %s: runs %s %v %v, want msgx-control migrate", j.Name, c.Image, c.Command, c.Args)
	}
	checkRestricted(t, "Job "+j.Name, c.SecurityContext)
	var ref *corev1.SecretKeySelector
	for _, e := range c.Env {
		if e.Name == "MSGX_PG_DSN_FILE" {
			dir, file := filepath.Split(e.Value)
			for _, vm := range c.VolumeMounts {
				if filepath.Clean(vm.MountPath) != filepath.Clean(dir) {
					continue
				}
				for _, v := range pod.Volumes {
					if v.Name == vm.Name && v.Secret != nil {
						for _, item := range v.Secret.Items {
							if item.Path == file {
								ref = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: v.Secret.SecretName}, Key: item.Key}
							}
						}
					}
				}
			}
		}
	}
	if ref != nil {
		// A pre-install hook runs before the release's Secrets exist: the DSN must come from an
		// existing Secret or a hook Secret of a lower weight.
		if ref.Name == r.connectionsSecret && r.connectionsSecret == fullname+"-connections" {
			t.Errorf("Job %s: reads the release's own Secret, which does not exist yet at pre-install", j.Name)
		}
		if s, ok := m.secrets[ref.Name]; ok {
			w, _ := strconv.Atoi(s.Annotations["helm.sh/hook-weight"])
			jw, _ := strconv.Atoi(j.Annotations["helm.sh/hook-weight"])
			if s.Annotations["helm.sh/hook"] != j.Annotations["helm.sh/hook"] || w >= jw {
				t.Errorf("Job %s: its Secret %s must be a hook created before it", j.Name, s.Name)
			}
		}
		return
	}
	t.Errorf("Job %s: no MSGX_PG_DSN_FILE mounted from a Secret", j.Name)
}

func checkMonitoring(t *testing.T, root string, r rendering, m *manifests, fullname string) {
	t.Helper()
	if len(m.monitors) != 1 || len(m.rules) != 1 {
		t.Fatalf("%d ServiceMonitors and %d PrometheusRules, want one each", len(m.monitors), len(m.rules))
	}
	sm := m.monitors[0]
	for _, role := range roles {
		s := m.services[fullname+"-"+role]
		if s == nil || !selectorMatches(sm.Spec.Selector.MatchLabels, s.Labels) {
			t.Errorf("ServiceMonitor %s does not select the Service of %s", sm.Name, role)
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "admin" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor %s endpoints %+v, want the admin port's /metrics", sm.Name, sm.Spec.Endpoints)
	}
	if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{r.namespace}) {
		t.Errorf("ServiceMonitor %s watches namespaces %v, want %s", sm.Name, sm.Spec.NamespaceSelector.MatchNames, r.namespace)
	}

	metrics := definedMetrics(t, root)
	runbooks, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	if err != nil {
		t.Fatalf("docs/runbooks.md: %v", err)
	}
	ops, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatalf("docs/operations.md: %v", err)
	}
	var got []string
	exprs := map[string]string{}
	for _, g := range m.rules[0].Spec.Groups {
		for _, rule := range g.Rules {
			got = append(got, rule.Alert)
			exprs[rule.Alert] = rule.Expr
			for _, name := range metricNames(rule.Expr) {
				if !metrics[name] {
					t.Errorf("alert %s uses the metric %s, which no service defines", rule.Alert, name)
				}
			}
			if !strings.Contains(rule.Expr, `namespace="`+r.namespace+`"`) {
				t.Errorf("alert %s does not select this release's namespace: %s", rule.Alert, rule.Expr)
			}
			// Alerts are routed by namespace: an aggregation must keep it.
			for _, agg := range aggregation.FindAllStringSubmatch(rule.Expr, -1) {
				if !slices.Contains(strings.Split(strings.ReplaceAll(agg[2], " ", ""), ","), "namespace") {
					t.Errorf("alert %s: %q drops the namespace label: %s", rule.Alert, agg[0], rule.Expr)
				}
			}
			if strings.Count(rule.Expr, "(") != strings.Count(rule.Expr, ")") || strings.Count(rule.Expr, "{") != strings.Count(rule.Expr, "}") {
				t.Errorf("alert %s: unbalanced expression %s", rule.Alert, rule.Expr)
			}
			if rule.Labels["severity"] == "" || rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a severity, summary or description", rule.Alert)
			}
			anchor := strings.ToLower(rule.Alert)
			if !strings.HasSuffix(rule.Annotations["runbook_url"], "#"+anchor) {
				t.Errorf("alert %s: runbook_url %q does not point at #%s", rule.Alert, rule.Annotations["runbook_url"], anchor)
			}
			if !regexp.MustCompile(`(?m)^#+ ` + rule.Alert + `\s*$`).Match(runbooks) {
				t.Errorf("docs/runbooks.md has no heading %q for the alert's runbook", rule.Alert)
			}
			if !bytes.Contains(ops, []byte("| ["+rule.Alert+"](runbooks.md#"+anchor+") |")) {
				t.Errorf("docs/operations.md's table of alerts has no row for %s linking its runbook", rule.Alert)
			}
		}
	}
	want := slices.Clone(wantAlerts)
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("alerts %v, want %v", got, want)
	}
	if e := exprs["MsgxQueueHeadTooOld"]; !strings.HasSuffix(e, "> "+r.headAgeSeconds) {
		t.Errorf("MsgxQueueHeadTooOld %q: threshold must be pipeline.head-age-alert = %ss", e, r.headAgeSeconds)
	}
	// Counted from the head's first attempt, so draining a backlog does not page (docs/pump.md).
	if e := exprs["MsgxQueueHeadTooOld"]; !strings.HasPrefix(e, "max by (namespace) (msgx_pump_head_stuck_seconds{") {
		t.Errorf("MsgxQueueHeadTooOld %q must watch msgx_pump_head_stuck_seconds", e)
	}
	if e := exprs["MsgxDispatcherOldestPending"]; !strings.Contains(e, "msgx_dispatcher_oldest_pending_seconds{") || !strings.HasSuffix(e, "> 300") {
		t.Errorf("MsgxDispatcherOldestPending %q: want msgx_dispatcher_oldest_pending_seconds above 300s", e)
	}
	// One series per kind, firing at once: the violation is persisted until resolved.
	if e := exprs["MsgxIngestContractViolation"]; !strings.HasPrefix(e, "max by (namespace, kind) (msgx_ingest_contract_violation{") || !strings.HasSuffix(e, ") > 0") {
		t.Errorf("MsgxIngestContractViolation %q: want max by (namespace, kind) of msgx_ingest_contract_violation above 0", e)
	}
	// DEAD messages alert for as long as they are DEAD: a gauge of the rows, not a counter's window.
	if e := exprs["MsgxMessagesDead"]; !strings.Contains(e, "msgx_pipeline_messages_dead{") || strings.Contains(e, "increase(") {
		t.Errorf("MsgxMessagesDead %q: want the msgx_pipeline_messages_dead gauge, no increase()", e)
	}
	if e := exprs["MsgxIngestHoleStuck"]; !strings.HasSuffix(e, "> "+r.maxCommitDelaySeconds) {
		t.Errorf("MsgxIngestHoleStuck %q: threshold must be pipeline.max-commit-delay = %ss", e, r.maxCommitDelaySeconds)
	}
	for _, role := range roles {
		if e := exprs["MsgxRoleNoActiveInstance"]; !strings.Contains(e, `role="`+role+`"`) {
			t.Errorf("MsgxRoleNoActiveInstance does not watch the role %s: %s", role, e)
		}
	}
}

// metricNames are the metrics a PromQL expression reads, a histogram's series by the
// histogram's name.
func metricNames(expr string) []string {
	var out []string
	for _, name := range regexp.MustCompile(`\bmsgx_[a-z0-9_]+`).FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasSuffix(name, "_seconds"+suffix) || strings.HasSuffix(name, "_bytes"+suffix) {
				name = strings.TrimSuffix(name, suffix)
			}
		}
		out = append(out, name)
	}
	return out
}

// aggregation matches a PromQL aggregation and its by clause (group 2; empty when there is
// none, which drops every label).
var aggregation = regexp.MustCompile(`\b(sum|max|min|avg|count|topk|bottomk|quantile|stddev|stdvar)\s*(?:by\s*\(([^)]*)\))?\s*\(`)

// definedMetrics finds the metric names the programs register ("msgx_..." string literals in
// non-test Go files of pkg and services).
func definedMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	re := regexp.MustCompile(`"(msgx_[a-z0-9_]+)"`)
	for _, dir := range []string{"pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllSubmatch(b, -1) {
				out[string(m[1])] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func isParamEnv(name string) bool {
	for k := range config.Keys() {
		if config.EnvName(k) == name {
			return true
		}
	}
	return false
}

func selectorMatches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func port(ports []corev1.ContainerPort, name string) int32 {
	for _, p := range ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func servicePort(s *corev1.Service, name string) int32 {
	if s == nil {
		return 0
	}
	for _, p := range s.Spec.Ports {
		if p.Name == name {
			return p.Port
		}
	}
	return 0
}

// valueString renders a values.yaml scalar as the services would read it from the environment.
func valueString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// helmBinary finds helm in the repository's bin/ (where `make test` installs the pinned
// version) or on PATH. Without it the chart is unchecked, which must not pass silently.
func helmBinary(t *testing.T, root string) string {
	t.Helper()
	local := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(local); err == nil {
		return local
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	t.Fatalf("helm not found in %s or on PATH: run `make test` (it installs the pinned helm into bin/), or `make helm`", local)
	return ""
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// Tokens are stable across renders: two `helm template` runs give the same Secrets, and a
// render that would have to invent a token (no value, no existing Secret, no live cluster to
// look one up in) fails naming the values to set, instead of rotating the tokens on every run.
func TestTokensAreStableOrRefused(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	chart := filepath.Join(root, chartDir)
	tokens := filepath.Join(chart, "ci/tokens-values.yaml")
	first := run(t, helm, "template", "msgx", chart, "-f", tokens, "--show-only", "templates/secrets.yaml")
	second := run(t, helm, "template", "msgx", chart, "-f", tokens, "--show-only", "templates/secrets.yaml")
	if !bytes.Equal(first, second) {
		t.Error("two renders of the same values give different Secrets")
	}
	out, err := exec.Command(helm, "template", "msgx", chart).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tokens.controlToken") || !strings.Contains(string(out), "tokens.existingSecret") {
		t.Errorf("a render without tokens: err %v, output %s; want a refusal naming tokens.controlToken and tokens.existingSecret", err, out)
	}
	// One refusal naming the three tokens, not one per token: helm logs every fail ("funcMap
	// fail", with --debug and in helm lint, which goes on past a fail), so three fails printed
	// the same advice again and again before the error (issue #56).
	lint, _ := exec.Command(helm, "lint", chart).CombinedOutput()
	refusals := map[string]bool{}
	for _, l := range strings.Split(string(lint), "\n") {
		if strings.Contains(l, "funcMap fail") && strings.Contains(l, "have no value") {
			refusals[l] = true
		}
	}
	for l := range refusals {
		if !strings.Contains(l, "control-reader-token, control-token, http-token token(s)") {
			t.Errorf("helm lint without tokens: %s; want one refusal naming the three tokens", l)
		}
	}
	if len(refusals) != 1 {
		t.Errorf("helm lint without tokens gives %d distinct token refusals, want 1:\n%s", len(refusals), lint)
	}
}

// TestExamplePasswordsAreRefused: values.yaml's example DSN passwords never reach the Secret
// unless connections.allowExamplePasswords accepts them; a real DSN or an existing Secret
// renders.
func TestExamplePasswordsAreRefused(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	chart := filepath.Join(root, chartDir)
	tok := []string{"--set", "tokens.controlToken=chart-check-operator-token-0123456789abcdef",
		"--set", "tokens.readerToken=chart-check-reader-token-0123456789abcdef",
		"--set", "tokens.httpToken=chart-check-http-token-0123456789abcdef"}
	real := []string{"--set-string", "connections.pgDSN=postgres://msgx_app:s3cret@pg:5432/msgx",
		"--set-string", "connections.migrationPgDSN=postgres://msgx:0wner@pg:5432/msgx",
		"--set-string", "connections.mysqlDSN=msgx:in60x@tcp(mysql:3306)/inbox"}
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"defaults", "connections.pgDSN holds the example password of values.yaml (msgx_app:msgx_app)", nil},
		{"migration DSN", "connections.migrationPgDSN holds the example password of values.yaml (msgx:msgx)",
			[]string{real[0], real[1]}},
		{"inbox DSN", "connections.mysqlDSN holds the example password of values.yaml (msgx:msgx)",
			[]string{real[0], real[1], real[2], real[3]}},
	} {
		out, err := helmRun(helm, append(append([]string{"template", "msgx", chart}, tok...), tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) || !strings.Contains(out, "connections.allowExamplePasswords=true") {
			t.Errorf("%s: err %v, want a refusal saying %q and naming connections.allowExamplePasswords:\n%.2000s", tc.name, err, tc.want, out)
		}
	}
	for name, args := range map[string][]string{
		"real DSNs":       real,
		"existing Secret": {"--set", "connections.existingSecret=msgx-conn", "--set", "connections.existingSecretHasMigrationDSN=true"},
		"accepted":        {"--set", "connections.allowExamplePasswords=true"},
	} {
		if out, err := helmRun(helm, append(append([]string{"template", "msgx", chart}, tok...), args...)...); err != nil {
			t.Errorf("%s: %v, want it rendered:\n%.2000s", name, err, out)
		}
	}
}
