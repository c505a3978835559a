package contracttest_test

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/kafkarecord/contract"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
)

// TestAsyncAPINamesTheTopicsAndRules: the AsyncAPI document names both topics by their
// default names (the config registry's), with the cleanup policy the dispatcher's
// prerequisites require, the consumer rules, and refers only to files of the contract.
func TestAsyncAPINamesTheTopicsAndRules(t *testing.T) {
	b, err := fs.ReadFile(contract.Files, contract.AsyncAPI)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		AsyncAPI string `yaml:"asyncapi"`
		Info     struct {
			Description string `yaml:"description"`
		} `yaml:"info"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.AsyncAPI != "3.0.0" {
		t.Errorf("asyncapi %q, want 3.0.0", doc.AsyncAPI)
	}
	c, err := contracttest.Current()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Kafka
	want := map[string][]string{cfg.TopicMsg: {"delete"}, cfg.TopicSchd: {"compact"}}
	for name, ch := range c.Channels {
		policy, ok := want[ch.Address]
		if !ok || ch.Topic != ch.Address || !slices.Equal(ch.CleanupPolicy, policy) {
			t.Errorf("channel %s: address %q, topic %q, cleanup.policy %q; want the topics %v", name, ch.Address,
				ch.Topic, ch.CleanupPolicy, want)
		}
		delete(want, ch.Address)
	}
	if len(want) > 0 {
		t.Errorf("no channel for %v", want)
	}
	for _, rule := range []string{"read_committed", "msgx-event-id", "(FLID, STATE_VERSION)"} {
		if !strings.Contains(doc.Info.Description, rule) {
			t.Errorf("the consumer rules do not name %s", rule)
		}
	}

	// Every $ref is to a place in the document or to a file of the contract.
	var node yaml.Node
	if err := yaml.Unmarshal(b, &node); err != nil {
		t.Fatal(err)
	}
	var refs []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i++ {
			if n.Kind == yaml.MappingNode && i%2 == 0 && n.Content[i].Value == "$ref" {
				refs = append(refs, n.Content[i+1].Value)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&node)
	if len(refs) == 0 {
		t.Fatal("no $ref found")
	}
	var tree map[string]any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		if ptr, ok := strings.CutPrefix(ref, "#/"); ok {
			var at any = tree
			for _, seg := range strings.Split(ptr, "/") {
				m, _ := at.(map[string]any)
				at = m[seg]
			}
			if at == nil {
				t.Errorf("$ref %q points at nothing", ref)
			}
			continue
		}
		if !slices.Contains(contract.Schemas, ref) {
			t.Errorf("$ref %q is not a schema of the contract %q", ref, contract.Schemas)
		}
	}
}
