package api

import (
	"context"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// GetFlightHistory implements ControlService.GetFlightHistory (R-ORDER-8): the flight's
// history rows and the processing records of the messages about it, merged by message ID in
// one snapshot. A message that wrote the flight has its row; one that ended without writing
// (SKIPPED: an unknown or deleted flight, superseded) is known only by its record, which names
// its flight (a FLOP's FLID, a single-flight ADFT's).
func (s *Service) GetFlightHistory(ctx context.Context, req *controlv1.GetFlightHistoryRequest) (*controlv1.GetFlightHistoryResponse, error) {
	flid := req.GetFlid()
	limit := int(req.GetPageSize())
	if limit == 0 {
		limit = controlv1.DefaultFlightHistoryPage
	}
	var (
		changes []flightstore.Change
		msgs    []queue.Message
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		if changes, err = flightstore.History(ctx, tx, flid, req.GetAfterMsgId(), limit); err != nil {
			return err
		}
		msgs, err = queue.List(ctx, tx, queue.Filter{FLIDs: []string{flid}, After: req.GetAfterMsgId()}, limit)
		return err
	})
	if err != nil {
		return nil, toStatus(ctx, "get flight history", err)
	}
	byID := make(map[int64]*queue.Message, len(msgs))
	for i := range msgs {
		byID[msgs[i].MsgID] = &msgs[i]
	}
	entries := map[int64]*controlv1.FlightHistoryEntry{}
	for _, c := range changes {
		entries[c.MsgID] = historyEntry(c, byID[c.MsgID])
	}
	for _, m := range msgs {
		if entries[m.MsgID] == nil {
			entries[m.MsgID] = &controlv1.FlightHistoryEntry{MsgId: m.MsgID, Flid: flid, MsgType: str(m.MsgType), Styp: str(m.MsgStyp),
				MessageState: messageState(m.State), Reason: str(m.LastError), At: optTimestamp(m.FinishedAt)}
		}
	}
	ids := slices.Sorted(maps.Keys(entries))
	resp := &controlv1.GetFlightHistoryResponse{Flid: flid}
	if len(ids) > limit {
		ids = ids[:limit]
	}
	for _, id := range ids {
		resp.Entries = append(resp.Entries, entries[id])
	}
	if len(changes) == limit || len(msgs) == limit {
		// One of the two sources may hold more: the next page starts after this one.
		resp.NextAfterMsgId = ids[len(ids)-1]
	}
	if len(resp.Entries) == 0 && req.GetAfterMsgId() == 0 {
		return nil, status.Errorf(codes.NotFound, "flight %s: no message kept that touched it", flid)
	}
	return resp, nil
}

// historyEntry is one history row with the state of its message (nil when its processing
// record is gone or was not read).
func historyEntry(c flightstore.Change, m *queue.Message) *controlv1.FlightHistoryEntry {
	e := &controlv1.FlightHistoryEntry{MsgId: c.MsgID, Flid: c.FLID, MsgType: c.MsgType, Styp: c.STYP, Cause: c.Cause,
		FlightState: c.State, Version: c.Version, At: timestamp(c.At)}
	if m != nil {
		e.MessageState = messageState(m.State)
	}
	for _, p := range slices.Sorted(maps.Keys(c.Changes)) {
		e.Changes = append(e.Changes, &controlv1.PartChange{Part: p, Old: c.Changes[p].Old, New: c.Changes[p].New})
	}
	for _, p := range slices.Sorted(maps.Keys(c.Superseded)) {
		e.Superseded = append(e.Superseded, &controlv1.SupersededPart{Part: p, NewerMsgId: c.Superseded[p]})
	}
	for _, ev := range c.Events {
		e.Events = append(e.Events, &controlv1.HistoryEvent{Target: ev.Target, Type: ev.Type, Version: ev.Version})
	}
	return e
}
