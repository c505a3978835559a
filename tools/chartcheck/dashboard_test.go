package chartcheck

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// wantPanels are the dashboard's panels: what an operator watches, by title.
var wantPanels = []string{
	"Backlog: unfinished messages", "Backlog: estimated drain time", "Watermark lag", "Holes",
	"Outcomes by state and class", "DEAD messages", "Blocked on a dependency",
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
			Title       string `json:"title"`
			FieldConfig struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
				Overrides []struct {
					Matcher struct {
						ID      string `json:"id"`
						Options string `json:"options"`
					} `json:"matcher"`
					Properties []struct {
						ID    string `json:"id"`
						Value string `json:"value"`
					} `json:"properties"`
				} `json:"overrides"`
			} `json:"fieldConfig"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
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
			// Each series is shown in the unit of what it measures: the panel's unit, or an
			// override for its query.
			unit := p.FieldConfig.Defaults.Unit
			for _, o := range p.FieldConfig.Overrides {
				if o.Matcher.ID == "byFrameRefID" && o.Matcher.Options == target.RefID {
					for _, prop := range o.Properties {
						if prop.ID == "unit" {
							unit = prop.Value
						}
					}
				}
			}
			if want := baseUnit(target.Expr); unit != want {
				t.Errorf("dashboard panel %q: query %s (%s) shows in unit %q, its metric's base unit is %q", p.Title, target.RefID, target.Expr, unit, want)
			}
		}
	}
	for _, w := range wantPanels {
		if !have[w] {
			t.Errorf("the dashboard has no panel %q", w)
		}
	}
}

// baseUnit is the Grafana unit of what a query measures, from its metric's name (the
// Prometheus naming conventions the services follow): seconds ("s") for a _seconds gauge or a
// quantile of a _seconds histogram, per second ("ops") for a rate of a counter or a
// _per_second gauge, a plain number ("short") otherwise.
func baseUnit(expr string) string {
	names := metricNames(expr)
	if len(names) == 0 {
		return ""
	}
	name := names[0]
	switch {
	case strings.HasSuffix(name, "_seconds_bucket") && strings.Contains(expr, "histogram_quantile"):
		return "s"
	case strings.Contains(expr, "rate(") && strings.HasSuffix(name, "_total"), strings.HasSuffix(name, "_per_second"):
		return "ops"
	case strings.HasSuffix(name, "_seconds"):
		return "s"
	}
	return "short"
}

// TestBaseUnit pins the unit rule on the shapes the dashboard uses.
func TestBaseUnit(t *testing.T) {
	for expr, want := range map[string]string{
		`max(msgx_ingest_hole_age_seconds{job="x"})`:                                            "s",
		`max(msgx_pipeline_backlog_rate_per_second)`:                                            "ops",
		`sum(rate(msgx_pump_outcomes_total[5m]))`:                                               "ops",
		`histogram_quantile(0.99, sum by (le) (rate(msgx_dispatcher_send_seconds_bucket[5m])))`: "s",
		`max(msgx_ingest_watched_holes)`:                                                        "short",
	} {
		if got := baseUnit(expr); got != want {
			t.Errorf("baseUnit(%s) = %q, want %q", expr, got, want)
		}
	}
}

// TestMonitoringNeedsTheCRDs: without the Prometheus Operator's CRDs the chart renders no
// ServiceMonitor or PrometheusRule (they would fail the install), and the dashboard can be
// turned off.
func TestMonitoringNeedsTheCRDs(t *testing.T) {
	root := repo.Root(t)
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
