// Package logging builds the JSON slog logger every service writes to stdout.
package logging

import (
	"io"
	"log/slog"
	"strings"
)

// New returns a JSON logger at the level named by level (debug, info, warn, error; default
// info), tagged with the service name.
func New(w io.Writer, service, level string) *slog.Logger {
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
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})).With("service", service)
}
