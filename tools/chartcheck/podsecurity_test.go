package chartcheck

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// restricted is the restricted Pod Security Standard at its latest version (no emulated older
// version: nil), judged by the
// policy package the API server's PodSecurity admission runs, so a pod the chart renders is
// admitted in a namespace labelled pod-security.kubernetes.io/enforce=restricted.
var restricted = api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}

// podSecurityViolations is what the restricted standard forbids in one pod, "" when nothing.
func podSecurityViolations(t *testing.T, meta *metav1.ObjectMeta, spec *corev1.PodSpec) string {
	t.Helper()
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var forbidden []string
	for _, r := range evaluator.EvaluatePod(restricted, meta, spec) {
		if !r.Allowed {
			forbidden = append(forbidden, r.ForbiddenReason+" ("+r.ForbiddenDetail+")")
		}
	}
	return strings.Join(forbidden, "; ")
}

// checkPodSecurity evaluates every pod the chart renders: the Deployments' and the Jobs'
// templates and the `helm test` pod.
func checkPodSecurity(t *testing.T, m *manifests) {
	t.Helper()
	check := func(kind, name string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
		if v := podSecurityViolations(t, meta, spec); v != "" {
			t.Errorf("%s %s: the restricted Pod Security Standard forbids: %s", kind, name, v)
		}
	}
	for name, d := range m.deployments {
		check("Deployment", name, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec)
	}
	for name, j := range m.jobs {
		check("Job", name, &j.Spec.Template.ObjectMeta, &j.Spec.Template.Spec)
	}
	for name, p := range m.tests {
		check("Pod", name, &p.ObjectMeta, &p.Spec)
	}
	if len(m.deployments) == 0 || len(m.jobs) == 0 || len(m.tests) == 0 {
		t.Errorf("rendered %d Deployments, %d Jobs, %d test pods: each kind must be evaluated", len(m.deployments), len(m.jobs), len(m.tests))
	}
}

// TestPodSecurityRefusesAPrivilegedPod: the evaluator as used here does refuse what the
// restricted standard forbids, naming it.
func TestPodSecurityRefusesAPrivilegedPod(t *testing.T) {
	t.Parallel()
	yes := true
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []string
	}{
		{"privileged, root, no seccomp", corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "i", SecurityContext: &corev1.SecurityContext{Privileged: &yes},
		}}}, []string{"privileged", "allowPrivilegeEscalation != false", "runAsNonRoot != true", "seccompProfile"}},
		{"host network", corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			[]string{"host namespaces"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := podSecurityViolations(t, &metav1.ObjectMeta{Name: "p"}, &tc.spec)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("violations %q do not name %q", got, w)
				}
			}
		})
	}
}
