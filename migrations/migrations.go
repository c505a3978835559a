// Package migrations embeds the versioned PostgreSQL schema and the development fixture of the
// shared MySQL inbox tables.
package migrations

import "embed"

// PG holds the goose migrations of the system's own PostgreSQL schema, in sql/.
//
//go:embed sql/*.sql
var PG embed.FS

// InboxFixture creates cminmsgs and coutmsgs. It is a development and test fixture only: in
// production the shared MySQL belongs to the database team and receives no DDL from us.
//
//go:embed devfixture/shared_inbox.sql
var InboxFixture string
