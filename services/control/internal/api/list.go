package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// pageTokenPrefix versions the page token, so a later change of its content is recognised
// instead of being misread.
const pageTokenPrefix = "v1:"

// ListMessages implements ControlService.ListMessages with keyset pagination on msg_id: the
// token carries the last msg_id of the page, so deep pages cost the same as the first and
// messages enqueued between pages are never skipped.
func (s *Service) ListMessages(ctx context.Context, req *controlv1.ListMessagesRequest) (*controlv1.ListMessagesResponse, error) {
	f := queue.Filter{Abandoned: req.GetAbandoned()}
	if a := req.GetAcknowledged(); a != controlv1.AckFilter_ACK_FILTER_UNSPECIFIED {
		acked := a == controlv1.AckFilter_ACK_FILTER_ACKNOWLEDGED
		f.Acknowledged = &acked
	}
	for _, st := range req.GetStates() {
		f.States = append(f.States, queue.State(strings.TrimPrefix(st.String(), statePrefix)))
	}
	for _, c := range req.GetErrorClasses() {
		f.ErrorClasses = append(f.ErrorClasses, queue.ErrorClass(strings.TrimPrefix(c.String(), classPrefix)))
	}
	if r := req.GetRange(); r != nil {
		f.FirstID, f.LastID = r.GetFirst(), r.GetLast()
	}
	if req.EnqueuedFrom != nil {
		t := req.GetEnqueuedFrom().AsTime()
		f.EnqueuedFrom = &t
	}
	if req.EnqueuedTo != nil {
		t := req.GetEnqueuedTo().AsTime()
		f.EnqueuedTo = &t
	}
	after, size, err := page(req.GetPageToken(), req.GetPageSize())
	if err != nil {
		return nil, err
	}
	f.After = after
	if flid := req.GetFlid(); flid != "" {
		f.FLIDs = []string{flid}
	}
	if req.GetFlightNumber() != "" {
		day, err := time.Parse(time.DateOnly, req.GetOperationDay())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "operation_day: %v", err)
		}
		flids, err := flightstore.FLIDsByNumber(ctx, s.cfg.DB, req.GetFlightNumber(), day)
		if err != nil {
			return nil, toStatus(ctx, "list messages", err)
		}
		if f.FLIDs != nil {
			// Both given: the FLID must be one of the flight number's.
			flids = slices.DeleteFunc(flids, func(x string) bool { return x != req.GetFlid() })
		}
		if len(flids) == 0 {
			return &controlv1.ListMessagesResponse{}, nil // no such flight that day: no messages
		}
		f.FLIDs = flids
	}
	// One row more than the page tells whether another page exists without a count query.
	msgs, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) ([]queue.Message, error) { return queue.List(ctx, tx, f, size+1) })
	if err != nil {
		return nil, toStatus(ctx, "list messages", err)
	}
	more := len(msgs) > size
	if more {
		msgs = msgs[:size]
	}
	resp := &controlv1.ListMessagesResponse{}
	for _, m := range msgs {
		resp.Messages = append(resp.Messages, message(m))
	}
	var cut bool
	if resp.Messages, cut = fitPage(resp.Messages, s.cfg.PageBytes); more || cut {
		resp.NextPageToken = encodePageToken(resp.Messages[len(resp.Messages)-1].GetMsgId())
	}
	return resp, nil
}

// page reads a list call's page: the ID after which it starts (0 for the first page) and its
// size (controlv1.DefaultPageSize when unset); a token this service did not make is
// INVALID_ARGUMENT.
func page(token string, size int32) (after int64, n int, err error) {
	if token != "" {
		if after, err = decodePageToken(token); err != nil {
			return 0, 0, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if n = int(size); n == 0 {
		n = controlv1.DefaultPageSize
	}
	return after, n, nil
}

func encodePageToken(after int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pageTokenPrefix + strconv.FormatInt(after, 10)))
}

func decodePageToken(tok string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), pageTokenPrefix); ok {
			if after, err := strconv.ParseInt(rest, 10, 64); err == nil && after > 0 {
				return after, nil
			}
		}
	}
	return 0, fmt.Errorf("page_token %q is not a token this API returned: pass next_page_token unchanged", tok)
}

const eventStatePrefix = "EVENT_STATE_"

// eventList converts events, each payload cut to payloadMax bytes (eventPayload).
func eventList(rows []outbox.Row, payloadMax int) []*controlv1.Event {
	out := make([]*controlv1.Event, 0, len(rows))
	for _, r := range rows {
		payload, payloadCut := eventPayload(r, payloadMax)
		out = append(out, &controlv1.Event{
			EventId:       r.ID,
			Target:        r.Target,
			PartitionKey:  r.PartitionKey,
			EventType:     r.Type,
			StateVersion:  r.Version,
			State:         controlv1.EventState(controlv1.EventState_value[eventStatePrefix+r.State]),
			Attempts:      int32(r.Attempts),
			NextAttemptAt: optTimestamp(r.NextAttempt),
			LastError:     str(r.LastError),
			CreatedAt:     timestamp(r.CreatedAt),
			UpdatedAt:     timestamp(r.UpdatedAt),
			SentAt:        optTimestamp(r.SentAt),
			PayloadJson:   payload,
			PayloadCut:    payloadCut,
			TraceParent:   r.Trace.Parent,
		})
	}
	return out
}
