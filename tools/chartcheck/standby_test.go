package chartcheck

import (
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// TestControlStandbyTakesNoTraffic renders two control replicas (issue #56, finding 5): the
// Service reaches only the pod that holds the control role, because readiness is
// /readyz/active; liveness stays /healthz; the update replaces both pods at once (a new pod is
// never ready while an old one holds the role, so one at a time would wait forever) and no
// PodDisruptionBudget keeps the single ready pod from ever being evicted.
func TestControlStandbyTakesNoTraffic(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	out := run(t, helm, "template", "msgx", filepath.Join(root, chartDir), "-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml"),
		"--set", "services.control.replicas=2")
	m := decodeAll(t, out)
	const fullname = "msgx-msgexchange"
	d := m.deployments[fullname+"-control"]
	if d == nil {
		t.Fatal("no control Deployment")
	}
	c := d.Spec.Template.Spec.Containers[0]
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz/active" {
		t.Errorf("control readiness probe %+v, want /readyz/active", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("control liveness probe %+v, want /healthz", p)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.IntValue() != 2 {
		t.Errorf("control strategy %+v, want a rolling update of both pods at once", d.Spec.Strategy)
	}
	if b, ok := m.pdbs[fullname+"-control"]; ok {
		t.Errorf("control has a PodDisruptionBudget %+v: its only ready pod could never be evicted", b.Spec)
	}
	// helm test still asks control's /readyz (dependencies), through the Service.
	if p := m.tests[fullname+"-test-health"]; p == nil || !slices.Contains(p.Spec.Containers[0].Args, "-readyz=http://"+fullname+"-control:9090/readyz") {
		t.Errorf("the helm test Pod %v does not check control's /readyz", p)
	}
}

// TestStandbysAndPolicies renders warm standbys for the pump, a NetworkPolicy with named
// operators and a created ServiceAccount, and checks what each promises.
func TestStandbysAndPolicies(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	out := run(t, helm, "template", "msgx", filepath.Join(root, chartDir), "-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml"),
		"--set", "services.pump.replicas=3", "--set", "networkPolicy.enabled=true",
		"--set", "networkPolicy.control.namespaces={ops}", "--set", "networkPolicy.control.pods[0].app=msgxctl",
		"--set", "networkPolicy.admin.namespaces={monitoring}",
		"--set", "serviceAccount.create=true")
	m := decodeAll(t, out)
	const fullname = "msgx-msgexchange"

	for _, role := range roles {
		d := m.deployments[fullname+"-"+role]
		if d == nil {
			t.Fatalf("no Deployment for %s", role)
		}
		if d.Spec.Template.Spec.ServiceAccountName != fullname {
			t.Errorf("%s: serviceAccountName %q, want the created %s", d.Name, d.Spec.Template.Spec.ServiceAccountName, fullname)
		}
		_, pdb := m.pdbs[fullname+"-"+role]
		aff := d.Spec.Template.Spec.Affinity
		if role != "pump" {
			if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || pdb || aff != nil {
				t.Errorf("%s: a single replica wants Recreate, no PDB and no anti-affinity", d.Name)
			}
			continue
		}
		if *d.Spec.Replicas != 3 {
			t.Errorf("%s: replicas %d, want 3", d.Name, *d.Spec.Replicas)
		}
		ru := d.Spec.Strategy.RollingUpdate
		if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.IntValue() != 1 {
			t.Errorf("%s: strategy %+v, want a rolling update one pod at a time without surge", d.Name, d.Spec.Strategy)
		}
		if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Fatalf("%s: no preferred pod anti-affinity: %+v", d.Name, aff)
		}
		term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		if term.TopologyKey != "kubernetes.io/hostname" || !selectorMatches(term.LabelSelector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("%s: anti-affinity %+v does not spread its own pods over nodes", d.Name, term)
		}
		b := m.pdbs[fullname+"-pump"]
		if b == nil || b.Spec.MinAvailable == nil || b.Spec.MinAvailable.IntValue() != 1 ||
			!selectorMatches(b.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("pump: PodDisruptionBudget %+v, want minAvailable 1 over the pump's pods", b)
		}
	}
	if len(m.pdbs) != 1 {
		t.Errorf("%d PodDisruptionBudgets, want the pump's only", len(m.pdbs))
	}
	if a := m.accounts[fullname]; a == nil || a.AutomountServiceAccountToken == nil || *a.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s: %+v, want one that mounts no token", fullname, a)
	}

	// NetworkPolicy: control's gRPC only from the helm test pod and the named namespace and pods, ingest's compat
	// port closed (no senders named), the admin port from the monitoring namespace.
	ports := func(role string) map[string][]string {
		np := m.policies[fullname+"-"+role]
		if np == nil {
			t.Fatalf("no NetworkPolicy for %s", role)
		}
		if !selectorMatches(np.Spec.PodSelector.MatchLabels, m.deployments[fullname+"-"+role].Spec.Template.Labels) {
			t.Errorf("NetworkPolicy %s does not select the %s pods", np.Name, role)
		}
		out := map[string][]string{}
		for _, r := range np.Spec.Ingress {
			var from []string
			for _, p := range r.From {
				switch {
				case p.NamespaceSelector != nil:
					from = append(from, "ns:"+p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				case p.PodSelector != nil && p.PodSelector.MatchLabels["app"] != "":
					from = append(from, "pod:"+p.PodSelector.MatchLabels["app"])
				case p.PodSelector != nil:
					from = append(from, "pod:"+p.PodSelector.MatchLabels["app.kubernetes.io/component"])
				}
			}
			for _, port := range r.Ports {
				if port.Protocol == nil || *port.Protocol != corev1.ProtocolTCP {
					t.Errorf("NetworkPolicy %s: port %v is not TCP", np.Name, port.Port)
				}
				out[port.Port.String()] = from
			}
		}
		return out
	}
	if got := ports("control"); !slices.Equal(got["grpc"], []string{"pod:test", "ns:ops", "pod:msgxctl"}) || !slices.Equal(got["admin"], []string{"ns:monitoring"}) {
		t.Errorf("control's NetworkPolicy admits %v, want grpc from the helm test pod, ns:ops and pod:msgxctl, admin from ns:monitoring", got)
	}
	if got := ports("ingest"); len(got) != 1 || got["http"] != nil {
		t.Errorf("ingest's NetworkPolicy admits %v, want the admin port only (no compat senders named)", got)
	}
}
