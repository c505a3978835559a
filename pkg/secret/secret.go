// Package secret keeps credentials out of log lines and error texts: it finds the password in
// a connection string of any of the forms the services take (URL, MySQL DSN, PostgreSQL
// keyword/value), even one that does not parse, and masks known secrets in text while keeping
// the rest (host, port, database) readable.
package secret

import (
	"net/url"
	"strings"
)

// Mask replaces a secret in text.
const Mask = "xxxxx"

// minLen is the shortest secret masked: masking a one- or two-letter password would garble
// every line it occurs in, and such a password protects nothing anyway.
const minLen = 3

// Password returns the password in a connection string, "" when it has none: the password of a
// URL ("redis://:pw@host/0", "postgres://u:pw@host/db"), of a MySQL DSN ("u:pw@tcp(host)/db"),
// or the password keyword of a PostgreSQL keyword/value string ("host=h password='p w'"). It
// does not need the string to be valid: a DSN that fails to parse is exactly the one that ends
// up in an error.
func Password(dsn string) string {
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		// The authority ends at the first '/' after the last '@' (URL passwords may hold
		// '/' only escaped); the password follows the first ':' of the user info.
		at := strings.LastIndex(rest, "@")
		if at < 0 {
			return ""
		}
		if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
			return pw
		}
		return ""
	}
	if i := strings.Index(dsn, "password="); i >= 0 && (i == 0 || dsn[i-1] == ' ') {
		v := dsn[i+len("password="):]
		if strings.HasPrefix(v, "'") {
			if end := strings.Index(v[1:], "'"); end >= 0 {
				return v[1 : end+1]
			}
			return v[1:]
		}
		pw, _, _ := strings.Cut(v, " ")
		return pw
	}
	// go-sql-driver/mysql: [user[:password]@][net[(addr)]]/dbname, split at the last '@'.
	if at := strings.LastIndex(dsn, "@"); at >= 0 {
		if _, pw, ok := strings.Cut(dsn[:at], ":"); ok {
			return pw
		}
	}
	return ""
}

// Redactor masks a fixed set of secrets in text. The zero value and nil mask nothing.
type Redactor struct {
	r *strings.Replacer
}

// NewRedactor masks each value, and for connection strings their password in the forms it may
// appear in (as written, URL-decoded, URL-encoded). A value that is itself a connection string
// keeps everything but its password readable.
func NewRedactor(values ...string) *Redactor {
	seen := map[string]bool{}
	var pairs []string
	add := func(s string) {
		if len(s) >= minLen && !seen[s] {
			seen[s] = true
			pairs = append(pairs, s, Mask)
		}
	}
	for _, v := range values {
		if pw := Password(v); pw != "" {
			add(pw)
			if d, err := url.PathUnescape(pw); err == nil {
				add(d)
			}
			add(url.QueryEscape(pw))
			continue
		}
		add(v)
	}
	if len(pairs) == 0 {
		return &Redactor{}
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Error returns err with its text masked; errors.Is and errors.As still see the original
// chain.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := r.String(msg); red != msg {
		return &redacted{msg: red, err: err}
	}
	return err
}

// DSNError masks the password of dsn in err: the one call for wrapping a connection string's
// parse or connect error.
func DSNError(dsn string, err error) error { return NewRedactor(dsn).Error(err) }

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
