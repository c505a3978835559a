package chartcheck

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

var update = flag.Bool("update", false, "rewrite values.schema.json's config section and templates/_limits.tpl from pkg/config's registry")

const schemaFile = chartDir + "/values.schema.json"

// timeZonePattern matches the IANA zone names of tzdata's areas, and UTC.
const timeZonePattern = `^(UTC|Etc/[A-Za-z0-9+-]+|(Africa|America|Antarctica|Arctic|Asia|Atlantic|Australia|Europe|Indian|Pacific)/[A-Za-z_-]+(/[A-Za-z_-]+)?)$`

// paramSchema is the JSON schema of one parameter's value in values.config, by its kind. Helm
// reads numbers and booleans in values as such, and the chart quotes them into the ConfigMap,
// so a number or a boolean may also be written as a string; null leaves the program's default.
// A parameter whose default is empty may be empty.
func paramSchema(p config.Param) map[string]any {
	orEmpty := func(pattern string) string {
		if p.Default == "" {
			return "^$|" + pattern
		}
		return pattern
	}
	s := map[string]any{"description": fmt.Sprintf("%s (%s, default %q)", config.EnvName(p.Key), p.Kind, p.Default)}
	switch p.Kind {
	case config.KindDuration:
		s["type"] = []any{"string", "null"}
		s["pattern"] = orEmpty(`^([0-9]+d|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+|0)$`)
	case config.KindInteger:
		s["type"] = []any{"integer", "string", "null"}
		s["pattern"] = `^-?[0-9]+$`
	case config.KindNumber:
		s["type"] = []any{"number", "string", "null"}
		s["pattern"] = `^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$`
	case config.KindBoolean:
		s["type"] = []any{"boolean", "string", "null"}
		s["pattern"] = `^(1|0|t|f|T|F|true|false|TRUE|FALSE|True|False)$`
	case config.KindLevel:
		s["type"] = []any{"string", "null"}
		s["pattern"] = `^([dD][eE][bB][uU][gG]|[iI][nN][fF][oO]|[wW][aA][rR][nN]|[eE][rR][rR][oO][rR])$`
	case config.KindTimeOfDay:
		s["type"] = []any{"string", "null"}
		s["pattern"] = orEmpty(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
	case config.KindTimeZone:
		// An IANA zone as Area/Location (Asia/Shanghai, America/Argentina/Buenos_Aires) or UTC:
		// the areas are tzdata's own, so a name from elsewhere (Mars/Olympus) fails at render
		// time, not at start-up. A misspelt Location in a real area still reaches
		// time.LoadLocation at start-up, which names it.
		s["type"] = []any{"string", "null"}
		s["pattern"] = orEmpty(timeZonePattern)
		s["description"] = fmt.Sprintf("%s; an IANA time zone, Area/Location (e.g. Asia/Shanghai) or UTC", s["description"])
	default: // strings, lists: pkg/config judges them at start-up
		s["type"] = []any{"string", "null"}
	}
	limitSchema(p, s)
	return s
}

func wantConfigSchema() map[string]any {
	props := map[string]any{}
	for _, p := range config.Params() {
		if _, managed := chartManaged[p.Key]; managed {
			continue
		}
		props[p.Key] = paramSchema(p)
		// An old spelling passes the schema so that the chart's own check can name the new
		// key (templates/_helpers.tpl), which the schema's "additional property" cannot.
		for _, a := range p.Aliases {
			s := paramSchema(p)
			s["description"] = fmt.Sprintf("renamed to %s; refused by the chart with that name", p.Key)
			props[a] = s
		}
	}
	return map[string]any{
		"type":                 "object",
		"description":          "Generated from pkg/config's registry by `go test ./tools/chartcheck -run TestValuesSchemaMatchesConfig -update`.",
		"additionalProperties": false,
		"properties":           props,
	}
}

func readSchema(t *testing.T, root string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, schemaFile))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	return s
}

// TestValuesSchemaMatchesConfig: the schema's config section is exactly pkg/config's parameters
// (less those the chart sets itself), each with the type of its kind, so `helm install` refuses
// a misspelt key or a value of the wrong type.
func TestValuesSchemaMatchesConfig(t *testing.T) {
	root := repo.Root(t)
	s := readSchema(t, root)
	want := wantConfigSchema()
	props := s["properties"].(map[string]any)
	if *update {
		props["config"] = want
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, schemaFile), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, limitsFile), []byte(limitsTemplate()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if raw, err := os.ReadFile(filepath.Join(root, limitsFile)); err != nil || string(raw) != limitsTemplate() {
		t.Errorf("%s is not the registry's duration limits (err %v): run `go test ./tools/chartcheck -run TestValuesSchemaMatchesConfig -update`", limitsFile, err)
	}
	// Compare through JSON, so that types read back from the file and built here agree.
	var wantJSON map[string]any
	b, _ := json.Marshal(want)
	_ = json.Unmarshal(b, &wantJSON)
	got, _ := props["config"].(map[string]any)
	gotProps, _ := got["properties"].(map[string]any)
	wantProps := wantJSON["properties"].(map[string]any)
	fix := "run `go test ./tools/chartcheck -run TestValuesSchemaMatchesConfig -update`"
	for _, k := range sortedKeys(wantProps) {
		if _, ok := gotProps[k]; !ok {
			t.Errorf("%s: config has no property %q (a parameter of pkg/config): %s", schemaFile, k, fix)
		} else if !reflect.DeepEqual(gotProps[k], wantProps[k]) {
			t.Errorf("%s: config property %q is %v, want %v: %s", schemaFile, k, gotProps[k], wantProps[k], fix)
		}
	}
	for _, k := range sortedKeys(gotProps) {
		if _, ok := wantProps[k]; !ok {
			t.Errorf("%s: config has the property %q, which is not a parameter of pkg/config (or the chart sets it): %s", schemaFile, k, fix)
		}
	}
	if got["additionalProperties"] != false {
		t.Errorf("%s: config must refuse unknown keys (additionalProperties: false)", schemaFile)
	}
}

// TestValuesSchemaCoversValues: every key of values.yaml and of the production-like values has
// its property in the schema (which refuses unknown keys), so adding a value without its
// schema fails here, naming the key.
func TestValuesSchemaCoversValues(t *testing.T) {
	root := repo.Root(t)
	s := readSchema(t, root)
	for _, file := range []string{"values.yaml", "ci/production-values.yaml"} {
		raw, err := os.ReadFile(filepath.Join(root, chartDir, file))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		walkValues(t, s, s, v, file, "")
	}
}

func walkValues(t *testing.T, root, schema map[string]any, v map[string]any, file, path string) {
	t.Helper()
	for _, k := range sortedKeys(v) {
		at := strings.TrimPrefix(path+"."+k, ".")
		sub := resolve(root, schema)
		props, _ := sub["properties"].(map[string]any)
		ps, ok := props[k].(map[string]any)
		if !ok {
			if sub["additionalProperties"] == false || props != nil {
				t.Errorf("%s: %s sets %q, which has no property in %s: add %q under the schema of %q",
					file, at, k, schemaFile, k, strings.TrimPrefix(path, "."))
			}
			continue
		}
		if child, ok := v[k].(map[string]any); ok {
			walkValues(t, root, ps, child, file, at)
		}
	}
}

// resolve follows a local $ref.
func resolve(root, s map[string]any) map[string]any {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	cur := any(root)
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cur = cur.(map[string]any)[part]
	}
	return cur.(map[string]any)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestValuesSchemaRefuses: helm refuses, through values.schema.json, what the services would
// ignore or refuse only at start-up, and accepts the values an operator writes.
func TestValuesSchemaRefuses(t *testing.T) {
	root := repo.Root(t)
	helm := helmBinary(t, root)
	render := func(args ...string) ([]byte, error) {
		cmd := exec.Command(helm, append([]string{"template", "msgx", filepath.Join(root, chartDir), "-f", filepath.Join(root, chartDir, "ci/tokens-values.yaml")}, args...)...)
		return cmd.CombinedOutput()
	}
	for _, c := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"misspelt parameter", []string{"--set", `config.pipeline\.max-atempts=7`}, "pipeline.max-atempts"},
		{"probe period not a number", []string{"--set", "probes.liveness.periodSeconds=abc"}, "periodSeconds"},
		{"replicas not a number", []string{"--set", "services.pump.replicas=two"}, "replicas"},
		{"no replica", []string{"--set", "services.pump.replicas=0"}, "replicas"},
		{"integer parameter", []string{"--set-string", `config.pipeline\.claim-batch=many`}, "pipeline.claim-batch"},
		{"duration parameter", []string{"--set-string", `config.pipeline\.poll-interval=often`}, "pipeline.poll-interval"},
		{"log level", []string{"--set", `config.log\.level=verbose`}, "log.level"},
		{"boolean parameter", []string{"--set-string", `config.shadow=yes`}, "shadow"},
		{"unknown service", []string{"--set", "services.router.enabled=true"}, "router"},
		{"unknown top-level key", []string{"--set", "replicaCount=2"}, "replicaCount"},
		{"chart-managed parameter", []string{"--set", `config.pg\.dsn=postgres://x`}, "pg.dsn"},
		{"extra volume mount without a path", []string{"--set", "services.ingest.extraVolumeMounts[0].name=tls"}, "mountPath"},
		{"spread constraint without a key", []string{"--set", "topologySpreadConstraints[0].maxSkew=1"}, "topologyKey"},
		{"operator token shorter than 32", []string{"--set", "tokens.controlToken=short-token"}, "controlToken"},
		{"reader token shorter than 32", []string{"--set", "tokens.readerToken=short-token"}, "readerToken"},
		{"compat token shorter than 32", []string{"--set", "tokens.httpToken=short-token"}, "httpToken"},
		{"memory limit not a quantity", []string{"--set", "services.pump.resources.limits.memory=lots"}, "memory"},
		{"migration CPU request not a quantity", []string{"--set", "migration.resources.requests.cpu=fast"}, "cpu"},
	} {
		out, err := render(c.args...)
		if err == nil {
			t.Errorf("%s: %v rendered; the schema must refuse it", c.name, c.args)
			continue
		}
		if !strings.Contains(string(out), "schema") || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: the refusal does not name %q as a schema error:\n%s", c.name, c.want, out)
		}
	}
	for _, args := range [][]string{
		{"--set", "services.pump.replicas=2"},
		{"--set", "services.pump.resources.limits.memory=512Mi", "--set", "services.pump.resources.requests.cpu=250m"},
		{"--set", `config.pipeline\.claim-batch=1000`},
		{"--set-string", `config.pipeline\.claim-batch=1000`},
		{"--set", `config.shadow=true`},
		{"--set", `config.log\.level=DEBUG`},
		{"--set", `config.pipeline\.cutover-watermark=null`},
		{"--set-string", `config.schd\.daily-request-at=05:30`},
		{"-f", filepath.Join(root, chartDir, "ci/production-values.yaml")},
	} {
		if out, err := render(args...); err != nil {
			t.Errorf("%v refused: %v\n%s", args, err, out)
		}
	}
}

// TestChartRefusesExactlyTheRenamedKeys: the chart's list of renamed keys is the aliases of the
// parameters values.yaml sets, each naming its new key.
func TestChartRefusesExactlyTheRenamedKeys(t *testing.T) {
	root := repo.Root(t)
	raw, err := os.ReadFile(filepath.Join(root, chartDir, "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`range \$old, \$new := dict ((?:"[^"]+" ?)+)`).FindSubmatch(raw)
	if line == nil {
		t.Fatal("templates/_helpers.tpl has no dict of renamed keys")
	}
	words := regexp.MustCompile(`"([^"]+)"`).FindAllSubmatch(line[1], -1)
	got := map[string]string{}
	for i := 0; i+1 < len(words); i += 2 {
		got[string(words[i][1])] = string(words[i+1][1])
	}
	want := map[string]string{}
	for _, p := range config.Params() {
		if _, managed := chartManaged[p.Key]; managed {
			continue
		}
		for _, a := range p.Aliases {
			want[a] = p.Key
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the chart refuses %v as renamed, want the aliases of pkg/config %v", got, want)
	}
}
