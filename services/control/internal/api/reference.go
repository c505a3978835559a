package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/refstore"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// GetReference implements ControlService.GetReference from ref_effective, the view admin-api
// reads.
func (s *Service) GetReference(ctx context.Context, req *controlv1.GetReferenceRequest) (*controlv1.GetReferenceResponse, error) {
	e, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) (refstore.Entry, error) { return refstore.Get(ctx, tx, req.GetRtype(), req.GetRkey()) })
	if err != nil {
		return nil, toStatus(ctx, "get reference", err)
	}
	return &controlv1.GetReferenceResponse{Reference: referenceOf(e)}, nil
}

// refTokenPrefix versions the reference page token; the token also names its category, so a
// token of another category's listing is refused rather than misread.
const refTokenPrefix = "r1:"

// ListReference implements ControlService.ListReference with keyset pagination on the key.
func (s *Service) ListReference(ctx context.Context, req *controlv1.ListReferenceRequest) (*controlv1.ListReferenceResponse, error) {
	after := ""
	if tok := req.GetPageToken(); tok != "" {
		var err error
		if after, err = decodeRefToken(req.GetRtype(), tok); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = controlv1.DefaultPageSize
	}
	entries, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) ([]refstore.Entry, error) {
		return refstore.List(ctx, tx, req.GetRtype(), after, size+1)
	})
	if err != nil {
		return nil, toStatus(ctx, "list reference", err)
	}
	more := len(entries) > size
	if more {
		entries = entries[:size]
	}
	resp := &controlv1.ListReferenceResponse{}
	for _, e := range entries {
		resp.References = append(resp.References, referenceOf(e))
	}
	var cut bool
	if resp.References, cut = fitPage(resp.References, s.cfg.PageBytes); more || cut {
		last := entries[len(resp.References)-1].RKey
		resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(refTokenPrefix + req.GetRtype() + ":" + last))
	}
	return resp, nil
}

func decodeRefToken(rtype, tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), refTokenPrefix+rtype+":"); ok && rest != "" {
			return rest, nil
		}
	}
	return "", fmt.Errorf("page_token %q is not a token this API returned for rtype %s: pass next_page_token unchanged", tok, rtype)
}

func referenceOf(e refstore.Entry) *controlv1.Reference {
	return &controlv1.Reference{
		Rtype:               e.RType,
		Rkey:                e.RKey,
		PayloadJson:         string(e.Payload),
		SourceMsgId:         e.MsgID,
		Batch:               e.Batch,
		RefreshedAt:         timestamp(e.RefreshedAt),
		CategoryPublishedAt: optTimestamp(e.PublishedAt),
	}
}

// GetResourceStatus implements ControlService.GetResourceStatus through
// ref_resource_availability_at, so it answers what admin-api reads; the instant defaults to
// the injected clock's now.
func (s *Service) GetResourceStatus(ctx context.Context, req *controlv1.GetResourceStatusRequest) (*controlv1.GetResourceStatusResponse, error) {
	at := s.cfg.Clock.Now()
	if req.At != nil {
		at = req.GetAt().AsTime()
	}
	st, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) (refstore.Status, error) {
		return refstore.StatusAt(ctx, tx, req.GetRtyp(), req.GetRsid(), at)
	})
	if err != nil {
		return nil, toStatus(ctx, "get resource status", err)
	}
	resp := &controlv1.GetResourceStatusResponse{Rtyp: st.RTYP, Rsid: st.RSID, At: timestamp(at), Available: st.Available, Known: st.Known}
	if g := st.Governing; g != nil {
		resp.Governing = &controlv1.ResourceEvent{Stat: g.STAT, EffectiveFrom: timestamp(g.From), EndsAt: optTimestamp(g.End),
			SourceMsgId: g.MsgID, Batch: st.Batch, ReceivedAt: optTimestamp(st.ReceivedAt)}
	}
	return resp, nil
}
