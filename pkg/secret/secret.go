// Package secret keeps credentials out of log lines and error texts: it finds the password in
// a connection string of any of the forms the services take (URL, MySQL DSN, PostgreSQL
// keyword/value), even one that does not parse, and masks known secrets in text while keeping
// the rest (host, port, database) readable.
package secret

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Mask replaces a secret in text.
const Mask = "xxxxx"

// minLen is the shortest secret masked: masking a one- or two-letter password would garble
// every line it occurs in, and such a password protects nothing anyway. It bounds the pieces of
// a password too (below).
const minLen = 3

// MinTokenLength is the shortest bearer token a service accepts (MSGX_CONTROL_TOKEN,
// MSGX_CONTROL_READER_TOKEN, MSGX_HTTP_TOKEN): 32 random characters are beyond offline guessing,
// and a short one is refused at start-up naming its variable.
const MinTokenLength = 32

// urlDelims are the characters a URL parser splits at: a password holding one unescaped is cut
// there, and the parser's error quotes a piece of it ("invalid port \":Sec\" after host", the
// URL without its "#fragment", "invalid URL escape \"%re\"").
const urlDelims = "/#?@:%[] "

// Password returns the password in a connection string, "" when it has none: the password of a
// URL ("redis://:pw@host/0", "postgres://u:pw@host/db"), of a MySQL DSN ("u:pw@tcp(host)/db"),
// or the password keyword of a PostgreSQL keyword/value string ("host=h password='p w'"). It
// does not need the string to be valid: a DSN that fails to parse is exactly the one that ends
// up in an error.
func Password(dsn string) string {
	start, end := passwordSpan(dsn)
	return dsn[start:end]
}

// passwordSpan is where Password finds the password in dsn (start == end when it has none).
func passwordSpan(dsn string) (start, end int) {
	if i := strings.Index(dsn, "://"); i >= 0 {
		// The user info ends at the last '@' (URL parsers split there too, so a password may
		// hold '@'); the password follows the first ':' of the user info.
		base := i + len("://")
		at := strings.LastIndex(dsn[base:], "@")
		if at < 0 {
			return 0, 0
		}
		if c := strings.Index(dsn[base:base+at], ":"); c >= 0 {
			return base + c + 1, base + at
		}
		return 0, 0
	}
	if i := strings.Index(dsn, "password="); i >= 0 && (i == 0 || dsn[i-1] == ' ') {
		s := i + len("password=")
		if strings.HasPrefix(dsn[s:], "'") {
			if end := strings.Index(dsn[s+1:], "'"); end >= 0 {
				return s + 1, s + 1 + end
			}
			return s + 1, len(dsn)
		}
		if end := strings.Index(dsn[s:], " "); end >= 0 {
			return s, s + end
		}
		return s, len(dsn)
	}
	// go-sql-driver/mysql: [user[:password]@][net[(addr)]]/dbname, split at the last '@'.
	if at := strings.LastIndex(dsn, "@"); at >= 0 {
		if c := strings.Index(dsn[:at], ":"); c >= 0 {
			return c + 1, at
		}
	}
	return 0, 0
}

// WithoutPassword returns dsn with its password replaced by Mask, and whether it had one.
func WithoutPassword(dsn string) (string, bool) {
	start, end := passwordSpan(dsn)
	if start == end {
		return dsn, false
	}
	return dsn[:start] + Mask + dsn[end:], true
}

// Redactor masks a fixed set of secrets in text. The zero value and nil mask nothing.
type Redactor struct {
	re *regexp.Regexp
}

// NewRedactor masks each value, and for connection strings their password: whole and every
// piece of it between the characters URL parsers split at, each in any URL encoding (every
// character as itself or %XX in either case, a space also as '+'), as written and decoded. A
// value that is itself a connection string keeps everything but its password readable.
func NewRedactor(values ...string) *Redactor {
	seen := map[string]bool{}
	var forms []string
	add := func(s string) {
		// Blanks around a value are not part of it (the services trim what they read), and a
		// value of blanks alone would mask every run of spaces.
		if s = strings.TrimSpace(s); len(s) >= minLen && !seen[s] {
			seen[s] = true
			forms = append(forms, s)
		}
	}
	for _, v := range values {
		pw := Password(v)
		if pw == "" {
			add(v)
			continue
		}
		// The pieces of the decoded form: an encoded delimiter splits nothing, and the pieces of
		// "p%2Fw" would be "2Fw".
		d := unescape(pw)
		add(pw)
		add(d)
		for _, piece := range strings.FieldsFunc(d, func(r rune) bool { return strings.ContainsRune(urlDelims, r) }) {
			add(piece)
		}
	}
	if len(forms) == 0 {
		return &Redactor{}
	}
	// Longest first: the alternation takes the first form that matches at a position, so the
	// whole password wins over its pieces.
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	alts := make([]string, len(forms))
	for i, f := range forms {
		alts[i] = encodedPattern(f)
	}
	return &Redactor{re: regexp.MustCompile(strings.Join(alts, "|"))}
}

// unescape decodes a URL-encoded password, leaving a malformed one as it is.
func unescape(s string) string {
	if d, err := url.PathUnescape(s); err == nil {
		return d
	}
	return s
}

// encodedPattern matches s with each of its bytes written as itself or percent-encoded.
func encodedPattern(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		fmt.Fprintf(&b, "(?:%s|%%(?i:%02x))", regexp.QuoteMeta(string(c)), c)
		if c == ' ' {
			b.WriteString("|\\+")
		}
	}
	return "(?:" + b.String() + ")"
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if r == nil || r.re == nil {
		return s
	}
	return r.re.ReplaceAllLiteralString(s, Mask)
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
// connect error.
func DSNError(dsn string, err error) error { return NewRedactor(dsn).Error(err) }

// ErrPasswordSyntax is the parse error of a connection string whose password, and nothing else,
// does not parse.
var ErrPasswordSyntax = errors.New("the password does not parse: in a URL write / # ? @ : % and spaces URL-encoded (%2F %23 %3F %40 %3A %25 %20)")

// ParseError is the error to report for dsn, which parse refused with err. A parser quotes a
// piece of a password it split at a delimiter, so masking its error is not enough: this is
// parse's error for dsn with the password replaced by Mask, which holds no part of the password,
// or ErrPasswordSyntax when that copy parses. It does not wrap err, so no caller can reach the
// original text.
func ParseError(dsn string, err error, parse func(string) error) error {
	if err == nil {
		return nil
	}
	masked, ok := WithoutPassword(dsn)
	if !ok {
		return DSNError(dsn, err)
	}
	if merr := parse(masked); merr != nil {
		return errors.New(NewRedactor(dsn).String(merr.Error()))
	}
	return ErrPasswordSyntax
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
