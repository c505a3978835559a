package logging

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A credential never reaches a line, whatever carries it: the message, a string, an error.
func TestSecretsAreMasked(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "test", "info", "redis://:S3cretRD@127.0.0.1:notaport/0", "tok-en-value")
	err := fmt.Errorf("redis url: %w", errors.New(`parse "redis://:S3cretRD@127.0.0.1:notaport/0": invalid port`))
	log.Error("start-up failed with tok-en-value", "err", err, "dsn", "redis://:S3cretRD@h/0")
	out := buf.String()
	if strings.Contains(out, "S3cretRD") || strings.Contains(out, "tok-en-value") {
		t.Errorf("a secret reached the log: %s", out)
	}
	if !strings.Contains(out, "127.0.0.1:notaport") {
		t.Errorf("the rest of the error was masked too: %s", out)
	}
}
