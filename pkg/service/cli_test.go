package service

import (
	"bytes"
	"strings"
	"testing"
)

// TestCommandArgs: --help and --version answer at once, an unknown flag or an argument a
// service does not take is a usage error, and a subcommand is left to the binary.
func TestCommandArgs(t *testing.T) {
	svc := ServiceCommand("pump")
	ctl := Command{Name: "msgx-control", Commands: [][2]string{{"migrate", "apply the schema"}}}
	for _, c := range []struct {
		cmd         Command
		args        []string
		code        int
		exit        bool
		out, errOut string
	}{
		{svc, nil, 0, false, "", ""},
		{svc, []string{"--help"}, 0, true, "usage: msgx-pump", ""},
		{svc, []string{"-h"}, 0, true, "docs/environment.md", ""},
		{svc, []string{"--version"}, 0, true, "msgx-pump version ", ""},
		{svc, []string{"--version", "x"}, 2, true, "", "takes no arguments"},
		{svc, []string{"--verbose"}, 2, true, "", `unknown flag "--verbose"`},
		{svc, []string{"migrate"}, 2, true, "", `unexpected argument "migrate"`},
		{ctl, []string{"migrate", "status"}, 0, false, "", ""},
		{ctl, []string{"help"}, 0, true, "  migrate  apply the schema", ""},
		{ctl, []string{"-x"}, 2, true, "", "usage: msgx-control"},
	} {
		var out, errOut bytes.Buffer
		code, exit := c.cmd.Args(c.args, &out, &errOut)
		if code != c.code || exit != c.exit || !strings.Contains(out.String(), c.out) || !strings.Contains(errOut.String(), c.errOut) ||
			(c.out == "" && out.Len() > 0) || (c.errOut == "" && errOut.Len() > 0) {
			t.Errorf("%s %v: code %d exit %v, stdout %q, stderr %q", c.cmd.Name, c.args, code, exit, out.String(), errOut.String())
		}
	}
}
