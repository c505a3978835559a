package pump_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
)

// panicRaw is an inbox whose read panics.
type panicRaw struct{ pump.RawReader }

func (panicRaw) Raw(context.Context, int64) (string, error) { panic("inbox bug") }

// panicProjector is a Redis projection whose write panics.
type panicProjector struct{ pump.Projector }

func (panicProjector) Write(context.Context, []flight.Projected) (int, error) {
	panic("projection bug")
}

// panicReprojector applies without a change and panics when asked to re-project.
type panicReprojector struct{ procFunc }

func (panicReprojector) Reproject(context.Context, pgx.Tx, pump.Input) ([]flight.Flight, error) {
	panic("reprojector bug")
}

// A panic anywhere in an attempt's steps, before the pipeline lock or under it, ends in the
// attempt's one recover (R-PUMP-6): the message is FAILED(INFRA) with the panic as its reason
// and one attempt counted, and neither a transaction nor the pipeline lock is left behind.
func TestPanicInAnyStepIsARecordedFailure(t *testing.T) {
	t.Parallel()
	nothing := procFunc(func(context.Context, pgx.Tx, pump.Input) (pump.Result, error) { return pump.Result{}, nil })
	for _, tc := range []struct {
		name string
		opts func(e *env) options
		// applied marks the message as applied before the run, so it only re-projects; and
		// wantApplied is whether applied_at is set after it.
		applied, wantApplied bool
		reason               string
	}{
		{name: "inbox read", reason: "panic: inbox bug", opts: func(e *env) options {
			return options{raw: panicRaw{}, route: routeTo{nothing}.route}
		}},
		{name: "business transaction", reason: "panic: processor bug", opts: func(e *env) options {
			return options{route: routeTo{procFunc(func(ctx context.Context, tx pgx.Tx, in pump.Input) (pump.Result, error) {
				if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
					return pump.Result{}, err
				}
				panic("processor bug")
			})}.route}
		}},
		{name: "further step", reason: "panic: step bug", opts: func(e *env) options {
			return options{route: routeTo{procFunc(func(context.Context, pgx.Tx, pump.Input) (pump.Result, error) {
				return pump.Result{Then: []pump.Step{func(context.Context, pgx.Tx) ([]flight.Projected, error) {
					panic("step bug")
				}}}, nil
			})}.route}
		}},
		{name: "projection", reason: "panic: projection bug", wantApplied: true, opts: func(e *env) options {
			return options{proj: panicProjector{e.proj}, route: routeTo{procFunc(func(context.Context, pgx.Tx, pump.Input) (pump.Result, error) {
				return pump.Result{Project: []flight.Projected{{}}}, nil
			})}.route}
		}},
		{name: "re-projection", reason: "panic: reprojector bug", applied: true, wantApplied: true, opts: func(e *env) options {
			r := panicReprojector{nothing}
			return options{route: func(*sis.Message) (pump.Processor, string) { return r, "" }}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := e.session(t)
			p := e.newPump(t, tc.opts(e))
			id := e.add(t, e.remark("3001", "PANIC"))
			if tc.applied {
				e.pg.Exec(t, `UPDATE proc_state SET applied_at = now() WHERE msg_id = $1`, id)
			}
			tick(t, p, s)
			m := e.get(t, id)
			wantState(t, m, queue.Failed, queue.Infra)
			if !strings.Contains(deref(m.LastError), tc.reason) || m.Attempts != 1 {
				t.Errorf("last error %q attempts %d, want %q and 1 attempt", deref(m.LastError), m.Attempts, tc.reason)
			}
			if (m.AppliedAt != nil) != tc.wantApplied {
				t.Errorf("applied_at %v, want it set: %v", m.AppliedAt, tc.wantApplied)
			}
			if !e.pipelineLockFree(t) {
				t.Error("the pipeline lock is still held after the panic")
			}
			var inTx bool
			if err := s.Do(t.Context(), func(conn *pgx.Conn) error {
				inTx = conn.PgConn().TxStatus() != 'I'
				return nil
			}); err != nil || inTx {
				t.Errorf("session after the panic: err %v, in a transaction %v", err, inTx)
			}
		})
	}
}

// The pump recovers a panic in one place only, processOne, so a panic's outcome is decided
// there with everything the attempt knew (the binding's decision, R-TX-10), not by a layer
// that sees part of it.
func TestPanicIsRecoveredOnlyInProcessOne(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var where []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "recover" {
						where = append(where, fn.Name.Name+" ("+fset.Position(call.Pos()).String()+")")
					}
				}
				return true
			})
		}
	}
	if len(where) != 1 || !strings.HasPrefix(where[0], "processOne ") {
		t.Errorf("recover called in %v, want once, in processOne", where)
	}
}
