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
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
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

// Inbox is what the handlers read of the shared MySQL inbox (aodb.Inbox, each call bounded
// by inbox.timeout).
type Inbox interface {
	RawPart(ctx context.Context, id, offset, limit int64) (string, int64, error)
	MinID(ctx context.Context) (int64, error)
	MaxID(ctx context.Context) (int64, error)
	IDsBetween(ctx context.Context, first, last int64) ([]int64, error)
	MarkStates(ctx context.Context, after, through int64, limit int) ([]aodb.MarkState, error)
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
	// Caller names who made a call (the token by its role, the client certificate's
	// subject), for the rows that keep it (projection_rebuild.requested_by); "unknown" when nil.
	Caller func(ctx context.Context) string
	// ReadTimeout bounds every read statement in PostgreSQL (statement_timeout), so a slow
	// read from a dashboard cannot pile up on the database (control.read-timeout).
	ReadTimeout time.Duration
	// PoolWait bounds how long a read waits for a free pool connection (control.pool-wait):
	// past it the call is UNAVAILABLE at once instead of queueing behind slow reads until its
	// deadline.
	PoolWait time.Duration
	// MaxReads bounds the reads in flight. Kept below the pool's size, it leaves connections
	// for the readiness check and the writes however many slow reads pile up, so /readyz
	// stays true to the database rather than to a busy pool.
	MaxReads int
	// MaxBodyChars bounds the message text one response carries (control.max-body-chars):
	// GetMessage truncates longer text, GetMessageBody returns a chunk of at most this many
	// characters.
	MaxBodyChars int
	// PageBytes bounds a page of a list or history answer, and GetMessage's flight changes and
	// events together (control.page-bytes, between config.MinControlPageBytes and
	// config.MaxControlPageBytes; its default is the registry's).
	PageBytes int
	// Projection reads what Redis holds for a flight (GetFlight). Optional: without it GetFlight
	// reports Redis as not read.
	Projection Projection
	// TraceURL is tracing.ui-url: a trace's link with config.TraceIDPlaceholder; empty for none.
	TraceURL string
	// Requests bounds what callers of RequestSchedule and RequestReference register (R-REQ-6).
	Requests RequestLimits
}

// Projection is what GetFlight reads of the Redis projection (projection.Projection).
type Projection interface {
	Observe(ctx context.Context, flids []string) ([]projection.Observed, error)
}

// Service is the ControlService implementation.
type Service struct {
	controlv1.UnimplementedControlServiceServer
	cfg     Config
	reads   chan struct{}
	callers *callerLimits
}

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil || cfg.Clock == nil || cfg.Elector == nil || cfg.Writer == nil || cfg.Inbox == nil {
		return nil, errors.New("control: DB, Clock, Elector, Writer and Inbox are required")
	}
	// Every bound comes from pkg/config's registry (app.New): a zero one is a wiring mistake,
	// which would refuse every read or none.
	if cfg.ReadTimeout <= 0 || cfg.PoolWait <= 0 || cfg.MaxReads <= 0 || cfg.MaxBodyChars <= 0 ||
		cfg.Requests.PerMinute <= 0 || cfg.Requests.Burst <= 0 || cfg.Requests.MaxOpen <= 0 || cfg.Requests.DayWindow <= 0 {
		return nil, errors.New("control: ReadTimeout, PoolWait, MaxReads, MaxBodyChars and every request limit must be positive")
	}
	if cfg.PageBytes < config.MinControlPageBytes || cfg.PageBytes > config.MaxControlPageBytes {
		return nil, fmt.Errorf("control: PageBytes %d is outside %d to %d (control.page-bytes)",
			cfg.PageBytes, config.MinControlPageBytes, config.MaxControlPageBytes)
	}
	return &Service{cfg: cfg, reads: make(chan struct{}, cfg.MaxReads), callers: newCallerLimits(cfg.Requests)}, nil
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
		ByState:        stateCounts(qs.ByState, qs.Estimated),
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
		changes = changes[:0]
		// The rows past the page's bytes come without their changes: each is answered as a
		// summary, and only those read whole are held.
		err = flightstore.EachChangeOf(ctx, tx, req.GetMsgId(), controlv1.MaxFlightHistoryPage, s.rowBound(), func(c flightstore.Change) error {
			changes = append(changes, c)
			return nil
		})
		if err != nil {
			return err
		}
		events, err = outbox.ByMessageCut(ctx, tx, req.GetMsgId(), valueCap(s.cfg.PageBytes))
		return err
	})
	if err != nil {
		return nil, toStatus(ctx, "get message", err)
	}
	resp := &controlv1.GetMessageResponse{Message: message(m), Timeline: timeline(m, events, changes), Attempts: attempts(m, hist)}
	s.fitMessage(resp, m, changes, events)
	resp.TraceId, resp.TraceUrl = traceLink(m.Trace.Parent, s.cfg.TraceURL)
	b, err := s.body(ctx, req.GetMsgId(), 0, int64(s.cfg.MaxBodyChars))
	switch {
	case err == nil:
		resp.RawXml, resp.RawStatus, resp.RawSource = b.text, controlv1.RawStatus_RAW_STATUS_OK, b.source
		resp.BodyChars = b.chars
		resp.BodyTruncated = int64(utf8.RuneCountInString(b.text)) < b.chars
	case errors.Is(err, errPoolBusy):
		return nil, toStatus(ctx, "get message", err)
	case errors.Is(err, aodb.ErrRowMissing):
		resp.RawStatus, resp.RawError = controlv1.RawStatus_RAW_STATUS_MISSING, err.Error()
	default:
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		resp.RawStatus, resp.RawError = controlv1.RawStatus_RAW_STATUS_UNAVAILABLE, err.Error()
	}
	return resp, nil
}

// fitMessage sets a GetMessage answer's flight changes and events within one page of
// control.page-bytes (the raw text has its own bound, control.max-body-chars): every flight the
// message wrote is listed, those past the page without their changes (changes_omitted), and
// the events past it are left out; flight_changes_truncated says either happened.
func (s *Service) fitMessage(resp *controlv1.GetMessageResponse, m queue.Message, changes []flightstore.Change, events []outbox.Row) {
	// The answer's other fields (the record, its timeline and attempts) count too; the raw text
	// has its own bound.
	fill := pageFill{limit: s.cfg.PageBytes, used: proto.Size(resp)}
	for _, c := range changes {
		e := historyEntry(c, &m, s.cfg.PageBytes)
		if !c.Omitted && !fill.add(e) {
			c.Changes, c.Superseded, c.Omitted = nil, nil, true
			e = historyEntry(c, &m, s.cfg.PageBytes)
		}
		if c.Omitted {
			// A summary is a few dozen bytes; at most MaxFlightHistoryPage of them.
			fill.add(e)
			resp.FlightChangesTruncated = true
		}
		resp.FlightChanges = append(resp.FlightChanges, e)
	}
	resp.EventsTotal = int64(len(events))
	for _, e := range eventList(events, valueCap(s.cfg.PageBytes)) {
		if !fill.add(e) {
			resp.FlightChangesTruncated = true
			break
		}
		resp.Events = append(resp.Events, e)
	}
}

// GetMessageBody implements ControlService.GetMessageBody: a bounded chunk of a message's
// text, from the inbox or, when the inbox row is gone or cannot be read, the kept text.
func (s *Service) GetMessageBody(ctx context.Context, req *controlv1.GetMessageBodyRequest) (*controlv1.GetMessageBodyResponse, error) {
	limit := req.GetLimit()
	if limit <= 0 || limit > int64(s.cfg.MaxBodyChars) {
		limit = int64(s.cfg.MaxBodyChars)
	}
	b, err := s.body(ctx, req.GetMsgId(), req.GetOffset(), limit)
	switch {
	case err == nil:
	case errors.Is(err, errPoolBusy):
		return nil, toStatus(ctx, "get message body", err)
	case errors.Is(err, aodb.ErrRowMissing):
		return nil, status.Errorf(codes.NotFound, "message %d: no text in the inbox and none kept: %v", req.GetMsgId(), err)
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	default:
		return nil, status.Errorf(codes.Unavailable, "message %d: inbox unavailable and no text kept: %v", req.GetMsgId(), err)
	}
	if req.GetOffset() > b.chars {
		return nil, status.Errorf(codes.OutOfRange, "offset %d is past the end of the text (%d characters)", req.GetOffset(), b.chars)
	}
	next := req.GetOffset() + int64(utf8.RuneCountInString(b.text))
	return &controlv1.GetMessageBodyResponse{Text: b.text, Offset: req.GetOffset(), NextOffset: next,
		BodyChars: b.chars, Eof: next >= b.chars, RawSource: b.source}, nil
}

// bodyPart is a part of a message's text, the length of the whole text and where it came
// from ("inbox" or "kept").
type bodyPart struct {
	text   string
	chars  int64
	source string
}

// body reads limit characters at most of a message's text from offset: from the inbox, which
// cuts the text itself, or, when the inbox row is purged or the inbox is down, from the text
// the pump kept. The inbox read takes a slot of the reads in flight like every read, so
// parallel readers of large rows are bounded like any other read. The error is the inbox's
// when neither source has the text; errPoolBusy when no slot was free.
func (s *Service) body(ctx context.Context, id, offset, limit int64) (bodyPart, error) {
	wait, cancel := context.WithTimeout(ctx, s.cfg.PoolWait)
	release, err := s.slot(ctx, wait)
	cancel()
	if err != nil {
		return bodyPart{}, err
	}
	text, chars, err := s.cfg.Inbox.RawPart(ctx, id, offset, limit)
	release()
	if err == nil {
		return bodyPart{text: text, chars: chars, source: "inbox"}, nil
	}
	var kept bodyPart
	if kerr := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		kept.text, kept.chars, err = queue.StoredRawPart(ctx, tx, id, offset, limit)
		return err
	}); kerr != nil {
		if errors.Is(kerr, errPoolBusy) {
			return bodyPart{}, kerr
		}
		return bodyPart{}, err
	}
	kept.source = "kept"
	return kept, nil
}

// errPoolBusy is a read that found no free pool connection within PoolWait.
var errPoolBusy = errors.New("no free database connection")

// reader is the Service's read transaction (read) as a db.Txer, so that a read returning one
// value is db.TxV(ctx, reader{s}, …).
type reader struct{ s *Service }

// Tx implements db.Txer with read.
func (r reader) Tx(ctx context.Context, fn func(tx pgx.Tx) error) error { return r.s.read(ctx, fn) }

// read runs fn in a read-only REPEATABLE READ transaction bounded by ReadTimeout; every read
// of the API goes through it. Waiting for the pool connection is bounded by PoolWait (the
// context of BeginTx covers the acquisition and the BEGIN only, not the transaction).
func (s *Service) read(ctx context.Context, fn func(tx pgx.Tx) error) error {
	bctx, cancel := context.WithTimeout(ctx, s.cfg.PoolWait)
	release, err := s.slot(ctx, bctx)
	if err != nil {
		cancel()
		return err
	}
	defer release()
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

// slot takes one of the MaxReads slots of the reads in flight, waiting until wait (ctx bounded
// by PoolWait) ends at most; errPoolBusy past it. The caller releases it.
func (s *Service) slot(ctx, wait context.Context) (func(), error) {
	select {
	case s.reads <- struct{}{}:
		return func() { <-s.reads }, nil
	case <-wait.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("begin read: %w within %s: %d reads in flight", errPoolBusy, s.cfg.PoolWait, s.cfg.MaxReads)
	}
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
