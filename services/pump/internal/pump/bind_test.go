package pump_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// scratch writes the message's scratch row in ①.
func scratch(ctx context.Context, tx pgx.Tx, in pump.Input) error {
	_, err := tx.Exec(ctx, `INSERT INTO scratch VALUES ($1)`, in.MsgID)
	return err
}

// writeThen is a processor that writes its scratch row and then ends with end's error.
func writeThen(end error) procFunc {
	return func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
		if err := scratch(ctx, tx, in); err != nil {
			return pump.Result{}, err
		}
		return pump.Result{}, end
	}
}

// TestBindingGoesAheadOfTheBusinessTransaction guards R-TX-10 and R-TX-2: on the business path
// the identity binding rides in ①'s first round trip but commits on its own, so it stands
// whatever ① does, and a binding that finds the identity held elsewhere decides the message
// (SKIPPED duplicate-of, uncharged) with nothing of ① left behind, applied_at included,
// whatever the processor did: decided without a statement, succeeded without one (its
// applied_at goes with the COMMIT), or went on writing past the refusal; and a well-behaved
// duplicate leaves pgx's statement cache as it was.
func TestBindingGoesAheadOfTheBusinessTransaction(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		proc  procFunc
		state queue.State
		class queue.ErrorClass
		// scratch: whether the original's ① write stands
		scratch bool
	}{
		{"committed", writeThen(nil), queue.Succeeded, "", true},
		{"fails after a write", writeThen(errBoom), queue.Failed, queue.Infra, false},
		{"rejects after a write", writeThen(pump.Reject("no")), queue.Dead, queue.Protocol, false},
		{"skips without a statement", func(context.Context, pgx.Tx, pump.Input) (pump.Result, error) {
			return pump.Result{}, pump.Skip("nothing to do")
		}, queue.Skipped, "", false},
		{"succeeds without a statement", func(context.Context, pgx.Tx, pump.Input) (pump.Result, error) {
			return pump.Result{}, nil
		}, queue.Succeeded, "", false},
		{"writes on past an error", func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
			_, _ = tx.Exec(ctx, `SELECT 1`) // the first statement: a duplicate's refusal, ignored
			_ = scratch(ctx, tx, in)
			return pump.Result{}, nil
		}, queue.Succeeded, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.pg.Exec(t, `CREATE TABLE scratch (msg_id bigint)`)
			trips := pgtest.NewRoundTrips()
			s := e.tracedSession(t, trips)
			proc := writeThen(nil) // pgx prepares each new statement once: a first message warms them
			p := e.newPump(t, options{route: func(*sis.Message) (pump.Processor, string) { return proc, "" }})
			e.add(t, e.remark("2002", "WARM"))
			tick(t, p, s)
			proc = tc.proc
			text := e.remark("2001", "SAME")
			original := e.add(t, text)
			duplicate := e.add(t, text)

			trips.Reset()
			tick(t, p, s)
			o := e.get(t, original)
			wantState(t, o, tc.state, tc.class)
			if o.IdentityKey == nil || o.MsgType == nil || *o.MsgType != "FLOP" {
				t.Errorf("original's binding did not stand: identity %v type %v", o.IdentityKey, o.MsgType)
			}
			if tc.name == "committed" {
				// head, [binding + BEGIN + lock + ①'s first statement], [① + COMMIT], ③
				if n, _ := trips.Counts(); n != 4 {
					t.Errorf("%d round trips for a business success, want 4:\n%s", n, strings.Join(trips.Waited(10), "\n"))
				}
			}
			if got := e.count(t, `SELECT count(*) FROM scratch WHERE msg_id = $1`, original); (got == 1) != tc.scratch {
				t.Errorf("original's ① write: %d rows, want it to stand: %v", got, tc.scratch)
			}
			if tc.state == queue.Failed {
				return // the original keeps the head; its duplicate waits behind it
			}

			tick(t, p, s)
			wantDuplicate(t, e, s, duplicate, original)

			// A duplicate costs the next message nothing: no statement was dropped from pgx's
			// cache by an error, so nothing is prepared again.
			proc = writeThen(nil)
			next := e.add(t, e.remark("2003", "NEXT"))
			trips.Reset()
			tick(t, p, s)
			wantState(t, e.get(t, next), queue.Succeeded, "")
			if n, _ := trips.Counts(); n != 4 {
				t.Errorf("%d round trips for the business success after the duplicate, want 4:\n%s", n,
					strings.Join(trips.Waited(10), "\n"))
			}
		})
	}
}

// A processor that panics for a message its binding decided does not make the decision a
// failure (R-TX-10): the message is SKIPPED duplicate-of, uncharged, as when the binding ran
// before the processor.
func TestPanicAfterTheBindingDecidedIsNoFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pg.Exec(t, `CREATE TABLE scratch (msg_id bigint)`)
	s := e.session(t)
	var duplicate int64
	for _, first := range []bool{true, false} {
		t.Run(map[bool]string{true: "before any statement", false: "after a statement"}[first], func(t *testing.T) {
			p := e.newPump(t, options{route: func(*sis.Message) (pump.Processor, string) {
				return procFunc(func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
					if in.MsgID == duplicate {
						if !first {
							_ = scratch(ctx, tx, in) // the binding's refusal
						}
						panic("processor bug")
					}
					return pump.Result{}, scratch(ctx, tx, in)
				}), ""
			}})
			text := e.remark("2001", "PANIC "+t.Name())
			original := e.add(t, text)
			duplicate = e.add(t, text)
			tick(t, p, s)
			wantState(t, e.get(t, original), queue.Succeeded, "")
			tick(t, p, s)
			wantDuplicate(t, e, s, duplicate, original)
		})
	}
}

// wantDuplicate checks that duplicate ended SKIPPED duplicate-of original, uncharged, with
// nothing of its ① left and the pipeline lock released.
func wantDuplicate(t *testing.T, e *env, s *pgtest.Session, duplicate, original int64) {
	t.Helper()
	d := e.get(t, duplicate)
	wantState(t, d, queue.Skipped, "")
	if want := "duplicate-of:" + itoa(original); deref(d.LastError) != want {
		t.Errorf("duplicate's reason %q, want %q", deref(d.LastError), want)
	}
	if d.Attempts != 0 {
		t.Errorf("the duplicate was charged %d attempts", d.Attempts)
	}
	if d.AppliedAt != nil {
		t.Errorf("the duplicate's ① committed (applied_at %v)", d.AppliedAt)
	}
	if got := e.count(t, `SELECT count(*) FROM scratch WHERE msg_id = $1`, duplicate); got != 0 {
		t.Errorf("the duplicate's ① left %d rows", got)
	}
	if locked := e.count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`, s.PID()); locked != 0 {
		t.Errorf("%d advisory locks left after the duplicate", locked)
	}
}

// A PostgreSQL outage in the round trip that carries the binding is not the message's failure
// (R-TX-10, R-PUMP-8): the lock connection is cut just before it, and the message stays the
// head, PENDING and uncharged, with nothing of its binding or its ① written.
func TestOutageInTheBindingsRoundTripChargesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pg.Exec(t, `CREATE TABLE scratch (msg_id bigint)`)
	s := e.session(t)
	p := e.newPump(t, options{route: func(*sis.Message) (pump.Processor, string) {
		return procFunc(func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
			// Nothing was sent yet: the binding goes with this first statement.
			e.pg.Exec(t, `SELECT pg_terminate_backend($1)`, s.PID())
			return pump.Result{}, scratch(ctx, tx, in)
		}), ""
	}})
	id := e.add(t, e.remark("2001", "CUT"))
	if _, err := p.Tick(t.Context(), s); err != nil {
		t.Logf("tick: %v", err)
	}
	m := e.get(t, id)
	wantState(t, m, queue.Pending, "")
	if m.Attempts != 0 {
		t.Errorf("the message was charged %d attempts for the outage", m.Attempts)
	}
	if m.IdentityKey != nil || m.AppliedAt != nil {
		t.Errorf("written in the cut round trip: identity %v applied_at %v", m.IdentityKey, m.AppliedAt)
	}
	if got := e.count(t, `SELECT count(*) FROM scratch`); got != 0 {
		t.Errorf("① left %d rows", got)
	}
}
