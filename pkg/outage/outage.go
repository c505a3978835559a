// Package outage tells a dependency that is down from a failure the message itself caused
// (docs/architecture.md, "An outage is not an attempt"). Each store classifies its own
// driver's errors where they are decided (db.Classify, aodb.Classify, projection.Classify);
// this package holds the verdicts, the transport rules they share, and the Policy that waits
// an outage out.
package outage

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// Verdict is what a failed call to a dependency says about whose fault it is.
type Verdict uint8

const (
	// Attempt: the failure belongs to the message (its command was refused, its data broke a
	// rule); it counts toward pipeline.max-attempts.
	Attempt Verdict = iota
	// Down: the dependency did not answer (refused, reset, closed, shutting down, read-only
	// after a failover); the work waits and nothing is charged to the message.
	Down
	// Unsure: the call timed out or hit a transient condition that a huge message could also
	// cause. A probe of the same dependency decides: failing too, it is an outage; answering,
	// it is the message's attempt.
	Unsure
)

func (v Verdict) String() string {
	switch v {
	case Attempt:
		return "attempt"
	case Down:
		return "down"
	case Unsure:
		return "unsure"
	}
	return "unknown"
}

// The dependencies, as they appear in metrics, logs and GetStatus.
const (
	Inbox    = "inbox"
	Redis    = "redis"
	Postgres = "postgres"
	Kafka    = "kafka"
)

// Transport classifies the failures every network client shares: a refused, reset or closed
// connection is Down; a timeout (the client's own bound, a context deadline) is Unsure. ok is
// false when err is none of these, and the driver's own rules decide. A cancelled context is
// not classified here: it is the caller stopping, which is neither an outage nor an attempt.
func Transport(err error) (v Verdict, ok bool) {
	var ne net.Error
	switch {
	case err == nil:
		return Attempt, false
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Unsure, true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return Down, true
	}
	var oe *net.OpError
	var de *net.DNSError
	if errors.As(err, &oe) || errors.As(err, &de) {
		return Down, true
	}
	return Attempt, false
}
