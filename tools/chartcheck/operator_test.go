package chartcheck

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// TestOperatorValues renders testdata/operator-values.yaml: every pod (the Deployments, the
// migration Job, the helm test pod) runs as the ServiceAccount, which a pre-install hook
// creates before the migration Job; extraVolumes and extraVolumeMounts reach every pod (global)
// or their service's (services.<name>); topologySpreadConstraints spread each service's own
// pods unless a constraint names its selector, and a service's list replaces the global one.
func TestOperatorValues(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	chart := filepath.Join(root, chartDir)
	out := run(t, helm, "template", "msgx", chart, "-f", filepath.Join(chart, "ci/tokens-values.yaml"),
		"-f", filepath.Join(root, "tools/chartcheck/testdata/operator-values.yaml"))
	m := decodeAll(t, out)
	const fullname = "msgx-msgexchange"

	pods := map[string]corev1.PodSpec{}
	for _, role := range roles {
		d := m.deployments[fullname+"-"+role]
		if d == nil {
			t.Fatalf("no Deployment for %s", role)
		}
		pods["Deployment "+d.Name] = d.Spec.Template.Spec
	}
	job := m.jobs[fullname+"-migrate"]
	test := m.tests[fullname+"-test-health"]
	if job == nil || test == nil {
		t.Fatalf("no migration Job or helm test Pod")
	}
	pods["Job "+job.Name] = job.Spec.Template.Spec
	pods["Pod "+test.Name] = test.Spec
	for where, p := range pods {
		if p.ServiceAccountName != fullname {
			t.Errorf("%s: serviceAccountName %q, want the created %s", where, p.ServiceAccountName, fullname)
		}
	}
	sa := m.accounts[fullname]
	if sa == nil {
		t.Fatalf("no ServiceAccount %s", fullname)
	}
	w, _ := strconv.Atoi(sa.Annotations["helm.sh/hook-weight"])
	jw, _ := strconv.Atoi(job.Annotations["helm.sh/hook-weight"])
	if sa.Annotations["helm.sh/hook"] != job.Annotations["helm.sh/hook"] || w >= jw {
		t.Errorf("ServiceAccount %s (hook %q, weight %d): the migration Job (hook %q, weight %d) runs as it, so it must be a hook created before the Job",
			sa.Name, sa.Annotations["helm.sh/hook"], w, job.Annotations["helm.sh/hook"], jw)
	}
	if sa.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("ServiceAccount %s: no helm.sh/resource-policy keep: an upgrade from a release where it was no hook would delete it", sa.Name)
	}

	// Volumes: the global one everywhere but the test pod, the compat TLS files on ingest only,
	// each mount naming a volume of its pod.
	for where, p := range pods {
		vols := map[string]bool{}
		for _, v := range p.Volumes {
			vols[v.Name] = true
		}
		mounts := map[string]string{}
		for _, c := range p.Containers {
			for _, vm := range c.VolumeMounts {
				mounts[vm.Name] = vm.MountPath
				if !vols[vm.Name] {
					t.Errorf("%s mounts %q, which is not one of its volumes", where, vm.Name)
				}
			}
		}
		wantCA := !strings.HasPrefix(where, "Pod ")
		if got := vols["pg-ca"] && mounts["pg-ca"] == "/etc/msgx/pg-ca"; got != wantCA {
			t.Errorf("%s: global extra volume pg-ca mounted %v, want %v (volumes %v, mounts %v)", where, got, wantCA, vols, mounts)
		}
		wantTLS := where == "Deployment "+fullname+"-ingest"
		if got := vols["compat-tls"] && mounts["compat-tls"] == "/etc/msgx/compat-tls"; got != wantTLS {
			t.Errorf("%s: ingest's extra volume compat-tls mounted %v, want %v", where, got, wantTLS)
		}
	}

	for _, role := range roles {
		d := m.deployments[fullname+"-"+role]
		tsc := d.Spec.Template.Spec.TopologySpreadConstraints
		if len(tsc) != 1 {
			t.Errorf("%s: %d topology spread constraints, want 1", d.Name, len(tsc))
			continue
		}
		c := tsc[0]
		if role == "pump" {
			if c.TopologyKey != "kubernetes.io/hostname" || c.LabelSelector == nil || c.LabelSelector.MatchLabels["app"] != "x" {
				t.Errorf("%s: constraint %+v, want the pump's own (hostname, its labelSelector kept)", d.Name, c)
			}
			continue
		}
		if c.TopologyKey != "topology.kubernetes.io/zone" || c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.MaxSkew != 1 ||
			c.LabelSelector == nil || !selectorMatches(c.LabelSelector.MatchLabels, d.Spec.Template.Labels) ||
			c.LabelSelector.MatchLabels["app.kubernetes.io/component"] != role {
			t.Errorf("%s: constraint %+v, want the global one spreading the %s pods", d.Name, c, role)
		}
	}
}

// TestExistingServiceAccount: a ServiceAccount named but not created is every pod's, and the
// chart renders none.
func TestExistingServiceAccount(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	chart := filepath.Join(root, chartDir)
	m := decodeAll(t, run(t, helm, "template", "msgx", chart, "-f", filepath.Join(chart, "ci/tokens-values.yaml"),
		"--set", "serviceAccount.name=gateway-runner"))
	var got []string
	for _, d := range m.deployments {
		got = append(got, d.Spec.Template.Spec.ServiceAccountName)
	}
	for _, j := range m.jobs {
		got = append(got, j.Spec.Template.Spec.ServiceAccountName)
	}
	for _, p := range m.tests {
		got = append(got, p.Spec.ServiceAccountName)
	}
	if len(got) != len(roles)+2 || slices.ContainsFunc(got, func(s string) bool { return s != "gateway-runner" }) {
		t.Errorf("serviceAccountName of the Deployments, the Job and the test pod: %v, want gateway-runner on each", got)
	}
	if len(m.accounts) != 0 {
		t.Errorf("rendered ServiceAccounts %v; an existing one is not the chart's", m.accounts)
	}
}

// TestNotes: what `helm install` prints. The reader-token command extracts the reader token
// (the operator token is a separate, marked command), and the alerts are announced only where
// the PrometheusRule is rendered (a client-side dry run knows no monitoring.coreos.com/v1).
func TestNotes(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	chart := filepath.Join(root, chartDir)
	out := string(run(t, helm, "install", "msgx", chart, "-f", filepath.Join(chart, "ci/tokens-values.yaml"), "--dry-run=client"))
	i := strings.Index(out, "\nNOTES:\n")
	if i < 0 {
		t.Fatalf("helm install --dry-run printed no NOTES:\n%s", out)
	}
	notes := out[i:]
	var reader string
	for _, line := range strings.Split(notes, "\n") {
		if strings.Contains(line, "MSGXCTL_TOKEN_FILE=") && strings.HasPrefix(strings.TrimSpace(line), "export") {
			file := strings.TrimSuffix(strings.SplitN(line, "MSGXCTL_TOKEN_FILE=$PWD/", 2)[1], " ")
			for _, l := range strings.Split(notes, "\n") {
				if strings.Contains(l, "> "+file) && !strings.HasPrefix(strings.TrimSpace(l), "#") {
					reader = l
				}
			}
		}
	}
	if !strings.Contains(reader, "{.data.control-reader-token}") {
		t.Errorf("NOTES: the token file msgxctl is pointed at is written by %q; want the reader token (control-reader-token)", reader)
	}
	if strings.Contains(notes, "Alerts: PrometheusRule") {
		t.Errorf("NOTES announce a PrometheusRule that was not rendered (no monitoring.coreos.com/v1):\n%s", notes)
	}
	if !strings.Contains(notes, "no PrometheusRule was rendered") {
		t.Errorf("NOTES do not say that no PrometheusRule was rendered:\n%s", notes)
	}
}
