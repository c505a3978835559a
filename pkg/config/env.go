package config

import (
	"fmt"
	"sort"
	"strings"
)

// Service is a set of the binaries that read a parameter.
type Service uint8

// The five services; a parameter's limits and rules are checked only by the services that read
// it, so that a setting one service does not use can never stop it.
const (
	ServiceIngest Service = 1 << iota
	ServicePump
	ServiceDispatcher
	ServiceBackfill
	ServiceControl

	AllServices = ServiceIngest | ServicePump | ServiceDispatcher | ServiceBackfill | ServiceControl
)

// ServiceNamed is the service of a role's name (ingest, pump, ...).
func ServiceNamed(role string) (Service, bool) {
	s, ok := map[string]Service{"ingest": ServiceIngest, "pump": ServicePump, "dispatcher": ServiceDispatcher, "backfill": ServiceBackfill, "control": ServiceControl}[role]
	return s, ok
}

// configFileVar names the YAML file Load reads.
const configFileVar = "MSGX_CONFIG_FILE"

// NotParameters are the prefixes of the MSGX_ variables that are not parameters
// (docs/environment.md, "Variables that are not parameters"): those of the test, benchmark and
// chaos harnesses, and those docker-compose.yml and its init scripts read for the other
// containers (passwords, topics, Jaeger's addresses). The services never read them, and Load
// lets them pass: a developer's shell that exports MSGX_TEST_PG_DSN for `make test` or
// MSGX_PG_PASSWORD for compose must still start a service.
var NotParameters = []string{
	"MSGX_TEST_", "MSGX_BENCH_", "MSGX_CHAOS_", "MSGX_ORDER_", "MSGX_SIS_SAMPLES", "MSGX_PROMTOOL", "MSGX_KAFKA_HOME",
	"MSGX_PG_PASSWORD", "MSGX_PG_APP_PASSWORD", "MSGX_MYSQL_PASSWORD", "MSGX_TOPICS", "MSGX_TOPIC_PARTITIONS",
	"MSGX_TOPIC_REPLICATION", "MSGX_TOPIC_SCHD", "MSGX_JAEGER_",
}

// EnvName is the environment variable that sets key.
func EnvName(key string) string {
	return "MSGX_" + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(key))
}

// unknownVariables refuses every MSGX_ variable that is neither a parameter, the config file,
// nor one of NotParameters, naming the closest parameter's variable: an unknown variable is
// almost always a misspelled one (MSGX_PIPELINE_MAX_ATEMPTS) whose parameter kept its default.
func unknownVariables(env Env, ps []param) []error {
	known := map[string]bool{configFileVar: true}
	for _, p := range ps {
		known[EnvName(p.key)] = true
	}
	var errs []error
	for _, name := range sortedKeys(env) {
		if !strings.HasPrefix(name, "MSGX_") || known[name] || notParameter(name) {
			continue
		}
		errs = append(errs, fmt.Errorf("unknown variable %s%s", name, suggest(name, ps, func(p param) string { return EnvName(p.key) })))
	}
	return errs
}

func notParameter(name string) bool {
	for _, p := range NotParameters {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// suggest names the closest known spelling of s, by edit distance, if one is close enough to
// be a misspelling of it.
func suggest(s string, ps []param, spell func(param) string) string {
	best, bestD := "", len(s)/3+1
	for _, p := range ps {
		if d := distance(s, spell(p)); d < bestD {
			best, bestD = spell(p), d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// distance is the Levenshtein distance of a and b, in bytes: keys and variable names are ASCII.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
