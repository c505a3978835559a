package secret

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
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

// A password holding a character URL parsers split at is masked whole, in pieces and in every
// URL encoding, and the parse error of its connection string holds no piece of it.
func TestPasswordPiecesAndEncodings(t *testing.T) {
	t.Parallel()
	for _, pw := range []string{"Sec/retPart1", "Sec#retPart2", "Sec?retPart3", "Sec@retPart4", "Sec%retPart5", "12345/retPart6"} {
		dsn := "redis://:" + pw + "@127.0.0.1:6379/0"
		r := NewRedactor(dsn)
		pieces := strings.FieldsFunc(pw, func(r rune) bool { return strings.ContainsRune(urlDelims, r) })
		for _, in := range append([]string{pw, url.PathEscape(pw), url.QueryEscape(pw), strings.NewReplacer("%2F", "%2f", "%3F", "%3f").Replace(url.QueryEscape(pw))}, pieces...) {
			if out := r.String("at " + in + " end"); out != "at xxxxx end" {
				t.Errorf("%q: String(%q) = %q", pw, in, out)
			}
		}
		_, perr := redis.ParseURL(dsn)
		if perr == nil {
			continue
		}
		err := ParseError(dsn, perr, func(s string) error { _, err := redis.ParseURL(s); return err })
		for _, piece := range append(pieces, "%re") {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("%q: ParseError = %q holds %q (parser said %q)", pw, err, piece, perr)
			}
		}
		t.Logf("%q: parser said %q, reported %q", pw, perr, err)
	}
	// A connection string that is wrong elsewhere keeps the parser's reason.
	dsn := "redis://:Sec/ret@127.0.0.1:notaport/0"
	_, perr := redis.ParseURL(dsn)
	err := ParseError(dsn, perr, func(s string) error { _, err := redis.ParseURL(s); return err })
	if !strings.Contains(err.Error(), "notaport") || strings.Contains(err.Error(), "Sec") || errors.Is(err, ErrPasswordSyntax) {
		t.Errorf("ParseError = %q", err)
	}
	if w, ok := WithoutPassword("u:p@ss@tcp(h:3306)/db"); !ok || w != "u:xxxxx@tcp(h:3306)/db" {
		t.Errorf("WithoutPassword = %q", w)
	}
}
