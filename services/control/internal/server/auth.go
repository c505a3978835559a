package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/secret"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// Environment variables of the control API's authentication, named in errors. The token files
// are mounted Kubernetes or compose secrets, so a token never appears in the pod spec or the
// process environment; insecure lets the server start without any credential (development only).
const (
	EnvOperatorToken = "MSGX_CONTROL_TOKEN"
	EnvReaderToken   = "MSGX_CONTROL_READER_TOKEN"
	EnvTokens        = "MSGX_CONTROL_TOKENS"
	EnvInsecure      = "MSGX_CONTROL_INSECURE"
	// The certificate subject rules of each role.
	EnvOperatorSubjects = "MSGX_CONTROL_OPERATOR_SUBJECTS"
	EnvReaderSubjects   = "MSGX_CONTROL_READER_SUBJECTS"
)

// AuthConfig is what LoadAuth builds an Auth from (pkg/config's control-* keys, the token
// files already read).
type AuthConfig struct {
	// OperatorToken may call every RPC; ReaderToken only the reads (controlv1.RequiredRole).
	OperatorToken, ReaderToken string
	// Callers are the named tokens (control.tokens): each grants its role and names its caller
	// in the audit, requested_by and the log, so a postmortem can tell who acted.
	Callers []config.CallerToken
	// OperatorSubjects and ReaderSubjects grant the role to a verified client certificate whose
	// subject is listed (RFC 4514, "CN=ops,O=Airport": every RDN, in order) or whose URI SAN is
	// ("URI:spiffe://airport/ops"); they need mTLS.
	OperatorSubjects, ReaderSubjects []string
	Insecure                         bool
	// Source says where the credentials came from, for the start-up log (never a token).
	Source string
}

// Auth is how callers of the control API are authenticated and given a role: a bearer token
// per role, a certificate subject per role, or nothing when Insecure (which only a deliberate
// MSGX_CONTROL_INSECURE=true produces).
type Auth struct {
	// The tokens are kept as SHA-256 digests: comparing digests in constant time reveals
	// neither a token's bytes nor its length through timing.
	tokens   []roleToken
	subjects map[string]controlv1.Role
	Insecure bool
	Source   string
}

type roleToken struct {
	sum  [sha256.Size]byte
	role controlv1.Role
	name string // the caller's name: control.tokens' name, else the role's token name
}

// reservedNames are the names the server gives callers itself; a named token taking one
// would make its caller indistinguishable from the shared tokens or the insecure server.
var reservedNames = map[string]bool{"operator-token": true, "reader-token": true, "none": true}

// LoadAuth checks the configuration: each token must be usable in a bearer header and the two
// roles' tokens must differ; without any operator credential the server refuses to start unless
// insecure is set, so a forgotten secret cannot silently open the API or leave it without an
// operator.
func LoadAuth(c AuthConfig) (Auth, error) {
	a := Auth{subjects: map[string]controlv1.Role{}, Source: c.Source}
	type entry struct {
		token, env, name string
		role             controlv1.Role
	}
	entries := []entry{{c.OperatorToken, EnvOperatorToken, tokenName(controlv1.RoleOperator), controlv1.RoleOperator},
		{c.ReaderToken, EnvReaderToken, tokenName(controlv1.RoleReader), controlv1.RoleReader}}
	operators := c.OperatorToken != ""
	for _, ct := range c.Callers {
		if reservedNames[ct.Name] {
			return Auth{}, fmt.Errorf("%s: the name %q is the server's own (shared tokens, insecure server): choose another", EnvTokens, ct.Name)
		}
		role := controlv1.RoleReader
		if ct.Role == "operator" {
			role, operators = controlv1.RoleOperator, true
		}
		entries = append(entries, entry{ct.Token, EnvTokens + " (" + ct.Name + ")", ct.Name, role})
	}
	seen := map[[sha256.Size]byte]string{}
	for _, t := range entries {
		if t.token == "" {
			continue
		}
		if strings.ContainsAny(t.token, " \t\r\n") {
			// A bearer token travels in one header value after "Bearer "; whitespace inside
			// it would never match what a client sends.
			return Auth{}, fmt.Errorf("control token %s contains whitespace", t.env)
		}
		if len(t.token) < secret.MinTokenLength {
			return Auth{}, fmt.Errorf("%s is %d characters: a token needs at least %d (e.g. openssl rand -hex 32)", t.env, len(t.token), secret.MinTokenLength)
		}
		sum := sha256.Sum256([]byte(t.token))
		if other, ok := seen[sum]; ok {
			// One token for two entries would grant the higher role or hide who acted.
			return Auth{}, fmt.Errorf("%s and %s are the same token: give each its own", other, t.env)
		}
		seen[sum] = t.env
		a.tokens = append(a.tokens, roleToken{sum: sum, role: t.role, name: t.name})
	}
	for _, s := range c.ReaderSubjects {
		k, err := subjectKey(s)
		if err != nil {
			return Auth{}, fmt.Errorf("%s: certificate subject %q: %w", EnvReaderSubjects, s, err)
		}
		a.subjects[k] = controlv1.RoleReader
	}
	for _, s := range c.OperatorSubjects {
		k, err := subjectKey(s)
		if err != nil {
			return Auth{}, fmt.Errorf("%s: certificate subject %q: %w", EnvOperatorSubjects, s, err)
		}
		if a.subjects[k] == controlv1.RoleReader {
			return Auth{}, fmt.Errorf("certificate subject %q is listed for both roles", s)
		}
		a.subjects[k] = controlv1.RoleOperator
	}
	if !operators && len(c.OperatorSubjects) == 0 {
		if !c.Insecure {
			return Auth{}, fmt.Errorf("no operator credential: set %s (or %s_FILE, an operator in %s, or control-operator-subjects with mTLS), or %s=true for an unauthenticated development server",
				EnvOperatorToken, EnvOperatorToken, EnvTokens, EnvInsecure)
		}
		if len(a.tokens) > 0 || len(a.subjects) > 0 {
			return Auth{}, fmt.Errorf("%s=true with only reader credentials: set the operator token too, or no credential at all", EnvInsecure)
		}
		return Auth{Insecure: true, Source: EnvInsecure + "=true"}, nil
	}
	if c.Insecure {
		// A credential always wins: MSGX_CONTROL_INSECURE only permits running without one.
		a.Source += " (" + EnvInsecure + " ignored: credentials are set)"
	}
	return a, nil
}

var errBadToken = status.Error(codes.Unauthenticated, "invalid bearer token")

// tokenRole is the role a bearer token grants and its caller's name, RoleNone for an unknown
// one.
func (a Auth) tokenRole(token string) (controlv1.Role, string) {
	sum := sha256.Sum256([]byte(token))
	role, name := controlv1.RoleNone, ""
	for _, t := range a.tokens {
		// Every token is compared, so the time does not tell which one matched.
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			role, name = t.role, t.name
		}
	}
	return role, name
}

// clientCert is the verified client certificate, nil without mTLS.
func clientCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
		return ti.State.VerifiedChains[0][0]
	}
	return nil
}

// certRole is the role the verified client certificate grants (the higher of its subject's and
// its URI SANs'), and its whole subject for the audit; RoleNone and "" without mTLS.
func (a Auth) certRole(ctx context.Context) (controlv1.Role, string) {
	cert := clientCert(ctx)
	if cert == nil {
		return controlv1.RoleNone, ""
	}
	role := controlv1.RoleNone
	for _, k := range certKeys(cert) {
		role = max(role, a.subjects[k])
	}
	return role, subjectString(cert)
}

// authenticated reports, from the headers alone, whether a call carries a credential that
// will be accepted: the stream-level rate limit spends its budget only on the rest.
func (a Auth) authenticated(ctx context.Context, md metadata.MD) bool {
	if a.Insecure {
		return true
	}
	if r, _ := a.certRole(ctx); r != controlv1.RoleNone {
		return true
	}
	for _, v := range md.Get("authorization") {
		scheme, token, ok := strings.Cut(v, " ")
		if ok && strings.EqualFold(scheme, "bearer") {
			if r, _ := a.tokenRole(token); r != controlv1.RoleNone {
				return true
			}
		}
	}
	return false
}

// authenticate is the go-grpc-middleware auth function: the call must carry
// "authorization: Bearer <token>" with a configured token, or come over mTLS with a listed
// certificate subject. The caller's role is the higher of the two. Every failure is
// Unauthenticated and says no more than which part was wrong.
func (a Auth) authenticate(ctx context.Context) (context.Context, error) {
	if a.Insecure {
		return withCaller(ctx, Caller{Token: "none", Role: controlv1.RoleOperator}), nil
	}
	role, subject := a.certRole(ctx)
	c := Caller{CertSubject: subject, Role: role}
	token, err := auth.AuthFromMD(ctx, "bearer")
	switch {
	case err == nil:
		role, name := a.tokenRole(token)
		if role == controlv1.RoleNone {
			return nil, errBadToken
		}
		c.Token = name
		c.Role = max(c.Role, role)
	case c.Role == controlv1.RoleNone:
		return nil, err // already Unauthenticated
	}
	return withCaller(ctx, c), nil
}

// authorize refuses a call whose caller's role is below what the method needs. It runs inside
// the audit interceptor, so a refused mutating call is audited with the caller and its role.
func authorize(services map[string]bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := allowed(ctx, services, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

func authorizeStream(services map[string]bool) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := allowed(ss.Context(), services, info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

func allowed(ctx context.Context, services map[string]bool, fullMethod string) error {
	if !services[serviceOf(fullMethod)] {
		return nil // health and reflection need no role
	}
	caller, _ := CallerFrom(ctx)
	need := controlv1.RequiredRole(fullMethod)
	if !caller.Role.Allows(need) {
		return status.Errorf(codes.PermissionDenied, "%s needs the %s role; this caller has the %s role",
			methodOf(fullMethod), need, caller.Role)
	}
	return nil
}

// validate catches an Auth without any credential (a zero value): it would
// accept nobody, or worse, be mistaken for an open server.
func (a Auth) validate() error {
	if !a.Insecure && len(a.tokens) == 0 && len(a.subjects) == 0 {
		return errors.New("server: Auth has neither a credential nor Insecure; build it with LoadAuth")
	}
	return nil
}

// describe names the credentials for the start-up log, without revealing any.
func (a Auth) describe() string {
	var parts []string
	for _, t := range a.tokens {
		if t.name != tokenName(t.role) {
			parts = append(parts, t.role.String()+" token of "+t.name)
			continue
		}
		parts = append(parts, t.role.String()+" token")
	}
	if n := len(a.subjects); n > 0 {
		parts = append(parts, fmt.Sprintf("%d certificate subjects", n))
	}
	return strings.Join(parts, ", ")
}
