package chartcheck

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// The chart README's values table follows the helm-docs convention: a comment block whose first
// line starts "# --" documents the key right below it. helm-docs itself is not run: it pulls
// Helm's and Sprig's module trees into the tools module for one table; this generator reads the
// same comments into helm-docs' table (Key, Type, Default, Description).
var updateReadme = flag.Bool("update-readme", false, "rewrite "+readmeFile+" from values.yaml's comments")

const (
	readmeFile     = chartDir + "/README.md"
	readmeCommand  = "go test ./tools/chartcheck -run TestChartReadmeIsCurrent -update-readme"
	valuesFile     = chartDir + "/values.yaml"
	helmDocsPrefix = "# --"
	// monitoringCommand is how the README and docs/operations.md render the alerts with helm
	// template; TestReadmeCommandRendersTheAlerts runs it.
	monitoringCommand = "helm template msgx deploy/helm/msgexchange -n gateway -f gateway-values.yaml --set monitoring.enabled=true"
)

// valueRow is one row of the values table.
type valueRow struct{ key, typ, def, desc string }

// valuesRows walks values.yaml in file order: every leaf (a scalar, a list, an empty map) is a
// row, under its dotted path; a map's own "# --" comment is a row of its own, before its keys.
func valuesRows(text []byte) ([]valueRow, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("values.yaml: not a map")
	}
	lines := strings.Split(string(text), "\n")
	var rows []valueRow
	var walk func(prefix string, m *yaml.Node) error
	walk = func(prefix string, m *yaml.Node) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			key := k.Value
			if prefix != "" {
				key = prefix + "." + key
			}
			desc := helmDocsComment(lines, k.Line)
			if v.Kind == yaml.MappingNode && len(v.Content) > 0 {
				if desc != "" {
					rows = append(rows, valueRow{key: key, typ: "object", desc: desc})
				}
				if err := walk(key, v); err != nil {
					return err
				}
				continue
			}
			var val any
			if err := v.Decode(&val); err != nil {
				return fmt.Errorf("values.yaml line %d: %w", k.Line, err)
			}
			var def bytes.Buffer
			enc := json.NewEncoder(&def)
			enc.SetEscapeHTML(false) // a DSN's & stays readable
			if err := enc.Encode(val); err != nil {
				return fmt.Errorf("values.yaml line %d: %w", k.Line, err)
			}
			rows = append(rows, valueRow{key: key, typ: valueType(val), def: strings.TrimSpace(def.String()), desc: desc})
		}
		return nil
	}
	return rows, walk("", doc.Content[0])
}

// helmDocsComment is the description of the key on line (1-based): the comment lines directly
// above it, from the last one that starts "# --", joined into one line.
func helmDocsComment(lines []string, line int) string {
	var block []string
	for i := line - 2; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "#") {
			break
		}
		block = append([]string{l}, block...)
	}
	start := -1
	for i, l := range block {
		if l == helmDocsPrefix || strings.HasPrefix(l, helmDocsPrefix+" ") {
			start = i
		}
	}
	if start < 0 {
		return ""
	}
	words := []string{strings.TrimSpace(strings.TrimPrefix(block[start], helmDocsPrefix))}
	for _, l := range block[start+1:] {
		words = append(words, strings.TrimSpace(strings.TrimPrefix(l, "#")))
	}
	return strings.Join(strings.Fields(strings.Join(words, " ")), " ")
}

func valueType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case int, int64, uint64:
		return "int"
	case float64:
		return "float"
	case string:
		return "string"
	case []any:
		return "list"
	default:
		return "object"
	}
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// chartReadme is the README the generator writes for the chart's values.
func chartReadme(values []byte) ([]byte, error) {
	rows, err := valuesRows(values)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# msgexchange chart\n\n")
	b.WriteString("<!-- Generated from values.yaml's \"# --\" comments by `" + readmeCommand + "`; do not edit. -->\n\n")
	b.WriteString("The airport's upstream message gateway: ingest, pump, dispatcher, backfill and control, each a\n")
	b.WriteString("single active instance. Deployment, NetworkPolicy and monitoring: docs/operations.md; runbooks:\n")
	b.WriteString("docs/runbooks.md; the `config` parameters: docs/environment.md; roles and entry points: docs/security.md.\n")
	b.WriteString("values.schema.json refuses a value of the wrong type or a misspelt key.\n\n")
	b.WriteString("## Alerts and the ServiceMonitor\n\n")
	b.WriteString("monitoring.enabled is their one switch. auto (the default) renders them where the cluster serves\n")
	b.WriteString("the Prometheus Operator's CRDs, which a live `helm install` sees. `helm template` (a GitOps\n")
	b.WriteString("pipeline) sees no cluster and would render no alert, so render with the switch on:\n\n")
	b.WriteString("```sh\n" + monitoringCommand + "\n```\n\n")
	b.WriteString("## Values\n\n| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n")
	for _, r := range rows {
		def := ""
		if r.def != "" {
			def = "`" + cell(r.def) + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.key, r.typ, def, cell(r.desc))
	}
	return b.Bytes(), nil
}

// TestChartReadmeIsCurrent: the chart README is what the generator makes of values.yaml now.
func TestChartReadmeIsCurrent(t *testing.T) {
	root := repo.Root(t)
	values, err := os.ReadFile(filepath.Join(root, valuesFile))
	if err != nil {
		t.Fatal(err)
	}
	want, err := chartReadme(values)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, readmeFile)
	if *updateReadme {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: generate it with `%s`", err, readmeCommand)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what values.yaml's comments make of it: regenerate it with `%s`", readmeFile, readmeCommand)
	}
}

// TestValuesRows: the helm-docs convention as the generator reads it.
func TestValuesRows(t *testing.T) {
	t.Parallel()
	text := "# A section intro, not a description.\n\n# Not this line.\n# -- The images.\n# Second line.\nimage:\n" +
		"  # -- Empty means appVersion.\n  tag: \"\"\n  pullPolicy: IfNotPresent\n  extra: []\n" +
		"  # -- A | pipe.\n  replicas: 1\nempty: {}\n"
	got, err := valuesRows([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []valueRow{
		{key: "image", typ: "object", desc: "The images. Second line."},
		{key: "image.tag", typ: "string", def: `""`, desc: "Empty means appVersion."},
		{key: "image.pullPolicy", typ: "string", def: `"IfNotPresent"`},
		{key: "image.extra", typ: "list", def: "[]"},
		{key: "image.replicas", typ: "int", def: "1", desc: "A | pipe."},
		{key: "empty", typ: "object", def: "{}"},
	}
	if len(got) != len(want) {
		t.Fatalf("rows %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	readme, err := chartReadme([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "| image.replicas | int | `1` | A \\| pipe. |\n") {
		t.Errorf("the table does not escape a pipe:\n%s", readme)
	}
}
