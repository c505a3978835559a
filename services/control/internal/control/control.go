// Package control implements msgx.control.v1.ControlService. Handlers stay thin: they read
// through the same pkg stores the workers write with (cursor, queue, outbox, leader) and only
// translate between those and the API.
package control

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
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// Roles returns the roles of the system, each with its advisory lock (DECISIONS 7), in pipeline
// order. GetStatus lists every one of them, held or not, so a role nobody started is visible.
func Roles() []string { return []string{"ingest", "pump", "dispatcher", "backfill", "control"} }

// DB is what the handlers need of PostgreSQL: a pool in production.
type DB interface {
	db.Executor
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Elector is the part of the control role's leader.Elector the handlers read.
type Elector interface {
	Active() bool
}

// Config configures a Service.
type Config struct {
	DB       DB
	Clock    clock.Clock
	Instance string
	Elector  Elector
	// ReadTimeout bounds one status read in PostgreSQL (statement_timeout), so a slow status
	// query from a dashboard cannot pile up on the database. Default 10s.
	ReadTimeout time.Duration
}

// Service is the ControlService implementation.
type Service struct {
	controlv1.UnimplementedControlServiceServer
	cfg Config
}

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil || cfg.Clock == nil || cfg.Elector == nil {
		return nil, errors.New("control: DB, Clock and Elector are required")
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 10 * time.Second
	}
	return &Service{cfg: cfg}, nil
}

// GetStatus implements ControlService.GetStatus.
func (s *Service) GetStatus(ctx context.Context, _ *controlv1.GetStatusRequest) (*controlv1.GetStatusResponse, error) {
	now := s.cfg.Clock.Now()
	// Read before the snapshot is taken: the elector records its term in role_holder before it
	// reports Active, so "active" here implies the snapshot shows this instance's term.
	active := s.cfg.Elector.Active()
	var (
		cur     cursor.Cursor
		holes   cursor.HoleStats
		qs      queue.Statistics
		targets map[string]outbox.TargetStats
		holders []leader.Holder
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
		if qs, err = queue.Stats(ctx, tx, now); err != nil {
			return err
		}
		if targets, err = outbox.Stats(ctx, tx, now); err != nil {
			return err
		}
		holders, err = leader.Holders(ctx, tx)
		return err
	})
	if err != nil {
		return nil, toStatus(ctx, "get status", err)
	}
	return &controlv1.GetStatusResponse{
		ObservedAt:     timestamp(now),
		ServedBy:       s.cfg.Instance,
		ServedByActive: active,
		Roles:          roleStatus(holders),
		Discovery:      discovery(cur, holes, now),
		Backlog:        backlog(qs),
		ByState:        stateCounts(qs.ByState),
		ByErrorClass:   errorClassCounts(qs.ByErrorClass),
		Backfill:       backfill(qs),
		Outbox:         outboxTargets(targets),
	}, nil
}

// GetMessage implements ControlService.GetMessage.
func (s *Service) GetMessage(ctx context.Context, req *controlv1.GetMessageRequest) (*controlv1.GetMessageResponse, error) {
	if req.GetMsgId() <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "msg_id must be a positive inbox ID, got %d", req.GetMsgId())
	}
	m, err := queue.Get(ctx, s.cfg.DB, req.GetMsgId())
	if err != nil {
		return nil, toStatus(ctx, "get message", err)
	}
	return &controlv1.GetMessageResponse{Message: message(m)}, nil
}

// read runs fn in a read-only REPEATABLE READ transaction bounded by ReadTimeout.
func (s *Service) read(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.cfg.DB.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
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
// row; the caller's own cancellation or deadline as such; UNAVAILABLE (the one code clients
// retry, STYLE §11) when PostgreSQL cannot be reached or cancelled the statement on its
// timeout; INTERNAL otherwise, with the cause for the operator.
func toStatus(ctx context.Context, op string, err error) error {
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	switch {
	case errors.Is(err, db.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.As(err, &connErr), pgconn.SafeToRetry(err):
		return status.Errorf(codes.Unavailable, "%s: database unavailable: %v", op, err)
	case errors.As(err, &pgErr) && pgErr.Code == "57014": // query_canceled: statement_timeout
		return status.Errorf(codes.Unavailable, "%s: database too slow (statement timeout): %v", op, err)
	default:
		return status.Errorf(codes.Internal, "%s: %v", op, err)
	}
}
