package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Environment variables of the control API's authentication, named in errors. The token file
// is a mounted Kubernetes or compose secret, so the token never appears in the pod spec or the
// process environment; insecure lets the server start without any token (development only).
const (
	EnvTokenFile = "MSGX_CONTROL_TOKEN_FILE"
	EnvInsecure  = "MSGX_CONTROL_INSECURE"
)

// Auth is how callers of the control API are authenticated: a bearer token, or nothing when
// Insecure (which only a deliberate MSGX_CONTROL_INSECURE=true produces).
type Auth struct {
	// tokenSum is the SHA-256 of the token. Comparing digests in constant time reveals neither
	// the token's bytes nor its length through timing.
	tokenSum [sha256.Size]byte
	hasToken bool
	Insecure bool
	// Source says where the token came from, for the start-up log line (never the token).
	Source string
}

// LoadAuth decides the authentication from the shared configuration: the token
// (MSGX_CONTROL_TOKEN), a file holding it (MSGX_CONTROL_TOKEN_FILE) and the insecure switch
// (MSGX_CONTROL_INSECURE). Setting both a token and a token file is refused as ambiguous; no
// token at all is refused unless insecure is set, so a forgotten secret cannot silently open
// the API.
func LoadAuth(configToken, file string, insecure bool) (Auth, error) {
	var token, source string
	switch {
	case configToken != "" && file != "":
		return Auth{}, fmt.Errorf("both MSGX_CONTROL_TOKEN and %s are set: set only one", EnvTokenFile)
	case configToken != "":
		token, source = configToken, "MSGX_CONTROL_TOKEN"
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return Auth{}, fmt.Errorf("control token file (%s): %w", EnvTokenFile, err)
		}
		// Secrets written with echo or an editor end in a newline that is not part of the token.
		token, source = strings.TrimSpace(string(b)), EnvTokenFile+"="+file
		if token == "" {
			return Auth{}, fmt.Errorf("control token file %s (%s) is empty", file, EnvTokenFile)
		}
	case insecure:
		return Auth{Insecure: true, Source: EnvInsecure + "=true"}, nil
	default:
		return Auth{}, fmt.Errorf("no control token: set MSGX_CONTROL_TOKEN or %s (or %s=true for an unauthenticated development server)",
			EnvTokenFile, EnvInsecure)
	}
	if strings.ContainsAny(token, " \t\r\n") {
		// A bearer token travels in one header value after "Bearer "; whitespace inside it
		// would never match what a client sends.
		return Auth{}, fmt.Errorf("control token from %s contains whitespace", source)
	}
	if insecure {
		// A token always wins: MSGX_CONTROL_INSECURE only permits running without one.
		source += " (" + EnvInsecure + " ignored: a token is set)"
	}
	return Auth{tokenSum: sha256.Sum256([]byte(token)), hasToken: true, Source: source}, nil
}

// TokenAuth returns an Auth that accepts exactly token, for tests and embedding. An empty
// token gives an Auth that the server refuses, like no token at all.
func TokenAuth(token string) Auth {
	return Auth{tokenSum: sha256.Sum256([]byte(token)), hasToken: token != "", Source: "TokenAuth"}
}

var errBadToken = status.Error(codes.Unauthenticated, "invalid bearer token")

// authenticate is the go-grpc-middleware auth function: the call must carry
// "authorization: Bearer <token>" with the configured token. Every failure is Unauthenticated
// and says no more than which part was wrong.
func (a Auth) authenticate(ctx context.Context) (context.Context, error) {
	if a.Insecure {
		return withCaller(ctx, "none"), nil
	}
	token, err := auth.AuthFromMD(ctx, "bearer")
	if err != nil {
		return nil, err // already Unauthenticated
	}
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) != 1 {
		return nil, errBadToken
	}
	return withCaller(ctx, tokenFingerprint(a.tokenSum)), nil
}

// validate catches an Auth without a token (a zero value, TokenAuth("")): it would accept an
// empty bearer token rather than refuse to start.
func (a Auth) validate() error {
	if !a.Insecure && !a.hasToken {
		return errors.New("server: Auth has neither a token nor Insecure; build it with LoadAuth or TokenAuth")
	}
	return nil
}
