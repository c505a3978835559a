package request

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// ErrNotPending is returned by MarkSent when the request is no longer PENDING (a newer
// registration expired it meanwhile): its COUTMSGS row stays written, the request stays
// EXPIRED.
var ErrNotPending = errors.New("request: not pending")

// ErrNotOpen is returned by Done when the request is not SENT (expired, or closed already).
var ErrNotOpen = errors.New("request: not open")

// ErrOpenConflict is returned by Register when another transaction registered an open request
// of the same type and scope at the same time: repeat the call.
var ErrOpenConflict = errors.New("request: another open request of the same type and scope was registered concurrently")

// Request is one req_track row.
type Request struct {
	ID    int64
	Type  string
	STYP  string
	Scope string
	// RQFD: the days covered (dates at midnight UTC); nil for RQRD.
	From, To *time.Time
	RTYP     string
	State    string
	// SEQN is the sequence value; the message carries it modulo 1,000,000.
	SEQN        int64
	Sender      string
	RoutingID   string
	Payload     string
	CoutmsgsID  *int64
	AnswerMsgID *int64
	CreatedAt   time.Time
	AttemptedAt *time.Time
	SentAt      *time.Time
	DoneAt      *time.Time
	ExpiredAt   *time.Time
	UpdatedAt   time.Time
}

const columns = `req_id, req_type, req_styp, scope, from_day, to_day, coalesce(rtyp, ''), state, coalesce(seqn, 0),
	sndr, coalesce(routing_id, ''), coalesce(payload, ''), coutmsgs_id, answer_msg_id,
	created_at, attempted_at, sent_at, done_at, expired_at, updated_at`

func scan(row pgx.Row) (Request, error) {
	var r Request
	err := row.Scan(&r.ID, &r.Type, &r.STYP, &r.Scope, &r.From, &r.To, &r.RTYP, &r.State, &r.SEQN,
		&r.Sender, &r.RoutingID, &r.Payload, &r.CoutmsgsID, &r.AnswerMsgID,
		&r.CreatedAt, &r.AttemptedAt, &r.SentAt, &r.DoneAt, &r.ExpiredAt, &r.UpdatedAt)
	return r, err
}

func scanAll(rows pgx.Rows, err error) ([]Request, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Request
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Outbound is how a registered request is addressed and encoded.
type Outbound struct {
	// Encoder carries this system's SNDR (outbound.sndr) and the airport zone.
	Encoder sis.Encoder
	// RoutingID is COUTMSGS.ROUTINGID (outbound.routing-id).
	RoutingID string
}

// Registered is the result of Register.
type Registered struct {
	Request Request
	// Expired are the older open requests of the same type and scope that the registration
	// expired (at most one, by the open-request index).
	Expired []int64
}

// Register records a new PENDING request with its encoded XML (SEQN from req_track_seqn, DTTM
// now) and expires the older open request of the same type and scope. q must be a
// transaction, so that both happen or neither; the open-request index (migration 00013) makes
// a concurrent registration fail with ErrOpenConflict instead of leaving two open.
func Register(ctx context.Context, q db.Executor, spec Spec, out Outbound, now time.Time) (Registered, error) {
	if err := spec.Validate(); err != nil {
		return Registered{}, err
	}
	scope := spec.Scope()
	var res Registered
	rows, err := q.Query(ctx, `UPDATE req_track SET state = 'EXPIRED', expired_at = $3, updated_at = $3
		WHERE req_type = $1 AND scope = $2 AND state IN ('PENDING', 'SENT') RETURNING req_id`, spec.Type, scope, now)
	if err == nil {
		res.Expired, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		return Registered{}, fmt.Errorf("expire the open %s %s: %w", spec.Type, scope, err)
	}
	var seqn int64
	if err := q.QueryRow(ctx, `SELECT nextval('req_track_seqn')`).Scan(&seqn); err != nil {
		return Registered{}, fmt.Errorf("request seqn: %w", err)
	}
	var from, to, covered *time.Time
	if spec.Type == TypeRQFD {
		from, to, covered = &spec.From, &spec.To, &spec.From
	}
	payload := spec.Encode(out.Encoder, seqn, now)
	res.Request, err = scan(q.QueryRow(ctx, `INSERT INTO req_track (req_type, req_styp, covered_day, sndr, state, seqn,
			scope, from_day, to_day, rtyp, payload, routing_id, created_at, updated_at)
		VALUES ($1, $2, $3, $4, 'PENDING', $5, $6, $7, $8, nullif($9, ''), $10, $11, $12, $12)
		RETURNING `+columns,
		spec.Type, spec.styp(), covered, out.Encoder.Sender, seqn, scope, from, to, spec.RTYP, payload, out.RoutingID, now))
	if db.IsUniqueViolation(err) {
		return Registered{}, fmt.Errorf("register %s %s: %w: %w", spec.Type, scope, ErrOpenConflict, err)
	}
	if err != nil {
		return Registered{}, fmt.Errorf("register %s %s: %w", spec.Type, scope, err)
	}
	return res, nil
}

// PendingForSend returns up to limit PENDING requests in req_id order: the order the
// dispatcher writes them to COUTMSGS.
func PendingForSend(ctx context.Context, q db.Executor, limit int) ([]Request, error) {
	out, err := scanAll(q.Query(ctx, `SELECT `+columns+` FROM req_track WHERE state = 'PENDING' ORDER BY req_id LIMIT $1`, limit))
	if err != nil {
		return nil, fmt.Errorf("pending requests: %w", err)
	}
	return out, nil
}

// MarkAttempted records, before the COUTMSGS insert, that one is about to be tried: a later
// try of a request that carries it looks for the row first (FindOutbound), because the insert
// may have committed without the dispatcher learning it. The first try's time is kept, so the
// look-up covers every insert ever tried for the request.
func MarkAttempted(ctx context.Context, q db.Executor, id int64, now time.Time) error {
	tag, err := q.Exec(ctx, `UPDATE req_track SET attempted_at = coalesce(attempted_at, $2), updated_at = $2
		WHERE req_id = $1 AND state = 'PENDING'`, id, now)
	if err != nil {
		return fmt.Errorf("mark request %d attempted: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("mark request %d attempted: %w", id, ErrNotPending)
	}
	return nil
}

// MarkSent records that the request's COUTMSGS row (coutmsgsID) is committed. Only a PENDING
// request becomes SENT; any other state answers ErrNotPending and is left as it is.
func MarkSent(ctx context.Context, q db.Executor, id, coutmsgsID int64, now time.Time) error {
	tag, err := q.Exec(ctx, `UPDATE req_track SET state = 'SENT', coutmsgs_id = $2, sent_at = $3, updated_at = $3
		WHERE req_id = $1 AND state = 'PENDING'`, id, coutmsgsID, now)
	if err != nil {
		return fmt.Errorf("mark request %d sent: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("mark request %d sent: %w", id, ErrNotPending)
	}
	return nil
}

// Expire turns every SENT request sent timeout or longer before now into EXPIRED and returns
// their IDs. PENDING requests never expire: they wait for COUTMSGS, and an outage is not
// charged to them.
func Expire(ctx context.Context, q db.Executor, now time.Time, timeout time.Duration) ([]int64, error) {
	rows, err := q.Query(ctx, `UPDATE req_track SET state = 'EXPIRED', expired_at = $1, updated_at = $1
		WHERE state = 'SENT' AND sent_at <= $2 RETURNING req_id`, now, now.Add(-timeout))
	if err != nil {
		return nil, fmt.Errorf("expire requests: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("expire requests: %w", err)
	}
	return ids, nil
}

// Match is the result of MatchOpen: the request to close, or why there is none.
type Match struct {
	Request *Request
	Skip    string // one of the Skip* reasons when Request is nil
}

// MatchOpen finds the request an answer closes, in the RESP processor's transaction q: an
// open, SENT request of a.Type whose scope covers the answer (RQFD: its days include a.From..
// a.To; RQRD: the same scope), not older than timeout at now, and sent no later than the
// answer's DTTM plus ClockSkew. The open candidates are locked (FOR UPDATE) until q ends, so
// the dispatcher cannot expire the one chosen before Done closes it. Without a match, Skip
// says why (no-open-request, request-expired, older-than-request) and nothing may change.
func MatchOpen(ctx context.Context, q db.Executor, a Answer, now time.Time, timeout time.Duration) (Match, error) {
	var where string
	args := []any{a.Type}
	switch a.Type {
	case TypeRQFD:
		switch {
		case a.From.IsZero() && a.To.IsZero():
			// An empty RESP names no day of its own: it answers the request sent first,
			// whatever its range (its days then have no flight left).
			where = `true`
		case a.From.IsZero() || a.To.IsZero() || a.To.Before(a.From):
			return Match{}, fmt.Errorf("%w: an RQFD answer needs its days (from %v, to %v)", ErrInvalid, a.From, a.To)
		default:
			where = `from_day <= $2 AND to_day >= $3`
			args = append(args, day(a.From), day(a.To))
		}
	case TypeRQRD:
		where = `scope = $2`
		args = append(args, a.Scope)
	default:
		return Match{}, fmt.Errorf("%w: answer type %q is not RQFD or RQRD", ErrInvalid, a.Type)
	}
	open, err := scanAll(q.Query(ctx, `SELECT `+columns+` FROM req_track
		WHERE req_type = $1 AND `+where+` AND state IN ('PENDING', 'SENT')
		ORDER BY sent_at NULLS LAST, req_id FOR UPDATE`, args...))
	if err != nil {
		return Match{}, fmt.Errorf("match %s answer: %w", a.Type, err)
	}
	expired, err := scanAll(q.Query(ctx, `SELECT `+columns+` FROM req_track
		WHERE req_type = $1 AND `+where+` AND state = 'EXPIRED' AND sent_at IS NOT NULL
		ORDER BY sent_at DESC, req_id DESC LIMIT 1`, args...))
	if err != nil {
		return Match{}, fmt.Errorf("match %s answer: %w", a.Type, err)
	}
	var last *Request
	if len(expired) > 0 {
		last = &expired[0]
	}
	i, skip := decide(open, last, a, now, timeout)
	if i < 0 {
		return Match{Skip: skip}, nil
	}
	return Match{Request: &open[i]}, nil
}

// Done closes a SENT request with the inbox message that answered it, in the transaction that
// applied the answer (after MatchOpen chose it). A request that is not SENT answers ErrNotOpen.
func Done(ctx context.Context, q db.Executor, id, answerMsgID int64, now time.Time) error {
	tag, err := q.Exec(ctx, `UPDATE req_track SET state = 'DONE', answer_msg_id = $2, done_at = $3, updated_at = $3
		WHERE req_id = $1 AND state = 'SENT'`, id, answerMsgID, now)
	if err != nil {
		return fmt.Errorf("close request %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("close request %d: %w", id, ErrNotOpen)
	}
	return nil
}

// AnsweredBy returns the requests the inbox message msgID answered (closed DONE), in req_id
// order: the re-run of an applied RESP re-projects the days of its request.
func AnsweredBy(ctx context.Context, q db.Executor, msgID int64) ([]Request, error) {
	out, err := scanAll(q.Query(ctx, `SELECT `+columns+` FROM req_track WHERE answer_msg_id = $1 ORDER BY req_id`, msgID))
	if err != nil {
		return nil, fmt.Errorf("requests answered by %d: %w", msgID, err)
	}
	return out, nil
}

// Filter selects requests for List; empty fields select any.
type Filter struct {
	State string
	Type  string
	// After continues a listing after this req_id (keyset pagination).
	After int64
}

// List returns up to limit requests matching f in req_id order after f.After, so a page
// token is the last ID of the previous page.
func List(ctx context.Context, q db.Executor, f Filter, limit int) ([]Request, error) {
	var conds []string
	args := []any{limit}
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if f.State != "" {
		add("state = $%d", f.State)
	}
	if f.Type != "" {
		add("req_type = $%d", f.Type)
	}
	if f.After > 0 {
		add("req_id > $%d", f.After)
	}
	where := ""
	if len(conds) > 0 {
		where = "WHERE " + strings.Join(conds, " AND ")
	}
	out, err := scanAll(q.Query(ctx, `SELECT `+columns+` FROM req_track `+where+` ORDER BY req_id LIMIT $1`, args...))
	if err != nil {
		return nil, fmt.Errorf("list requests: %w", err)
	}
	return out, nil
}

// RegisteredSince reports whether a request of this type and scope was registered at or
// after since, whatever its state now (the daily timer registers each day's request once).
func RegisteredSince(ctx context.Context, q db.Executor, typ, scope string, since time.Time) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM req_track WHERE req_type = $1 AND scope = $2 AND created_at >= $3)`,
		typ, scope, since).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up %s %s: %w", typ, scope, err)
	}
	return ok, nil
}

// DeleteClosed deletes up to limit requests closed (DONE or EXPIRED) before cutoff, for the
// backfill's retention sweep. Open requests are never touched; the predicate is repeated in
// the DELETE so a row that changed after it was picked is left alone.
func DeleteClosed(ctx context.Context, q db.Executor, cutoff time.Time, limit int) (int64, error) {
	tag, err := q.Exec(ctx, `WITH c AS MATERIALIZED (
			SELECT req_id FROM req_track
			WHERE state IN ('DONE', 'EXPIRED') AND coalesce(done_at, expired_at, updated_at) < $1
			ORDER BY req_id LIMIT $2 FOR UPDATE SKIP LOCKED)
		DELETE FROM req_track r USING c WHERE r.req_id = c.req_id
		  AND r.state IN ('DONE', 'EXPIRED') AND coalesce(r.done_at, r.expired_at, r.updated_at) < $1`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("delete closed requests: %w", err)
	}
	return tag.RowsAffected(), nil
}

// OpenIDs returns the open (PENDING, SENT) requests of this type and scope: the ones a
// registration would expire, for a dry run.
func OpenIDs(ctx context.Context, q db.Executor, typ, scope string) ([]int64, error) {
	rows, err := q.Query(ctx, `SELECT req_id FROM req_track WHERE req_type = $1 AND scope = $2 AND state IN ('PENDING', 'SENT') ORDER BY req_id`, typ, scope)
	if err == nil {
		var ids []int64
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err == nil {
			return ids, nil
		}
	}
	return nil, fmt.Errorf("open %s %s: %w", typ, scope, err)
}

// OpenOthers counts the open (PENDING, SENT) requests other than those of this type and scope,
// which a registration expires: what the cap of open requests counts (Limits.CheckOpen).
func OpenOthers(ctx context.Context, q db.Executor, typ, scope string) (int, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM req_track WHERE state IN ('PENDING', 'SENT')
		AND NOT (req_type = $1 AND scope = $2)`, typ, scope).Scan(&n); err != nil {
		return 0, fmt.Errorf("count open requests: %w", err)
	}
	return n, nil
}
