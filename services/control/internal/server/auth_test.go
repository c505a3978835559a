package server

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// Tokens of the minimum length (secret.MinTokenLength).
const (
	opTok = "operator-token-0123456789abcdef0"
	rdTok = "reader-token-0123456789abcdef012"
)

func TestLoadAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      AuthConfig
		wantErr  string // substring; empty means success
		insecure bool
		// the role each bearer token gets ("" = refused)
		roles map[string]controlv1.Role
	}{
		{name: "operator token only (the old single token)", cfg: AuthConfig{OperatorToken: opTok},
			roles: map[string]controlv1.Role{opTok: controlv1.RoleOperator, rdTok: controlv1.RoleNone, "": controlv1.RoleNone}},
		{name: "both roles", cfg: AuthConfig{OperatorToken: opTok, ReaderToken: rdTok},
			roles: map[string]controlv1.Role{opTok: controlv1.RoleOperator, rdTok: controlv1.RoleReader, opTok + "x": controlv1.RoleNone}},
		{name: "the same token for both roles", cfg: AuthConfig{OperatorToken: strings.Repeat("s", 32), ReaderToken: strings.Repeat("s", 32)}, wantErr: "same token"},
		{name: "reader only is refused", cfg: AuthConfig{ReaderToken: rdTok}, wantErr: "no operator credential"},
		{name: "whitespace inside", cfg: AuthConfig{OperatorToken: "two words"}, wantErr: "whitespace"},
		{name: "a short operator token", cfg: AuthConfig{OperatorToken: opTok[:31]}, wantErr: EnvOperatorToken + " is 31 characters"},
		{name: "a short reader token", cfg: AuthConfig{OperatorToken: opTok, ReaderToken: "rd"}, wantErr: EnvReaderToken + " is 2 characters"},
		{name: "nothing refuses", wantErr: EnvInsecure + "=true"},
		{name: "insecure", cfg: AuthConfig{Insecure: true}, insecure: true},
		{name: "insecure with only a reader token is refused", cfg: AuthConfig{ReaderToken: rdTok, Insecure: true}, wantErr: "only reader"},
		{name: "a token beats insecure", cfg: AuthConfig{OperatorToken: opTok, Insecure: true},
			roles: map[string]controlv1.Role{opTok: controlv1.RoleOperator, "x": controlv1.RoleNone}},
		{name: "operator by certificate subject", cfg: AuthConfig{OperatorSubjects: []string{"CN=ops"}, ReaderToken: rdTok},
			roles: map[string]controlv1.Role{rdTok: controlv1.RoleReader}},
		{name: "a subject in both lists", cfg: AuthConfig{OperatorSubjects: []string{"CN=x"}, ReaderSubjects: []string{"CN=x"}}, wantErr: "both roles"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := LoadAuth(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadAuth = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := a.validate(); err != nil {
				t.Fatalf("validate: %v", err)
			}
			if a.Insecure != tc.insecure {
				t.Errorf("Insecure = %v, want %v", a.Insecure, tc.insecure)
			}
			if d := a.describe(); strings.Contains(d, "op") && strings.Contains(d, "rd") && !strings.Contains(d, "token") {
				t.Errorf("describe %q", d)
			}
			if tc.insecure {
				ctx, err := a.authenticate(context.Background())
				if err != nil {
					t.Fatalf("insecure auth refused a call without a token: %v", err)
				}
				if c, _ := CallerFrom(ctx); c.Role != controlv1.RoleOperator {
					t.Errorf("insecure caller role = %s, want operator", c.Role)
				}
				return
			}
			for token, want := range tc.roles {
				ctx, err := a.authenticate(incoming(token))
				if want == controlv1.RoleNone {
					if status.Code(err) != codes.Unauthenticated {
						t.Errorf("token %q: %v, want Unauthenticated", token, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("token %q refused: %v", token, err)
					continue
				}
				if c, _ := CallerFrom(ctx); c.Role != want || c.Token != want.String()+"-token" || strings.Contains(c.Token, token) {
					t.Errorf("token %q: caller %+v, want role %s", token, c, want)
				}
			}
			if _, err := a.authenticate(context.Background()); status.Code(err) != codes.Unauthenticated {
				t.Errorf("no token: %v, want Unauthenticated", err)
			}
		})
	}
}

// The scheme is case-insensitive (RFC 6750, section 2.1, as curl and most clients send "bearer").
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	a := TokenAuth("op")
	for _, h := range []string{"Bearer op", "bearer op", "BEARER op"} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", h))
		if _, err := a.authenticate(ctx); err != nil {
			t.Errorf("%q refused: %v", h, err)
		}
		if !a.authenticated(ctx, metadata.Pairs("authorization", h)) {
			t.Errorf("%q not counted as authenticated by the tap", h)
		}
	}
}

// A reader may call exactly the reads; anything else, a method unknown to the table included,
// is PERMISSION_DENIED naming the role it needs.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	api := map[string]bool{"msgx.control.v1.ControlService": true}
	call := func(role controlv1.Role, method string) error {
		ctx := withCaller(context.Background(), Caller{Role: role})
		_, err := authorize(api)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method},
			func(context.Context, any) (any, error) { return "ok", nil })
		return err
	}
	for _, tc := range []struct {
		role   controlv1.Role
		method string
		want   codes.Code
	}{
		{controlv1.RoleReader, controlv1.ControlService_GetStatus_FullMethodName, codes.OK},
		{controlv1.RoleReader, controlv1.ControlService_ListMessages_FullMethodName, codes.OK},
		{controlv1.RoleReader, controlv1.ControlService_ListRequests_FullMethodName, codes.OK},
		{controlv1.RoleReader, controlv1.ControlService_Replay_FullMethodName, codes.PermissionDenied},
		{controlv1.RoleReader, controlv1.ControlService_SeedCutover_FullMethodName, codes.PermissionDenied},
		{controlv1.RoleReader, controlv1.ControlService_RequestSchedule_FullMethodName, codes.PermissionDenied},
		{controlv1.RoleReader, "/msgx.control.v1.ControlService/RebuildProjection", codes.PermissionDenied},
		{controlv1.RoleOperator, controlv1.ControlService_Replay_FullMethodName, codes.OK},
		{controlv1.RoleOperator, controlv1.ControlService_GetStatus_FullMethodName, codes.OK},
		{controlv1.RoleNone, "/grpc.health.v1.Health/Check", codes.OK},
	} {
		err := call(tc.role, tc.method)
		if got := status.Code(err); got != tc.want {
			t.Errorf("%s calling %s: %v, want %s", tc.role, tc.method, err, tc.want)
		}
		if tc.want == codes.PermissionDenied && !strings.Contains(err.Error(), "operator role") {
			t.Errorf("refusal %q does not name the role needed", err)
		}
	}
}

func TestAuthWithoutTokenIsRefused(t *testing.T) {
	t.Parallel()
	for name, a := range map[string]Auth{"zero value": {}, "TokenAuth(\"\")": TokenAuth("")} {
		if err := a.validate(); err == nil {
			t.Errorf("%s: validate passed; an Auth without a credential would accept nobody", name)
		}
	}
}

// incoming is a server-side context carrying "authorization: Bearer <token>".
func incoming(token string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
}

// bearer is a client-side context sending the token.
func bearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// TokenAuth returns an Auth whose operator token is token, for the tests. An empty
// token gives an Auth that the server refuses, like no credential at all.
func TokenAuth(token string) Auth {
	a := Auth{subjects: map[string]controlv1.Role{}, Source: "TokenAuth"}
	if token != "" {
		a.tokens = []roleToken{{sum: sha256.Sum256([]byte(token)), role: controlv1.RoleOperator}}
	}
	return a
}

// Named tokens (control.tokens, issue #56 finding 8): each grants its role and names its
// caller, which is what the audit and requested_by show.
func TestNamedTokens(t *testing.T) {
	t.Parallel()
	alice, bob := "alice-token-0123456789abcdef0123", "bob-token-0123456789abcdef0123456"
	a, err := LoadAuth(AuthConfig{OperatorToken: opTok, Callers: []config.CallerToken{
		{Name: "alice", Role: "operator", Token: alice}, {Name: "bob", Role: "reader", Token: bob}}})
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]Caller{
		alice: {Token: "alice", Role: controlv1.RoleOperator},
		bob:   {Token: "bob", Role: controlv1.RoleReader},
		opTok: {Token: "operator-token", Role: controlv1.RoleOperator},
	} {
		ctx, err := a.authenticate(incoming(token))
		if err != nil {
			t.Fatalf("%s refused: %v", want.Token, err)
		}
		if c, _ := CallerFrom(ctx); c != want || CallerName(ctx) != want.Token {
			t.Errorf("caller %+v (%q), want %+v", c, CallerName(ctx), want)
		}
	}
	if d := a.describe(); !strings.Contains(d, "operator token of alice") || strings.Contains(d, alice) {
		t.Errorf("describe = %q", d)
	}

	for _, tc := range []struct {
		name    string
		cfg     AuthConfig
		wantErr string
	}{
		{"a named operator is an operator credential", AuthConfig{Callers: []config.CallerToken{{Name: "alice", Role: "operator", Token: alice}}}, ""},
		{"named readers only", AuthConfig{Callers: []config.CallerToken{{Name: "bob", Role: "reader", Token: bob}}}, "no operator credential"},
		{"a named token equal to the operator token", AuthConfig{OperatorToken: alice, Callers: []config.CallerToken{{Name: "alice", Role: "reader", Token: alice}}}, "same token"},
		{"two names, one token", AuthConfig{Callers: []config.CallerToken{{Name: "a", Role: "operator", Token: alice}, {Name: "b", Role: "operator", Token: alice}}}, "same token"},
		{"a short named token", AuthConfig{Callers: []config.CallerToken{{Name: "alice", Role: "operator", Token: "short"}}}, EnvTokens + " (alice) is 5 characters"},
		{"a reserved name", AuthConfig{Callers: []config.CallerToken{{Name: "operator-token", Role: "operator", Token: alice}}}, "server's own"},
	} {
		_, err := LoadAuth(tc.cfg)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: LoadAuth = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
