package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestLoadAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := write("token", "file-token\n")
	empty := write("empty", "\n")
	spaced := write("spaced", "two words\n")

	tests := []struct {
		name      string
		token     string
		env       map[string]string
		wantErr   string // substring; empty means success
		insecure  bool
		accepts   string // a token the result accepts
		rejects   string
		sourceHas string
	}{
		{name: "token from config", token: "cfg-token", accepts: "cfg-token", rejects: "file-token", sourceHas: "MSGX_CONTROL_TOKEN"},
		{name: "token file, newline trimmed", env: map[string]string{EnvTokenFile: secret}, accepts: "file-token",
			rejects: "file-token\n", sourceHas: secret},
		{name: "both is ambiguous", token: "cfg-token", env: map[string]string{EnvTokenFile: secret}, wantErr: "set only one"},
		{name: "missing file", env: map[string]string{EnvTokenFile: filepath.Join(dir, "nope")}, wantErr: "no such file"},
		{name: "empty file", env: map[string]string{EnvTokenFile: empty}, wantErr: "is empty"},
		{name: "whitespace inside", env: map[string]string{EnvTokenFile: spaced}, wantErr: "whitespace"},
		{name: "nothing refuses", wantErr: EnvInsecure + "=true"},
		{name: "insecure false refuses", env: map[string]string{EnvInsecure: "false"}, wantErr: "no control token"},
		{name: "insecure", env: map[string]string{EnvInsecure: "true"}, insecure: true},
		{name: "a token beats insecure", token: "cfg-token", env: map[string]string{EnvInsecure: "true"},
			accepts: "cfg-token", rejects: "", sourceHas: "ignored"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := LoadAuth(tc.token, tc.env[EnvTokenFile], tc.env[EnvInsecure] == "true")
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
			if !strings.Contains(a.Source, tc.sourceHas) {
				t.Errorf("Source = %q, want it to mention %q", a.Source, tc.sourceHas)
			}
			if strings.Contains(a.Source, "cfg-token") || strings.Contains(a.Source, "file-token") {
				t.Errorf("Source %q reveals the token", a.Source)
			}
			if tc.insecure {
				if _, err := a.authenticate(context.Background()); err != nil {
					t.Errorf("insecure auth refused a call without a token: %v", err)
				}
				return
			}
			if _, err := a.authenticate(incoming(tc.accepts)); err != nil {
				t.Errorf("refused the configured token: %v", err)
			}
			if _, err := a.authenticate(incoming(tc.rejects)); status.Code(err) != codes.Unauthenticated {
				t.Errorf("token %q: %v, want Unauthenticated", tc.rejects, err)
			}
			if _, err := a.authenticate(context.Background()); status.Code(err) != codes.Unauthenticated {
				t.Errorf("no token: %v, want Unauthenticated", err)
			}
		})
	}
}

func TestAuthWithoutTokenIsRefused(t *testing.T) {
	t.Parallel()
	for name, a := range map[string]Auth{"zero value": {}, "TokenAuth(\"\")": TokenAuth("")} {
		if err := a.validate(); err == nil {
			t.Errorf("%s: validate passed; an Auth without a token would accept an empty bearer token", name)
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
