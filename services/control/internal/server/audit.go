package server

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// Caller is who made a call, as far as the server can tell.
type Caller struct {
	// Token names the bearer token: its caller's name from control.tokens ("alice"), else the
	// role it grants ("operator-token", "reader-token"); "none" on an insecure server, empty
	// without one. Nothing derived from the token's value is shown: a reader sees
	// requested_by, and part of a digest allows guessing a weak token offline.
	Token string
	// CertSubject is the verified client certificate's subject (mTLS), empty without one.
	CertSubject string
	// Peer is the client's network address.
	Peer string
	// Role is what the caller may do.
	Role controlv1.Role
}

type callerKey struct{}

// CallerFrom returns the caller the auth interceptor recorded in ctx.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// withCaller records the authenticated caller with the peer's address.
func withCaller(ctx context.Context, c Caller) context.Context {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.Peer = p.Addr.String()
	}
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerName is the caller in ctx as one string: the client certificate's subject when there is
// one, else the token's name (Caller.Token); empty without an authenticated caller.
func CallerName(ctx context.Context) string {
	c, ok := CallerFrom(ctx)
	switch {
	case !ok:
		return ""
	case c.CertSubject != "":
		return c.CertSubject
	}
	return c.Token
}

// tokenName is how a caller by token is named in the audit and in requested_by.
func tokenName(role controlv1.Role) string { return role.String() + "-token" }

// Mutating reports whether a method changes the pipeline: whatever the role table does not
// list as a read (controlv1.RequiredRole), so a new RPC is audited and fenced until it is
// declared a read there.
func Mutating(fullMethod string) bool { return controlv1.Mutating(fullMethod) }

func methodOf(fullMethod string) string {
	for i := len(fullMethod) - 1; i >= 0; i-- {
		if fullMethod[i] == '/' {
			return fullMethod[i+1:]
		}
	}
	return fullMethod
}

// maxAuditBody bounds the request and response text in one audit line; a replay of a whole
// error class can list thousands of IDs.
const maxAuditBody = 64 << 10

// auditInterceptor writes one INFO line with "audit": true for every mutating call of the API's
// services, after it returns: method, caller, arguments, the status code and the response. It
// runs after authentication (refused callers are in the access log) and before validation and
// the handler, so invalid and refused requests are audited with their outcome too.
func auditInterceptor(log *slog.Logger, services map[string]bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !services[serviceOf(info.FullMethod)] || !Mutating(info.FullMethod) {
			return handler(ctx, req)
		}
		start := time.Now()
		resp, err := handler(ctx, req)
		caller, _ := CallerFrom(ctx)
		st := status.Convert(err)
		attrs := []any{
			"audit", true,
			"method", info.FullMethod,
			slog.Group("caller", "role", caller.Role.String(), "token", caller.Token, "cert_subject", caller.CertSubject, "peer", caller.Peer),
			"request", auditJSON(req),
			"code", st.Code().String(),
			"duration_ms", time.Since(start).Milliseconds(),
		}
		if err != nil {
			attrs = append(attrs, "error", st.Message())
		} else {
			attrs = append(attrs, "response", auditJSON(resp))
		}
		log.InfoContext(ctx, "audit: "+methodOf(info.FullMethod), attrs...)
		return resp, err
	}
}

func auditJSON(v any) string {
	m, ok := v.(proto.Message)
	if !ok || m == nil {
		return ""
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return "unprintable: " + err.Error()
	}
	if len(b) > maxAuditBody {
		return string(b[:maxAuditBody]) + "…(truncated)"
	}
	return string(b)
}

// auditStreamInterceptor is the audit of streaming methods (the API has none today): one line
// per stream with the caller and the outcome; the messages of a stream are not logged.
func auditStreamInterceptor(log *slog.Logger, services map[string]bool) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !services[serviceOf(info.FullMethod)] || !Mutating(info.FullMethod) {
			return handler(srv, ss)
		}
		start := time.Now()
		err := handler(srv, ss)
		caller, _ := CallerFrom(ss.Context())
		st := status.Convert(err)
		log.InfoContext(ss.Context(), "audit: "+methodOf(info.FullMethod),
			"audit", true,
			"method", info.FullMethod,
			slog.Group("caller", "role", caller.Role.String(), "token", caller.Token, "cert_subject", caller.CertSubject, "peer", caller.Peer),
			"code", st.Code().String(),
			"error", st.Message(),
			"duration_ms", time.Since(start).Milliseconds())
		return err
	}
}
