package pgtest

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// MultiHostURL is dsn (a URL or a keyword/value string of one server) as a multi-host URL
// that lists the servers at before first, then dsn's own, with target_session_attrs=read-write:
// the form a platform team hands out for a primary with standbys (docs/environment.md).
func MultiHostURL(t testing.TB, dsn string, before ...string) string {
	t.Helper()
	cfg := parse(t, dsn)
	u := &url.URL{Scheme: "postgres", User: url.User(cfg.User), Path: "/" + cfg.Database}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	u.Host = strings.Join(append(append([]string(nil), before...), net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))), ",")
	q := url.Values{"sslmode": {"disable"}, "target_session_attrs": {"read-write"}, "connect_timeout": {"5"}}
	u.RawQuery = q.Encode()
	return u.String()
}

// MultiHostKeywords is MultiHostURL in keyword/value form: host=a,b port=p1,p2.
func MultiHostKeywords(t testing.TB, dsn string, before ...string) string {
	t.Helper()
	cfg := parse(t, dsn)
	var hosts, ports []string
	for _, hp := range append(append([]string(nil), before...), net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))) {
		h, p, err := net.SplitHostPort(hp)
		if err != nil {
			t.Fatalf("pgtest: host %q: %v", hp, err)
		}
		hosts, ports = append(hosts, h), append(ports, p)
	}
	s := fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable target_session_attrs=read-write connect_timeout=5",
		strings.Join(hosts, ","), strings.Join(ports, ","), cfg.User, cfg.Database)
	if cfg.Password != "" {
		s += " password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(cfg.Password) + "'"
	}
	return s
}

func parse(t testing.TB, dsn string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("pgtest: parse dsn: %v", err)
	}
	return cfg
}
