package server

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// requireComment refuses a mutating call of the API whose request has a comment field left
// empty (control.require-comment, issue #56 finding 8): every change in the audit says why. A
// dry run changes nothing and is let through, so a preview never needs a ticket. It runs after
// authorize (an unauthorised caller learns nothing about the request) and after validation (a
// malformed request gets the more specific error), inside the audit, so the refusal is
// audited.
func requireComment(services map[string]bool, on bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if on && services[serviceOf(info.FullMethod)] && Mutating(info.FullMethod) {
			if m, ok := req.(proto.Message); ok && missingComment(m) {
				return nil, status.Errorf(codes.InvalidArgument,
					"comment: %s needs a comment saying why (a ticket, an incident, e.g. INC-123); this control requires one on every change (control.require-comment)",
					methodOf(info.FullMethod))
			}
		}
		return handler(ctx, req)
	}
}

// missingComment reports whether m has a string field "comment" that is blank while its
// "dry_run" (if any) is false.
func missingComment(m proto.Message) bool {
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	comment := fields.ByName("comment")
	if comment == nil || comment.Kind() != protoreflect.StringKind {
		return false
	}
	if dry := fields.ByName("dry_run"); dry != nil && r.Get(dry).Bool() {
		return false
	}
	return strings.TrimSpace(r.Get(comment).String()) == ""
}
