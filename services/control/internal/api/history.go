package api

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// GetFlightHistory implements ControlService.GetFlightHistory (R-ORDER-8): the flight's
// history rows and the processing records of the messages about it, merged by message ID in
// one snapshot. A message that wrote the flight has its row; one that ended without writing
// (SKIPPED: an unknown or deleted flight, superseded) is known only by its record, which names
// its flight (a FLOP's FLID, a single-flight ADFT's). A page stops at control.page-bytes as well
// as at page_size, and each row's values are cut to fit it (historyEntry).
func (s *Service) GetFlightHistory(ctx context.Context, req *controlv1.GetFlightHistoryRequest) (*controlv1.GetFlightHistoryResponse, error) {
	flid := req.GetFlid()
	limit := int(req.GetPageSize())
	if limit == 0 {
		limit = controlv1.DefaultFlightHistoryPage
	}
	var (
		msgs    []queue.Message
		entries map[int64]*controlv1.FlightHistoryEntry
		// read counts the history rows read whole; horizon is the first one read without its
		// changes (past the byte bound), 0 when none was: no entry at or after it is answered.
		read    int
		horizon int64
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		if msgs, err = queue.List(ctx, tx, queue.Filter{FLIDs: []string{flid}, After: req.GetAfterMsgId()}, limit); err != nil {
			return err
		}
		byID := make(map[int64]*queue.Message, len(msgs))
		for i := range msgs {
			byID[msgs[i].MsgID] = &msgs[i]
		}
		entries, read, horizon = map[int64]*controlv1.FlightHistoryEntry{}, 0, 0
		// Each row is cut to the page as it is read, so a page of large rows holds one of them
		// whole at a time, never the page.
		err = flightstore.EachHistory(ctx, tx, flid, req.GetAfterMsgId(), limit, s.rowBound(), func(c flightstore.Change) error {
			if c.Omitted {
				if horizon == 0 {
					horizon = c.MsgID
				}
				return nil
			}
			read++
			entries[c.MsgID] = historyEntry(c, byID[c.MsgID], s.cfg.PageBytes)
			return nil
		})
		if err != nil {
			return err
		}
		// A message that wrote the flight is not always one the FLID filter finds: its record
		// may name no flight (a schedule message about many) and its events may be gone
		// (retention). Its state is read by ID, so no entry says UNSPECIFIED for a message
		// whose record is kept (issue #56).
		for id, e := range entries {
			if byID[id] != nil {
				continue
			}
			m, err := queue.Get(ctx, tx, id)
			if errors.Is(err, db.ErrNotFound) {
				continue // the record is gone: the entry says so by leaving the state unset
			}
			if err != nil {
				return err
			}
			e.MessageState = messageState(m.State)
		}
		return nil
	})
	if err != nil {
		return nil, toStatus(ctx, "get flight history", err)
	}
	for _, m := range msgs {
		if entries[m.MsgID] == nil {
			entries[m.MsgID] = &controlv1.FlightHistoryEntry{MsgId: m.MsgID, Flid: flid, MsgType: str(m.MsgType), Styp: str(m.MsgStyp),
				MessageState: messageState(m.State), Reason: str(m.LastError), At: optTimestamp(m.FinishedAt)}
		}
	}
	ids := slices.Sorted(maps.Keys(entries))
	// One of the two sources may hold more: the history rows stopped at the byte bound or at
	// limit, or the messages at limit. Either way the page ends where both were read.
	more := horizon != 0 || read == limit || len(msgs) == limit
	resp := &controlv1.GetFlightHistoryResponse{Flid: flid}
	fill := newPageFill(s.cfg.PageBytes)
	for _, id := range ids {
		if len(resp.Entries) == limit || (horizon != 0 && id >= horizon) || !fill.add(entries[id]) {
			more = true
			break
		}
		resp.Entries = append(resp.Entries, entries[id])
	}
	if more && len(resp.Entries) > 0 {
		resp.NextAfterMsgId = resp.Entries[len(resp.Entries)-1].GetMsgId()
	}
	if len(resp.Entries) == 0 && req.GetAfterMsgId() == 0 {
		return nil, status.Errorf(codes.NotFound, "flight %s: no message kept that touched it", flid)
	}
	return resp, nil
}

// historyEntry is one history row with the state of its message (nil when its processing
// record is gone or was not read), its values cut so that it fits a page of pageBytes
// (fitEntry).
func historyEntry(c flightstore.Change, m *queue.Message, pageBytes int) *controlv1.FlightHistoryEntry {
	e := &controlv1.FlightHistoryEntry{MsgId: c.MsgID, Flid: c.FLID, MsgType: c.MsgType, Styp: c.STYP, Cause: c.Cause,
		FlightState: c.State, Version: c.Version, At: timestamp(c.At), ChangesOmitted: c.Omitted}
	if m != nil {
		e.MessageState = messageState(m.State)
	}
	for _, p := range slices.Sorted(maps.Keys(c.Superseded)) {
		e.Superseded = append(e.Superseded, &controlv1.SupersededPart{Part: p, NewerMsgId: c.Superseded[p]})
	}
	for _, ev := range c.Events {
		e.Events = append(e.Events, &controlv1.HistoryEvent{Target: ev.Target, Type: ev.Type, Version: ev.Version})
	}
	fitEntry(e, c.Changes, pageBytes)
	return e
}

// fitEntry sets e's changes, each value cut to a page's share (valueCap). A row of many parts
// (a snapshot that changed every collection) can still pass the page: its values are then cut
// shorter, halving, until it fits or they are down to minValueBytes.
func fitEntry(e *controlv1.FlightHistoryEntry, changes map[string]flight.Change, pageBytes int) {
	parts := slices.Sorted(maps.Keys(changes))
	for max := valueCap(pageBytes); ; max /= 2 {
		e.Changes = make([]*controlv1.PartChange, 0, len(parts))
		for _, p := range parts {
			pc := &controlv1.PartChange{Part: p}
			pc.Old, pc.OldCut = cut(changes[p].Old, max)
			pc.New, pc.NewCut = cut(changes[p].New, max)
			e.Changes = append(e.Changes, pc)
		}
		if max/2 < minValueBytes || proto.Size(e) <= pageBytes {
			return
		}
	}
}
