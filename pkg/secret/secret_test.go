package secret

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dsn, want string }{
		{"redis://:S3cretRD@127.0.0.1:notaport/0", "S3cretRD"},
		{"redis://127.0.0.1:6379/0", ""},
		{"redis://user:p%40ss@host:6379/0", "p%40ss"},
		{"postgres://msgx:pg-Pw@db:5432/msgx?sslmode=disable", "pg-Pw"},
		{"postgres://msgx@db:5432/msgx", ""},
		{"msgx:my-Pw@tcp(mysql:3306)/inbox?parseTime=true", "my-Pw"},
		{"msgx:p@ss@tcp(mysql:3306)/inbox", "p@ss"},
		{"root@tcp(127.0.0.1:3306)/x", ""},
		{"host=db user=msgx password=kv-Pw dbname=msgx", "kv-Pw"},
		{"host=db password='with space' dbname=msgx", "with space"},
		{"", ""},
	} {
		if got := Password(tc.dsn); got != tc.want {
			t.Errorf("Password(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	dsn := "redis://:S3cretRD@127.0.0.1:notaport/0"
	_, perr := url.Parse(dsn)
	err := fmt.Errorf("redis url: %w", perr)
	r := NewRedactor(dsn, "control-token-value", "postgres://u:p%2Fw@h/db", "ab")
	got := r.Error(err)
	if strings.Contains(got.Error(), "S3cretRD") || !strings.Contains(got.Error(), "127.0.0.1") {
		t.Errorf("redacted error = %q", got)
	}
	if !errors.Is(got, perr) {
		t.Error("the redacted error lost its chain")
	}
	for in, want := range map[string]string{
		"token control-token-value here": "token xxxxx here",
		"pw p/w and p%2Fw":               "pw xxxxx and xxxxx",
		"ab stays":                       "ab stays", // too short to mask
	} {
		if out := r.String(in); out != want {
			t.Errorf("String(%q) = %q, want %q", in, out, want)
		}
	}
	var nilR *Redactor
	if nilR.String("x") != "x" || nilR.Error(nil) != nil {
		t.Error("nil redactor")
	}
}
