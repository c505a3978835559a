// Package api implements msgx.control.v1.ControlService. Handlers stay thin: they read
// and write through the same pkg stores the workers use (cursor, queue, outbox, leader, inbox)
// and only translate between those and the API. Reads go to the pool; mutating calls run on
// the control role's lock connection (Term), so only the active instance can commit them.
package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/inbox"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/request"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// DB is what the handlers need of PostgreSQL: a pool in production.
type DB interface {
	db.Executor
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Elector tells whether this instance holds the control role (Term in production: whether it
// can serve mutating calls now).
type Elector interface {
	Active() bool
}

// Writer runs fenced writes: a transaction on the control role's lock connection, or
// ErrStandby when this instance does not hold the role (Term in production).
type Writer interface {
	Tx(ctx context.Context, fn func(tx pgx.Tx) error) error
}

// Inbox is what the handlers read of the shared MySQL inbox (inbox.Inbox, each call bounded
// by inbox.timeout).
type Inbox interface {
	Raw(ctx context.Context, id int64) (string, error)
	MinID(ctx context.Context) (int64, error)
	MaxID(ctx context.Context) (int64, error)
	IDsBetween(ctx context.Context, first, last int64) ([]int64, error)
	MarkStates(ctx context.Context, after, through int64, limit int) ([]inbox.MarkState, error)
	FirstMarkedSince(ctx context.Context, after, through int64, since time.Time) (id int64, at time.Time, found bool, err error)
}

// Config configures a Service.
type Config struct {
	DB       DB
	Clock    clock.Clock
	Instance string
	Elector  Elector
	Writer   Writer
	Inbox    Inbox
	// Outbound is how registered requests are encoded and addressed (outbound.sndr, the
	// airport zone, outbound.routing-id).
	Outbound request.Outbound
	// WriteTimeout bounds each statement of a mutating call (statement_timeout; lock waits get
	// less). It stays well under the lock connection's lease (10 s) so a slow write cannot
	// cost the control role. Default 5s.
	WriteTimeout time.Duration
	// Caller names who made a call (the token by its role, the client certificate's
	// subject), for the rows that keep it (projection_rebuild.requested_by); "unknown" when nil.
	Caller func(ctx context.Context) string
	// ReadTimeout bounds every read statement in PostgreSQL (statement_timeout), so a slow
	// read from a dashboard cannot pile up on the database (control.read-timeout). Default 5s.
	ReadTimeout time.Duration
	// PoolWait bounds how long a read waits for a free pool connection (control.pool-wait):
	// past it the call is UNAVAILABLE at once instead of queueing behind slow reads until its
	// deadline. Default 2s.
	PoolWait time.Duration
	// MaxReads bounds the reads in flight. Kept below the pool's size, it leaves connections
	// for the readiness check and the writes however many slow reads pile up, so /readyz
	// stays true to the database rather than to a busy pool. Default 8.
	MaxReads int
	// Projection reads what Redis holds for a flight (GetFlight). Optional: without it GetFlight
	// reports Redis as not read.
	Projection Projection
	// TraceURL is tracing.ui-url: a trace's link with config.TraceIDPlaceholder; empty for none.
	TraceURL string
}

// Projection is what GetFlight reads of the Redis projection (projection.Projection).
type Projection interface {
	Observe(ctx context.Context, flids []string) ([]projection.Observed, error)
}

// Service is the ControlService implementation.
type Service struct {
	controlv1.UnimplementedControlServiceServer
	cfg   Config
	reads chan struct{}
}

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil || cfg.Clock == nil || cfg.Elector == nil || cfg.Writer == nil || cfg.Inbox == nil {
		return nil, errors.New("control: DB, Clock, Elector, Writer and Inbox are required")
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 5 * time.Second
	}
	if cfg.PoolWait <= 0 {
		cfg.PoolWait = 2 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.MaxReads <= 0 {
		cfg.MaxReads = 8
	}
	return &Service{cfg: cfg, reads: make(chan struct{}, cfg.MaxReads)}, nil
}

// GetStatus implements ControlService.GetStatus.
func (s *Service) GetStatus(ctx context.Context, _ *controlv1.GetStatusRequest) (*controlv1.GetStatusResponse, error) {
	now := s.cfg.Clock.Now()
	// Read before the snapshot is taken: the elector records its term in role_holder before it
	// reports Active, so "active" here implies the snapshot shows this instance's term.
	active := s.cfg.Elector.Active()
	// The inbox's largest ID comes from MySQL, read alongside the PostgreSQL snapshot; an
	// unreachable inbox leaves the lag unknown rather than failing the whole status.
	type maxID struct {
		id  int64
		err error
	}
	inboxMax := make(chan maxID, 1)
	go func() {
		id, err := s.cfg.Inbox.MaxID(ctx)
		inboxMax <- maxID{id, err}
	}()
	var (
		cur     cursor.Cursor
		holes   cursor.HoleStats
		qs      queue.Statistics
		targets map[string]outbox.TargetStats
		holders []leader.Holder
		disc    discoveryView
	)
	// One read-only REPEATABLE READ transaction: the watermark, the counts and the outbox come
	// from one snapshot, so (for example) unfinished rows never exceed what the states add up to.
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		if cur, err = cursor.Load(ctx, tx); err != nil {
			return err
		}
		if holes, err = cursor.Holes(ctx, tx); err != nil {
			return err
		}
		if disc, err = loadDiscoveryView(ctx, tx, cur.W); err != nil {
			return err
		}
		if qs, err = queue.Stats(ctx, tx, now); err != nil {
			return err
		}
		if targets, err = outbox.Stats(ctx, tx, now); err != nil {
			return err
		}
		holders, err = leader.Holders(ctx, tx)
		return err
	})
	im := <-inboxMax
	if err != nil {
		return nil, toStatus(ctx, "get status", err)
	}
	d := discovery(cur, holes, now)
	var inboxMaxID *int64
	if im.err == nil {
		inboxMaxID = &im.id
	}
	disc.fill(d, cur.W, inboxMaxID, now)
	if im.err != nil {
		d.InboxError = im.err.Error()
	} else {
		d.InboxMaxId = &im.id
		// Never clamped: a negative lag is the inbox behind W (a contract violation), which a
		// 0 would show as "caught up".
		lag := im.id - cur.W
		d.Lag = &lag
	}
	return &controlv1.GetStatusResponse{
		ObservedAt:     timestamp(now),
		ServedBy:       s.cfg.Instance,
		ServedByActive: active,
		Roles:          roleStatus(holders, now),
		Discovery:      d,
		Backlog:        backlogWithDiscovery(qs, d, disc.lastDue, now),
		ByState:        stateCounts(qs.ByState),
		ByErrorClass:   errorClassCounts(qs.ByErrorClass),
		Backfill:       backfill(qs),
		Outbox:         outboxTargets(targets),
	}, nil
}

// GetMessage implements ControlService.GetMessage: the processing record and its events from
// one PostgreSQL snapshot, then the raw text from the inbox. A failing inbox read does not fail
// the call: the record is what an operator needs first, and raw_status says what went wrong.
func (s *Service) GetMessage(ctx context.Context, req *controlv1.GetMessageRequest) (*controlv1.GetMessageResponse, error) {
	var (
		m       queue.Message
		events  []outbox.Row
		hist    []queue.Attempt
		changes []flightstore.Change
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		if m, err = queue.Get(ctx, tx, req.GetMsgId()); err != nil {
			return err
		}
		if hist, err = queue.Attempts(ctx, tx, req.GetMsgId()); err != nil {
			return err
		}
		if changes, err = flightstore.ChangesOf(ctx, tx, req.GetMsgId(), controlv1.MaxFlightHistoryPage); err != nil {
			return err
		}
		events, err = outbox.ByMessage(ctx, tx, req.GetMsgId())
		return err
	})
	if err != nil {
		return nil, toStatus(ctx, "get message", err)
	}
	resp := &controlv1.GetMessageResponse{Message: message(m), Events: eventList(events),
		Timeline: timeline(m, events, changes), Attempts: attempts(m, hist)}
	for _, c := range changes {
		resp.FlightChanges = append(resp.FlightChanges, historyEntry(c, &m))
	}
	resp.TraceId, resp.TraceUrl = traceLink(str(m.TraceParent), s.cfg.TraceURL)
	raw, err := s.cfg.Inbox.Raw(ctx, req.GetMsgId())
	if err == nil {
		resp.RawXml, resp.RawStatus, resp.RawSource = raw, controlv1.RawStatus_RAW_STATUS_OK, "inbox"
		return resp, nil
	}
	// The text the pump kept answers when the inbox row is purged or the inbox is down.
	var kept string
	if kerr := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		kept, err = queue.StoredRaw(ctx, tx, req.GetMsgId())
		return err
	}); kerr == nil {
		resp.RawXml, resp.RawStatus, resp.RawSource = kept, controlv1.RawStatus_RAW_STATUS_OK, "kept"
		return resp, nil
	}
	switch {
	case errors.Is(err, inbox.ErrRowMissing):
		resp.RawStatus, resp.RawError = controlv1.RawStatus_RAW_STATUS_MISSING, err.Error()
	default:
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		resp.RawStatus, resp.RawError = controlv1.RawStatus_RAW_STATUS_UNAVAILABLE, err.Error()
	}
	return resp, nil
}

// errPoolBusy is a read that found no free pool connection within PoolWait.
var errPoolBusy = errors.New("no free database connection")

// read runs fn in a read-only REPEATABLE READ transaction bounded by ReadTimeout; every read
// of the API goes through it. Waiting for the pool connection is bounded by PoolWait (the
// context of BeginTx covers the acquisition and the BEGIN only, not the transaction).
func (s *Service) read(ctx context.Context, fn func(tx pgx.Tx) error) error {
	bctx, cancel := context.WithTimeout(ctx, s.cfg.PoolWait)
	select {
	case s.reads <- struct{}{}:
		defer func() { <-s.reads }()
	case <-bctx.Done():
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("begin read: %w within %s: %d reads in flight", errPoolBusy, s.cfg.PoolWait, s.cfg.MaxReads)
	}
	tx, err := s.cfg.DB.BeginTx(bctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	waited := bctx.Err() != nil && ctx.Err() == nil
	cancel()
	if err != nil {
		if waited {
			return fmt.Errorf("begin read: %w within %s: %w", errPoolBusy, s.cfg.PoolWait, err)
		}
		return fmt.Errorf("begin read: %w", err)
	}
	// Read-only: rolling back loses nothing, and it runs even when ctx is already cancelled.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", s.cfg.ReadTimeout.Milliseconds())); err != nil {
		return fmt.Errorf("set statement timeout: %w", err)
	}
	return fn(tx)
}

// toStatus maps a store error to the gRPC status a client can act on: NOT_FOUND for a missing
// row; the caller's own cancellation or deadline as such; UNAVAILABLE (the code clients
// retry, docs/control.md) when PostgreSQL cannot be reached or cancelled the statement on its
// timeout; INTERNAL otherwise, with the cause for the operator.
func toStatus(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(err, db.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, errPoolBusy):
		return status.Errorf(codes.Unavailable, "%s: database busy: %v", op, err)
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case db.IsConnectionError(err), pgconn.SafeToRetry(err):
		return status.Errorf(codes.Unavailable, "%s: database unavailable: %v", op, err)
	case db.IsStatementTimeout(err):
		return status.Errorf(codes.Unavailable, "%s: database too slow (statement timeout): %v", op, err)
	default:
		return status.Errorf(codes.Internal, "%s: %v", op, err)
	}
}
