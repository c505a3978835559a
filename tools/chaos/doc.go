// Package chaos runs the five services as processes on real PostgreSQL, MariaDB, Redis and an
// Apache Kafka broker of the run's own (kafkatest.Own), loads a generated day of SIS traffic into
// the inbox with rolled-back inserts and late commits, and while it drains injects faults
// with the real mechanisms: SIGKILL of services (restarted), pg_terminate_backend, MySQL KILL,
// Redis CLIENT PAUSE, the broker killed with SIGKILL and restarted, LOCK TABLES on the inbox, and one
// outage of each chosen dependency longer than the pump's whole retry budget. Then it checks
// the run against the R-INV invariants of docs/rules.md and against a fault-free reference run over
// the same inbox rows in the same ID order, and prints a summary.
//
// Run is the harness; TestChaos drives it (a one-minute run in `make test`, longer ones with
// `make chaos`). docs/chaos.md describes the faults, the checks and how to read a failure.
package chaos
