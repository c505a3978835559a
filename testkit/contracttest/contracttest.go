// Package contracttest validates the records the dispatcher produces against the published
// event contract (pkg/kafkarecord/contract; docs/dispatcher.md, "Event contract"): every test
// that consumes the outbox topics checks what it reads with it, so a change of the key, the
// headers or a document that the contract does not describe fails the test that produced it.
//
// The published schemas let the contract grow (consumers ignore what they do not know); the
// check here is stricter for the producer: every field, tag and header a record carries must be
// declared in its schema, so the contract always names everything the dispatcher writes.
package contracttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/kafkarecord/contract"
	"github.com/msgexchange/msgexchange/pkg/outbox"
)

// base is where the schema files are placed for the compiler: they refer to each other by
// relative names, so any base works, and nothing is ever fetched from it.
const base = "mem:///contract/"

// Contract is a compiled version of the event contract.
type Contract struct {
	// Version is the AsyncAPI document's info.version.
	Version string
	// Raw holds each schema file decoded, by file name (the compatibility check reads them).
	Raw map[string]any
	// Channels are the AsyncAPI document's channels by name: what a consumer subscribes to.
	Channels map[string]Channel

	key, headers, msg, schd *jsonschema.Schema
	declared                map[string][]string // schema file → the property names it declares
}

// Channel is what the AsyncAPI document says of one topic.
type Channel struct {
	Address       string
	Topic         string // the Kafka binding's topic
	CleanupPolicy []string
	Messages      []string
}

// Load compiles the contract held in fsys (the embedded files, or a previous version's copy).
func Load(fsys fs.FS) (*Contract, error) {
	c := &Contract{Raw: map[string]any{}, declared: map[string][]string{}}
	api, err := fs.ReadFile(fsys, contract.AsyncAPI)
	if err != nil {
		return nil, fmt.Errorf("event contract: %w", err)
	}
	var doc struct {
		AsyncAPI string `yaml:"asyncapi"`
		Info     struct {
			Version string `yaml:"version"`
		} `yaml:"info"`
		Channels map[string]struct {
			Address  string         `yaml:"address"`
			Messages map[string]any `yaml:"messages"`
			Bindings struct {
				Kafka struct {
					Topic              string `yaml:"topic"`
					TopicConfiguration struct {
						CleanupPolicy []string `yaml:"cleanup.policy"`
					} `yaml:"topicConfiguration"`
				} `yaml:"kafka"`
			} `yaml:"bindings"`
		} `yaml:"channels"`
	}
	if err := yaml.Unmarshal(api, &doc); err != nil {
		return nil, fmt.Errorf("event contract: %s: %w", contract.AsyncAPI, err)
	}
	if !strings.HasPrefix(doc.AsyncAPI, "3.") || doc.Info.Version == "" {
		return nil, fmt.Errorf("event contract: %s: want AsyncAPI 3 with info.version, got asyncapi %q, version %q",
			contract.AsyncAPI, doc.AsyncAPI, doc.Info.Version)
	}
	c.Version = doc.Info.Version
	c.Channels = map[string]Channel{}
	for name, ch := range doc.Channels {
		c.Channels[name] = Channel{Address: ch.Address, Topic: ch.Bindings.Kafka.Topic,
			CleanupPolicy: ch.Bindings.Kafka.TopicConfiguration.CleanupPolicy, Messages: slices.Sorted(maps.Keys(ch.Messages))}
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.AssertFormat()
	for _, name := range contract.Schemas {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("event contract: %w", err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("event contract: %s: %w", name, err)
		}
		if err := comp.AddResource(base+name, v); err != nil {
			return nil, fmt.Errorf("event contract: %s: %w", name, err)
		}
		c.Raw[name] = v
		if obj, ok := v.(map[string]any); ok {
			if props, ok := obj["properties"].(map[string]any); ok {
				c.declared[name] = slices.Sorted(maps.Keys(props))
			}
		}
	}
	for _, s := range []struct {
		name string
		into **jsonschema.Schema
	}{{contract.Key, &c.key}, {contract.Headers, &c.headers}, {contract.MsgEvent, &c.msg}, {contract.SchdValue, &c.schd}} {
		if *s.into, err = comp.Compile(base + s.name); err != nil {
			return nil, fmt.Errorf("event contract: %w", err)
		}
	}
	return c, nil
}

// Current is the contract this revision publishes (pkg/kafkarecord/contract), compiled once.
var Current = sync.OnceValues(func() (*Contract, error) { return Load(contract.Files) })

// CheckRecord checks a consumed record against the current contract (Check); target is the
// outbox target of its topic (outbox.TargetMsg or outbox.TargetSchd).
func CheckRecord(target string, r *kgo.Record) error {
	c, err := Current()
	if err != nil {
		return err
	}
	return c.Check(target, r.Key, r.Headers, r.Value)
}

// Check checks one record the dispatcher produced: what Accepts checks, and that the record
// carries no header, field or tag its schemas do not declare. The error names the record and
// every violation found.
func (c *Contract) Check(target string, key []byte, headers []kgo.RecordHeader, value []byte) error {
	return c.check(target, key, headers, value, true)
}

// Accepts checks one record as a consumer of the contract reads it: its key, its headers and
// its value against their schemas, and what the schemas cannot say across them (the key is the
// value's FLID, the state version header its STATE_VERSION, a TOMBSTONE a deleted flight, on
// KAFKA:schd a null value). What the schemas leave open (a tag, field or header of a later
// minor version) is accepted.
func (c *Contract) Accepts(target string, key []byte, headers []kgo.RecordHeader, value []byte) error {
	return c.check(target, key, headers, value, false)
}

func (c *Contract) check(target string, key []byte, headers []kgo.RecordHeader, value []byte, strict bool) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if !utf8.Valid(key) {
		fail("key is not UTF-8")
	} else if err := c.key.Validate(string(key)); err != nil {
		fail("key: %w", err)
	}

	hs := map[string]any{}
	for _, h := range headers {
		if _, dup := hs[h.Key]; dup {
			fail("header %s appears twice", h.Key)
		}
		if !utf8.Valid(h.Value) {
			fail("header %s is not UTF-8", h.Key)
		}
		hs[h.Key] = string(h.Value)
	}
	if err := c.headers.Validate(hs); err != nil {
		fail("headers: %w", err)
	}
	c.undeclared(strict, contract.Headers, hs, "header", fail)
	eventType, _ := hs[kafkarecord.HeaderEventType].(string)
	version, _ := hs[kafkarecord.HeaderStateVersion].(string)

	var doc any // the value decoded; nil for a null value
	if value != nil {
		var err error
		if doc, err = jsonschema.UnmarshalJSON(bytes.NewReader(value)); err != nil {
			fail("value is not JSON: %w", err)
			return c.report(target, key, errs)
		}
		if doc == nil {
			fail("value is the JSON null, not a null value")
		}
	}
	obj, _ := doc.(map[string]any)
	switch target {
	case outbox.TargetMsg:
		if value == nil {
			fail("a KAFKA:msg record has a null value: its tombstone is a JSON note")
			break
		}
		if err := c.msg.Validate(doc); err != nil {
			fail("value: %w", err)
		}
		c.undeclared(strict, contract.MsgEvent, obj, "field", fail)
		if deleted := obj["STATE"] == "DELETED"; deleted != (eventType == outbox.TypeTombstone) {
			fail("%s %s with STATE %v", kafkarecord.HeaderEventType, eventType, obj["STATE"])
		}
	case outbox.TargetSchd:
		if err := c.schd.Validate(doc); err != nil {
			fail("value: %w", err)
		}
		if (value == nil) != (eventType == outbox.TypeTombstone) {
			fail("%s %s with a value of %d bytes (null: %v); a TOMBSTONE, and only it, is a null value",
				kafkarecord.HeaderEventType, eventType, len(value), value == nil)
		}
		c.undeclared(strict, contract.FlightDocument, obj, "tag", fail)
	default:
		fail("unknown target %q", target)
	}
	if obj != nil {
		if flid, _ := obj["FLID"].(string); flid != string(key) {
			fail("key %q is not the value's FLID %q", key, flid)
		}
		if v, ok := obj["STATE_VERSION"].(json.Number); ok && v.String() != version {
			fail("%s %q is not the value's STATE_VERSION %s", kafkarecord.HeaderStateVersion, version, v)
		}
	}
	return c.report(target, key, errs)
}

// undeclared reports every name of got that schema file does not declare among its properties.
func (c *Contract) undeclared(strict bool, file string, got map[string]any, what string, fail func(string, ...any)) {
	if !strict {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := slices.BinarySearch(c.declared[file], name); !ok {
			fail("%s %s is not declared in the contract (%s): declare it there, a minor version", what, name, file)
		}
	}
}

func (c *Contract) report(target string, key []byte, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s record %q breaks the event contract %s: %w", target, key, c.Version, errors.Join(errs...))
}
