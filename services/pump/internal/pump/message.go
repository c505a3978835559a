package pump

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// message is one attempt at the head, from its inbox read to its outcome (R-PUMP-8). Each step
// is a method that returns one outcome: the zero outcome to go on to the next step, any other
// to end the attempt with. What the steps share is kept here, each field set by the step that
// learns it.
type message struct {
	p    *Pump
	s    Session
	head queue.Message
	// started is the attempt's start, for the attempt history.
	started time.Time
	span    trace.Span

	// Set once the message decoded: the processor's input, the identity binding and the
	// processor (nil for a kind that is legal but unsupported).
	in      Input
	binding queue.Binding
	proc    Processor

	// bound is what the identity binding decided when it ran in ①'s first round trip: the
	// message gone, the binding failed, or the identity held by another message. It stays zero
	// while the binding has not run, or when it let the message go on. Once set, it decides
	// the message whatever ① did behind it, a processor's panic included (R-TX-10).
	bound outcome
	// next is the head read with ③ (nil when none was read) and trail what the message leaves
	// once it SUCCEEDED; both count only once the lock's release went through (underLock).
	next  *queue.Message
	trail Trail
}

// process runs the message's steps in order: the inbox read, the decoding, then, under the
// pipeline lock, ① ② ③ with the binding ahead of ① (held.business); or the binding on its own
// and, for a message whose ① committed earlier, ② ③ (held.reproject); or the binding and
// SKIPPED(UNSUPPORTED).
func (m *message) process(ctx context.Context) outcome {
	raw, o := m.read(ctx)
	if o.ends() {
		return o
	}
	msg, o := m.decode(ctx, raw)
	if o.ends() {
		return o
	}
	m.span.SetAttributes(attribute.String("type", msg.Meta.TYPE), attribute.String("styp", msg.Meta.STYP))
	// The flight the message is about: a FLOP's, or a single-flight ADFT's (its history reads
	// the message from here when it ended without writing, R-ORDER-8).
	var flid string
	switch b := msg.Body.(type) {
	case *sis.Flop:
		flid = b.Record.FLID
	case *sis.Schd:
		if b.STYP == "ADFT" && len(b.Records) == 1 {
			flid = b.Records[0].FLID
		}
	}
	if flid != "" {
		m.span.SetAttributes(attribute.String("flid", flid))
	}
	m.binding = queue.Binding{MsgID: m.head.MsgID, Key: sis.Identity(msg.Meta, m.p.cfg.IdentityDayBounded), Type: msg.Meta.TYPE,
		Styp: msg.Meta.STYP, FLID: flid, Raw: raw, Started: m.started, Now: m.p.clock.Now()}
	var why string
	m.proc, why = m.p.route(msg)
	m.in = Input{MsgID: m.head.MsgID, Message: msg, Now: m.p.clock.Now(), Trace: m.p.telemetry.Inject(ctx)}
	if m.head.AppliedAt == nil && m.proc != nil {
		// The binding goes ahead of ①, in its first round trip (R-TX-10).
		return m.underLock(ctx, (*held).business)
	}
	if o := m.bind(ctx); o.ends() {
		return o
	}
	if m.head.AppliedAt != nil {
		m.span.SetAttributes(attribute.Bool("reproject", true))
		return m.underLock(ctx, (*held).reproject)
	}
	return outcome{state: queue.Skipped, class: queue.Unsupported, reason: "unsupported: " + why}
}

// read returns the message's raw text from the inbox, or the text an earlier run kept when the
// inbox row is gone (R-PUMP-10).
func (m *message) read(ctx context.Context) (string, outcome) {
	raw, err := m.p.inbox.Raw(ctx, m.head.MsgID)
	if errors.Is(err, aodb.ErrRowMissing) {
		// Purged upstream after an earlier run read it (a replay after the marker let the
		// database team delete the row): the text kept then is the same message.
		raw, err = m.p.storedRaw(ctx, m.s, m.head.MsgID, err)
	}
	switch {
	case errors.Is(err, aodb.ErrRowMissing):
		return "", outcome{state: queue.Dead, class: queue.Malformed, reason: "raw-missing"}
	case errors.Is(err, errStoredRaw):
		return "", failedCall(outage.Postgres, db.Classify(err), err.Error(), err)
	case err != nil:
		// Unreachable, timed out: infrastructure, never "missing" (R-PUMP-8). The read is
		// the same statement for every message, so even a server error is no verdict on this
		// one: a probe of the table decides.
		v := aodb.Classify(err)
		if v == outage.Attempt {
			v = outage.Unsure
		}
		return "", failedCall(outage.Inbox, v, "read inbox: "+err.Error(), err)
	}
	return raw, outcome{}
}

// decode decodes the raw text. A text that does not decode is kept for a replay once a codec
// that understands it is deployed, and for GetMessage after the inbox row is gone (R-PUMP-10).
func (m *message) decode(ctx context.Context, raw string) (*sis.Message, outcome) {
	msg, err := sis.Decode(raw, m.p.cfg.Codec)
	if err == nil {
		return msg, outcome{}
	}
	// A failure to keep the text is no reason to stop here.
	if kerr := m.s.Do(ctx, func(conn *pgx.Conn) error { return queue.KeepRaw(ctx, conn, m.head.MsgID, raw, m.started) }); kerr != nil {
		m.p.logger.WarnContext(ctx, "raw text not kept", "msg_id", m.head.MsgID, "err", kerr)
	}
	if class, _ := sis.ClassOf(err); class == sis.Malformed {
		return nil, outcome{state: queue.Dead, class: queue.Malformed, reason: err.Error()}
	}
	return nil, failed(queue.CodecError, err.Error(), err)
}

// bind runs the identity binding as a statement of its own (R-TX-2), on the paths that have no
// ① to carry it: a re-projection and an unsupported kind.
func (m *message) bind(ctx context.Context) outcome {
	holder, err := db.DoV(ctx, m.s, func(conn *pgx.Conn) (int64, error) { return queue.Bind(ctx, conn, m.binding) })
	return bindOutcome(m.head.MsgID, holder, err)
}

// heardBinding hears the verdict of the binding sent in ①'s first round trip. A verdict that
// decides the message is kept and refused: the refusal is the failure of ①'s first statement
// (db.PipelinedAfter), and ①'s COMMIT is stopped on the server whatever the processor does
// with it (queue.AddIdentityCheck).
func (m *message) heardBinding(holder int64, err error) error {
	if o := bindOutcome(m.head.MsgID, holder, err); o.ends() {
		m.bound = o
		return cmp.Or(err, errBoundElsewhere)
	}
	return nil
}

// bindOutcome is the outcome the identity binding decides, if it decides one: the message is
// no longer unfinished, the binding failed, or another message holds the identity (R-TX-2).
func bindOutcome(msgID, holder int64, err error) outcome {
	switch {
	case errors.Is(err, queue.ErrNotUnfinished):
		return outcome{gone: true}
	case err != nil:
		return failedCall(outage.Postgres, db.Classify(err), err.Error(), err)
	case holder != msgID:
		return outcome{state: queue.Skipped, reason: "duplicate-of:" + strconv.FormatInt(holder, 10)}
	}
	return outcome{}
}

// errBoundElsewhere stops ① behind a binding that found the identity held by another message.
var errBoundElsewhere = errors.New("the identity is bound to another message")

// panicked is the outcome of an attempt that panicked, as processOne's recover (the only one)
// decides it: a failure of the message (R-PUMP-6), unless the binding had decided the message;
// then the decision stands, as when the binding ran before the processor (R-TX-10). ①'s
// rollback and the pipeline lock's release ran on the way out; the rollback sends a binding
// that nothing had sent yet, so its verdict is heard before this.
func (m *message) panicked(ctx context.Context, r any) outcome {
	if m.bound.ends() {
		m.p.logger.ErrorContext(ctx, "processor panicked for a message its identity binding decided; the binding's decision stands",
			"msg_id", m.head.MsgID, "panic", r, "stack", string(debug.Stack()))
		return m.bound
	}
	m.p.logger.ErrorContext(ctx, "panic while processing; recorded as a failure", "msg_id", m.head.MsgID, "panic", r, "stack", string(debug.Stack()))
	return failed(queue.Infra, fmt.Sprintf("panic: %v", r), nil)
}

// underLock runs steps under the pipeline lock on the lock connection; the lock spans ① to ③
// and the Redis write (R-TX-3, R-TX-5). The steps' outcome is the attempt's unless the lock's
// release failed: the release carries ③ and the next head's read, so only a release that went
// through has finished the message, read the next head and lets the trail follow.
//
// The round trips of a business success (docs/performance.md): the binding (a transaction of
// its own, R-TX-10), the pipeline lock and BEGIN go out with ①'s first statements and
// applied_at with its COMMIT (db.PipelinedAfter), and ③ goes out with the release of the lock,
// ahead of the unlock. Each step still ends before the next begins: ① has committed before ②
// writes Redis, and ③ is sent only after ②.
func (m *message) underLock(ctx context.Context, steps func(h *held, ctx context.Context) outcome) outcome {
	var o outcome
	err := m.s.Do(ctx, func(conn *pgx.Conn) error {
		return m.p.withPipelineLock(ctx, conn, func(lock, release *pgx.Batch) error {
			h := &held{message: m, conn: conn, lock: lock, release: release}
			o = steps(h, ctx)
			return h.end(o)
		})
	})
	if err != nil {
		// A head read with a release that did not go through says nothing.
		m.next = nil
	}
	switch {
	case errors.Is(err, queue.ErrNotUnfinished):
		return outcome{gone: true}
	case err != nil:
		return failedCall(outage.Postgres, db.Classify(err), err.Error(), err)
	}
	if m.trail != nil {
		// The message SUCCEEDED with the release; its trail follows, outside the lock (R-TX-7).
		_ = m.s.Do(ctx, func(conn *pgx.Conn) error { m.appendTrail(ctx, conn, m.trail); return nil })
	}
	return o
}

// held is a message while it holds the pipeline lock: the steps from ① to ③, on the lock
// connection. lock is the statement that takes the lock, sent in the first transaction's first
// round trip (db.Pipelined); release collects what goes out ahead of the unlock (③ and the next
// head's read), so neither costs a round trip of its own (withPipelineLock).
type held struct {
	*message
	conn          *pgx.Conn
	lock, release *pgx.Batch
}

// business is a business success's three steps (R-TX-3): ① with the binding ahead of it, ②,
// then, for a message too large for one transaction, each further step with its projection,
// and ③ with the lock's release.
func (h *held) business(ctx context.Context) outcome {
	res, o := h.apply(ctx)
	if o.ends() {
		return o
	}
	if o := h.projectStates(ctx, res.Project, ""); o.ends() {
		return o
	}
	for i := range res.Then {
		if o := h.further(ctx, res.Then, i); o.ends() {
			return o
		}
	}
	return h.finish(res.Trail)
}

// reproject is ② and ③ for a message whose ① committed in an earlier run (R-PUMP-9): its
// change and events are in place and its flights may have moved on since (a replay comes after
// newer messages), so the processor only reads their current states (Reprojector) in a
// transaction that takes the lock, and nothing is applied again.
func (h *held) reproject(ctx context.Context) outcome {
	flights, err := db.WithTxV(ctx, db.Pipelined(h.conn, h.lock), func(tx pgx.Tx) ([]flight.Flight, error) {
		r, ok := h.proc.(Reprojector)
		if !ok {
			return nil, nil // nothing this processor can re-project
		}
		return r.Reproject(ctx, tx, h.in)
	})
	if d := DecisionOf(err); d != nil {
		return h.decided(ctx, d)
	}
	if o := txOutcome(err, "business transaction"); o.ends() {
		return o
	}
	if o := h.projectStates(ctx, flight.Project(flights), ""); o.ends() {
		return o
	}
	return h.finish(nil)
}

// apply is ①: the processor's transaction behind the identity binding, which runs as a
// transaction of its own in ①'s first round trip (db.PipelinedAfter, R-TX-10); applied_at goes
// with ①'s COMMIT unless further steps follow. It returns the processor's result, or the
// outcome that ends the message.
func (h *held) apply(ctx context.Context) (Result, outcome) {
	before := &pgx.Batch{}
	queue.AddBind(before, h.binding, h.heardBinding)
	res, err := db.WithTxV(ctx, db.PipelinedAfter(h.conn, before, h.lock), func(tx pgx.Tx) (Result, error) {
		// A binding that decided fails ①'s first statement; this stops ①'s COMMIT on the
		// server, whatever the processor does with that failure.
		check := &pgx.Batch{}
		queue.AddIdentityCheck(check, h.in.MsgID)
		if err := db.Defer(ctx, tx, check); err != nil {
			return Result{}, err
		}
		res, err := h.proc.Apply(ctx, tx, h.in)
		if err != nil || len(res.Then) > 0 {
			return res, err
		}
		// Recorded with the change it marks: a re-run after this commit must not apply the
		// message again (R-PUMP-9). With further steps it goes with the last one.
		return res, queue.MarkApplied(ctx, tx, h.in.MsgID, h.in.Now)
	})
	// A decision rolled ① back; it is no failure of the transaction.
	d := DecisionOf(err)
	var o outcome
	if d == nil {
		o = txOutcome(err, "business transaction")
	}
	if h.bound.ends() && h.end(o) == nil {
		// As if the binding had run on its own before ①, which rolled back. Only a ① that ends
		// the locked section itself (the message gone, the lock connection lost) goes first.
		return Result{}, h.bound
	}
	if d != nil {
		return Result{}, h.decided(ctx, d)
	}
	return res, o
}

// further is the i-th of a message's further steps (Result.Then): a transaction of its own,
// committed and projected before the next one, so a failure leaves the steps before it in
// place and the re-run finds them; applied_at goes with the last.
func (h *held) further(ctx context.Context, steps []Step, i int) outcome {
	label := fmt.Sprintf("step %d of %d", i+2, len(steps)+1)
	states, err := db.WithTxV(ctx, db.Pipelined(h.conn, nil), func(tx pgx.Tx) ([]flight.Projected, error) {
		states, err := steps[i](ctx, tx)
		if err != nil || i < len(steps)-1 {
			return states, err
		}
		return states, queue.MarkApplied(ctx, tx, h.in.MsgID, h.in.Now)
	})
	if o := txOutcome(err, label); o.ends() {
		return o
	}
	return h.projectStates(ctx, states, label+": ")
}

// projectStates is ②: committed states written to Redis, still under the lock. A failure
// leaves the message unfinished with its committed transactions in place; its re-run projects
// the current state (R-PROJ-3).
func (h *held) projectStates(ctx context.Context, states []flight.Projected, label string) outcome {
	if len(states) == 0 {
		return outcome{}
	}
	if _, err := h.p.project.Write(ctx, states); err != nil {
		return failedCall(outage.Redis, projection.Classify(err), label+"redis projection: "+err.Error(), err)
	}
	return outcome{}
}

// finish adds ③, SUCCEEDED with its backfill intent, to the lock's release, and behind it
// the read of the next head for the tick that follows; trail is appended once the release went
// through. ③ commits without waiting for its WAL flush (R-TX-9): the next message's ① flushes
// it, a ③ lost in a server crash is the re-run of a message whose ① stands (applied_at): ② and
// ③ again, nothing applied twice; and the backfill marks the inbox row only once ③ is flushed
// (R-BACKFILL-10).
func (h *held) finish(trail Trail) outcome {
	db.AddCommitAsync(h.release)
	if err := queue.AddFinish(h.release, queue.Outcome{MsgID: h.in.MsgID, State: queue.Succeeded, Started: h.started,
		Now: h.p.clock.Now()}); err != nil {
		return failedCall(outage.Postgres, db.Classify(err), err.Error(), err)
	}
	queue.AddHead(h.release, h.heardNext)
	h.trail = trail
	return outcome{state: queue.Succeeded, recorded: true}
}

// heardNext keeps the head read with ③.
func (m *message) heardNext(next queue.Message, ok bool) {
	if !ok {
		next = queue.Message{}
	}
	m.next = &next
}

// decided ends the message as its processor decided, with the transaction rolled back
// whatever the processor wrote in it (R-INV-8). The decision's trail is appended now, on the
// lock connection, outside every business transaction and before the decision is recorded
// (R-TX-7).
func (h *held) decided(ctx context.Context, d *Decision) outcome {
	h.appendTrail(ctx, h.conn, d.Trail)
	return outcome{state: d.State, class: d.Class, reason: d.Reason}
}

// end is the error the locked section ends with, given its outcome: queue.ErrNotUnfinished
// when the message stopped being unfinished (someone else got there first; nothing is
// recorded), and the failure of a PostgreSQL step that closed the lock connection, which the
// session reports as the end of the term (leader.ErrLost: an interruption, not counted,
// R-PUMP-6). Any other outcome releases the lock as usual and is recorded after the release.
func (h *held) end(o outcome) error {
	switch {
	case o.gone:
		return queue.ErrNotUnfinished
	case o.dependency == outage.Postgres && h.conn.IsClosed():
		return o.err
	}
	return nil
}

// txOutcome is the outcome of one of the message's transactions that ended with err: none when
// it committed, the message gone when it stopped being unfinished (the transaction rolled
// back), otherwise a failure classified for the outage rule (R-PUMP-7).
func txOutcome(err error, label string) outcome {
	switch {
	case err == nil:
		return outcome{}
	case errors.Is(err, queue.ErrNotUnfinished):
		return outcome{gone: true}
	}
	return failedCall(outage.Postgres, db.Classify(err), label+": "+err.Error(), err)
}

// appendTrail appends what the message leaves in a log of its own. It is not part of the
// outcome: a failure is logged and the message keeps its state (R-TX-7).
func (m *message) appendTrail(ctx context.Context, conn *pgx.Conn, t Trail) {
	if t == nil {
		return
	}
	if err := t(ctx, conn); err != nil {
		m.p.logger.WarnContext(ctx, "trail not appended", "msg_id", m.head.MsgID, "err", err)
	}
}

// errStoredRaw marks a failure to read the kept raw text (a PostgreSQL call, not the inbox).
var errStoredRaw = errors.New("read the kept raw text")

// storedRaw returns the raw text kept by an earlier run of a message whose inbox row is gone;
// missing is returned as it was when nothing was kept.
func (p *Pump) storedRaw(ctx context.Context, s Session, msgID int64, missing error) (string, error) {
	raw, err := db.DoV(ctx, s, func(conn *pgx.Conn) (string, error) { return queue.StoredRaw(ctx, conn, msgID) })
	switch {
	case errors.Is(err, db.ErrNotFound):
		return "", missing
	case err != nil:
		return "", fmt.Errorf("%w: %w", errStoredRaw, err)
	}
	p.logger.InfoContext(ctx, "inbox row is gone; processing the raw text kept by an earlier run", "msg_id", msgID)
	return raw, nil
}
