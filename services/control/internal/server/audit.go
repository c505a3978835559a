package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Caller is who made a call, as far as the server can tell.
type Caller struct {
	// Token identifies the bearer token without revealing it: "sha256:" and the first 8 hex
	// digits of its digest, or "none" on an insecure server.
	Token string
	// CertSubject is the verified client certificate's subject (mTLS), empty without one.
	CertSubject string
	// Peer is the client's network address.
	Peer string
}

type callerKey struct{}

// CallerFrom returns the caller the auth interceptor recorded in ctx.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// withCaller records the authenticated caller: the token's fingerprint, and the transport's
// evidence (peer address, verified client certificate).
func withCaller(ctx context.Context, token string) context.Context {
	c := Caller{Token: token}
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			c.Peer = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
			c.CertSubject = ti.State.VerifiedChains[0][0].Subject.String()
		}
	}
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerName is the caller in ctx as one string: the client certificate's subject when there is
// one, else the token's fingerprint; empty without an authenticated caller.
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

func tokenFingerprint(sum [sha256.Size]byte) string { return "sha256:" + hex.EncodeToString(sum[:4]) }

// Mutating reports whether a method changes the pipeline: every method of the given services
// that its .proto does not mark idempotency_level = NO_SIDE_EFFECTS. Unknown methods count as
// mutating, so a new RPC is audited and fenced until it is declared a read.
func Mutating(fullMethod string) bool {
	name := protoreflect.FullName(serviceOf(fullMethod) + "." + methodOf(fullMethod))
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return true
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return true
	}
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	return !ok || opts.GetIdempotencyLevel() != descriptorpb.MethodOptions_NO_SIDE_EFFECTS
}

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
			slog.Group("caller", "token", caller.Token, "cert_subject", caller.CertSubject, "peer", caller.Peer),
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
			slog.Group("caller", "token", caller.Token, "cert_subject", caller.CertSubject, "peer", caller.Peer),
			"code", st.Code().String(),
			"error", st.Message(),
			"duration_ms", time.Since(start).Milliseconds())
		return err
	}
}
