// Package contract is the machine-readable event contract of the outbox topics: JSON Schemas
// (draft 2020-12) of the records' key, headers and values, and the AsyncAPI 3 document that
// names the topics, their cleanup policies and the consumer rules (docs/dispatcher.md, "Event
// contract"). The files are what downstream teams are given; they are embedded so that the
// tests that consume the dispatcher's records (testkit/contracttest) validate every record
// against the same bytes. No production code reads them: pkg/kafkarecord writes the key and
// headers, pkg/flight the values.
package contract

import "embed"

// Files holds the contract's files, by the names below.
//
//go:embed asyncapi.yaml *.schema.json
var Files embed.FS

// The files of the contract. The schemas refer to one another by these relative names.
const (
	AsyncAPI       = "asyncapi.yaml"
	Key            = "key.schema.json"
	Headers        = "headers.schema.json"
	MsgEvent       = "msg-event.schema.json"       // the value of a KAFKA:msg record
	SchdValue      = "schd-value.schema.json"      // the value of a KAFKA:schd record: a document or null
	FlightDocument = "flight-document.schema.json" // the value of a KAFKA:schd UPSERT
)

// Schemas lists the JSON Schema files.
var Schemas = []string{Key, Headers, MsgEvent, SchdValue, FlightDocument}
