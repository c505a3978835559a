package config

import (
	"fmt"
	"regexp"
	"strings"
)

// CallerToken is one entry of control.tokens: a bearer token, the role it grants and the
// caller's name the audit shows for it.
type CallerToken struct {
	Name  string
	Role  string // "operator" or "reader"
	Token string
}

// callerName is what a caller's name may hold: it lands in audit fields, log lines and
// requested_by, so no spaces, separators or control characters.
var callerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// ParseCallerTokens parses control.tokens: entries "name:role=token" (role operator or
// reader), separated by ";" or new lines, so the value is one environment variable
// ("alice:operator=…;grafana:reader=…") or a file of lines (MSGX_CONTROL_TOKENS_FILE) where
// blank lines and lines starting with "#" are skipped. Names are unique; the tokens' own rules
// (length, distinctness) are the server's (server.LoadAuth).
func ParseCallerTokens(v string) ([]CallerToken, error) {
	var out []CallerToken
	seen := map[string]bool{}
	for i, line := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == '\n' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		who, token, ok := strings.Cut(line, "=")
		name, role, ok2 := strings.Cut(who, ":")
		name, role, token = strings.TrimSpace(name), strings.TrimSpace(role), strings.TrimSpace(token)
		// The entry is never quoted: it holds a token.
		switch {
		case !ok || !ok2 || token == "":
			return nil, fmt.Errorf("control.tokens entry %d is not name:role=token (e.g. alice:operator=<token>)", i+1)
		case !callerName.MatchString(name):
			return nil, fmt.Errorf("control.tokens entry %d: name %q: letters, digits, '.', '_', '@', '-', at most 64, starting with a letter or digit", i+1, name)
		case role != "operator" && role != "reader":
			return nil, fmt.Errorf("control.tokens entry %d (%s): role %q: want operator or reader", i+1, name, role)
		case seen[name]:
			return nil, fmt.Errorf("control.tokens: the name %q is given twice", name)
		}
		seen[name] = true
		out = append(out, CallerToken{Name: name, Role: role, Token: token})
	}
	return out, nil
}
