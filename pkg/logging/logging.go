// Package logging builds the JSON slog logger every service writes to stdout.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/msgexchange/msgexchange/pkg/secret"
)

// New returns a JSON logger at the level named by level (debug, info, warn, error; default
// info), tagged with the service name. Every secret given (tokens, connection strings: only
// their password) is masked wherever it would appear in a line, the message and errors
// included, so no code path can log a credential by accident.
func New(w io.Writer, service, level string, secrets ...string) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: l}
	if len(secrets) > 0 {
		red := secret.NewRedactor(secrets...)
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			switch a.Value.Kind() {
			case slog.KindString:
				a.Value = slog.StringValue(red.String(a.Value.String()))
			case slog.KindAny:
				if err, ok := a.Value.Any().(error); ok {
					a.Value = slog.StringValue(red.String(err.Error()))
				} else if s, ok := a.Value.Any().(fmt.Stringer); ok {
					a.Value = slog.StringValue(red.String(s.String()))
				}
			}
			return a
		}
	}
	return slog.New(slog.NewJSONHandler(w, opts)).With("service", service)
}
