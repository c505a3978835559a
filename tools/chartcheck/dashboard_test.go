package chartcheck

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// wantPanels are the dashboard's panels: what an operator watches, by title.
var wantPanels = []string{
	"Backlog: unfinished messages", "Backlog: estimated drain time", "Watermark lag", "Holes",
	"Outcomes by state and class", "DEAD messages", "Pump blocked on a dependency",
	"Dispatcher pending and DEAD", "Dispatcher send latency", "Backfill pending and abandoned",
	"Role holders", "End-to-end latency (enqueue → Kafka)", "Builds",
}

// checkDashboard: the Grafana dashboard ConfigMap carries the sidecar's label, its JSON parses,
// it has every wanted panel, and every metric a panel queries is one the services define.
func checkDashboard(t *testing.T, root string, m *manifests, fullname string) {
	t.Helper()
	cm, ok := m.configMaps[fullname+"-dashboard"]
	if !ok {
		t.Fatalf("no dashboard ConfigMap %s-dashboard", fullname)
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap %s: label grafana_dashboard=%q, want \"1\" (the Grafana sidecar's convention)", cm.Name, cm.Labels["grafana_dashboard"])
	}
	checkDashboardJSON(t, root, cm)
}

func checkDashboardJSON(t *testing.T, root string, cm *corev1.ConfigMap) {
	t.Helper()
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["msgexchange.json"]), &d); err != nil {
		t.Fatalf("ConfigMap %s: msgexchange.json is not JSON: %v", cm.Name, err)
	}
	metrics := definedMetrics(t, root)
	have := map[string]bool{}
	for _, p := range d.Panels {
		have[p.Title] = true
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q queries nothing", p.Title)
		}
		for _, target := range p.Targets {
			names := metricNames(target.Expr)
			if len(names) == 0 {
				t.Errorf("dashboard panel %q: %q reads no msgx_ metric", p.Title, target.Expr)
			}
			for _, name := range names {
				if !metrics[name] {
					t.Errorf("dashboard panel %q uses the metric %s, which no service defines", p.Title, name)
				}
			}
			if strings.Count(target.Expr, "(") != strings.Count(target.Expr, ")") || strings.Count(target.Expr, "{") != strings.Count(target.Expr, "}") {
				t.Errorf("dashboard panel %q: unbalanced expression %s", p.Title, target.Expr)
			}
		}
	}
	for _, w := range wantPanels {
		if !have[w] {
			t.Errorf("the dashboard has no panel %q", w)
		}
	}
}

// TestMonitoringNeedsTheCRDs: without the Prometheus Operator's CRDs the chart renders no
// ServiceMonitor or PrometheusRule (they would fail the install), and the dashboard can be
// turned off.
func TestMonitoringNeedsTheCRDs(t *testing.T) {
	root := repoRoot(t)
	helm := helmBinary(t, root)
	out := string(run(t, helm, "template", "msgx", filepath.Join(root, chartDir), "-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml")))
	for _, kind := range []string{"kind: ServiceMonitor", "kind: PrometheusRule"} {
		if strings.Contains(out, kind) {
			t.Errorf("rendered %s on a cluster without the monitoring.coreos.com/v1 CRDs", kind)
		}
	}
	if !strings.Contains(out, "msgx-msgexchange-dashboard") {
		t.Error("the dashboard ConfigMap is not rendered by default")
	}
	off := string(run(t, helm, "template", "msgx", filepath.Join(root, chartDir), "-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml"), "--set", "monitoring.grafanaDashboard.enabled=false"))
	if strings.Contains(off, "msgx-msgexchange-dashboard") {
		t.Error("monitoring.grafanaDashboard.enabled=false still renders the dashboard")
	}
}
