package ctl

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// maxPages bounds --all: a list that has not ended after this many pages is a server that
// keeps answering with a next page (or a selection far beyond what a terminal shows).
const maxPages = 10000

// A pager follows a list RPC's pages. It is found from the descriptor like the flags: a
// request field X whose value the response hands back as next_X (page_token and
// next_page_token, after_msg_id and next_after_msg_id), so a new list RPC gets --all without
// code.
type pager struct {
	request  string // the request's field, e.g. page_token
	response string // the response's, e.g. next_page_token
}

func pagerOf(md protoreflect.MethodDescriptor) *pager {
	in, out := md.Input().Fields(), md.Output().Fields()
	for i := range in.Len() {
		fd := in.Get(i)
		next := out.ByName("next_" + fd.Name())
		if next != nil && next.Kind() == fd.Kind() && !fd.IsList() && !next.IsList() {
			return &pager{request: string(fd.Name()), response: string(next.Name())}
		}
	}
	return nil
}

func (p *pager) field(m proto.Message, name string) (protoreflect.Message, protoreflect.FieldDescriptor) {
	r := m.ProtoReflect()
	return r, r.Descriptor().Fields().ByName(protoreflect.Name(name))
}

// started reports whether req asks for a page after the first.
func (p *pager) started(req proto.Message) bool {
	r, fd := p.field(req, p.request)
	return r.Has(fd)
}

// next is the response's next page as the flag takes it, "" on the last page.
func (p *pager) next(resp proto.Message) string {
	r, fd := p.field(resp, p.response)
	if !r.Has(fd) {
		return ""
	}
	return r.Get(fd).String()
}

// fetchAll calls page after page and gathers every page's lists into resp, which then reads
// as one answer without a next page.
func (p *pager) fetchAll(ctx context.Context, c *client, md protoreflect.MethodDescriptor, req, resp proto.Message) error {
	req = proto.Clone(req)
	for range maxPages {
		page := resp.ProtoReflect().New().Interface()
		if err := c.call(ctx, md, req, page); err != nil {
			return err
		}
		merge(resp.ProtoReflect(), page.ProtoReflect())
		pr, pfd := p.field(page, p.response)
		if !pr.Has(pfd) {
			rr, rfd := p.field(resp, p.response)
			rr.Clear(rfd)
			return nil
		}
		qr, qfd := p.field(req, p.request)
		qr.Set(qfd, pr.Get(pfd))
	}
	return localErr(fmt.Errorf("--all stopped after %d pages: narrow the selection with the filters", maxPages))
}

// asked is how many rows a call of req asks for: its page_size, or the server's default page
// (controlv1.DefaultFlightHistoryPage for GetFlightHistory, controlv1.DefaultPageSize for the
// lists); 0 when the request has no page_size.
func asked(md protoreflect.MethodDescriptor, req proto.Message) int {
	r := req.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("page_size")
	if fd == nil {
		return 0
	}
	if n := int(r.Get(fd).Int()); n > 0 {
		return n
	}
	if md.Name() == "GetFlightHistory" {
		return controlv1.DefaultFlightHistoryPage
	}
	return controlv1.DefaultPageSize
}

// rows counts the rows of a page: its longest list.
func rows(m proto.Message) int {
	n := 0
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.IsList() {
			n = max(n, v.List().Len())
		}
		return true
	})
	return n
}

// fill follows the pages after resp, the answer to req, until resp holds the rows req asked
// for or the list ends. The server also ends a page at control.page-bytes, so a page of large
// rows (a flight's history with 6 MB documents) holds fewer than asked: the operator still
// gets the page asked for, in pages each client and server can hold (docs/control.md). resp's
// next page is then the one after the rows gathered.
func (p *pager) fill(ctx context.Context, c *client, md protoreflect.MethodDescriptor, req, resp proto.Message) error {
	want := asked(md, req)
	if want == 0 {
		return nil
	}
	req = proto.Clone(req)
	sizeFD := req.ProtoReflect().Descriptor().Fields().ByName("page_size")
	for range maxPages {
		have := rows(resp)
		rr, rfd := p.field(resp, p.response)
		if have >= want || !rr.Has(rfd) {
			return nil
		}
		qr, qfd := p.field(req, p.request)
		qr.Set(qfd, rr.Get(rfd))
		qr.Set(sizeFD, protoreflect.ValueOfInt32(int32(want-have)))
		page := resp.ProtoReflect().New().Interface()
		if err := c.call(ctx, md, req, page); err != nil {
			return err
		}
		// The next page is the last one's: cleared first, so merge takes it from page (or
		// leaves none on the last page).
		rr.Clear(rfd)
		merge(resp.ProtoReflect(), page.ProtoReflect())
	}
	return localErr(fmt.Errorf("stopped after %d pages: narrow the selection with the filters", maxPages))
}

// merge appends page's lists to acc's; a singular field keeps the first page's value.
func merge(acc, page protoreflect.Message) {
	page.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.IsList() {
			dst := acc.Mutable(fd).List()
			src := v.List()
			for i := range src.Len() {
				dst.Append(src.Get(i))
			}
			return true
		}
		if !acc.Has(fd) {
			acc.Set(fd, v)
		}
		return true
	})
}
