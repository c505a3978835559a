package rulecheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/tools/internal/repo"
)

// rpcDocs are the pages an operator looks up a control RPC and its role in. Each holds one
// table between the rpcTableBegin and rpcTableEnd markers whose first column is the RPC and
// whose second is the role it needs.
var rpcDocs = []string{"README.md", "docs/security.md", "docs/operations.md"}

const (
	rpcTableBegin = "<!-- rpc-roles:begin -->"
	rpcTableEnd   = "<!-- rpc-roles:end -->"
)

var rpcRow = regexp.MustCompile("^\\|\\s*`([A-Za-z]+)`\\s*\\|\\s*([a-z]+)\\s*\\|")

// serviceRoles is every method of the control service, from the generated descriptor, with the
// role the server's table (roles.go) makes it need.
func serviceRoles(t *testing.T) map[string]string {
	t.Helper()
	svc := controlv1.File_msgx_control_v1_control_proto.Services().ByName("ControlService")
	if svc == nil {
		t.Fatal("the control proto has no ControlService")
	}
	out := map[string]string{}
	methods := svc.Methods()
	for i := range methods.Len() {
		name := string(methods.Get(i).Name())
		out[name] = controlv1.RequiredRole("/" + controlv1.ControlService_ServiceDesc.ServiceName + "/" + name).String()
	}
	if out["GetStatus"] != controlv1.RoleReader.String() {
		t.Fatalf("GetStatus needs %s; the full method names do not match roles.go's", out["GetStatus"])
	}
	return out
}

// checkRPCTable reports what the doc's RPC table gets wrong against want (method → role): a
// missing table, an RPC missing, listed twice or unknown, and a role that is not the server's.
func checkRPCTable(doc, text string, want map[string]string) []string {
	begin := strings.Index(text, rpcTableBegin)
	end := strings.Index(text, rpcTableEnd)
	if begin < 0 || end < begin {
		return []string{fmt.Sprintf("%s: no RPC table between %q and %q", doc, rpcTableBegin, rpcTableEnd)}
	}
	var problems []string
	seen := map[string]bool{}
	for line := range strings.SplitSeq(text[begin:end], "\n") {
		m := rpcRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		name, role := m[1], m[2]
		need, ok := want[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: lists %s, which the control service does not have", doc, name))
		case seen[name]:
			problems = append(problems, fmt.Sprintf("%s: lists %s twice", doc, name))
		case role != need:
			problems = append(problems, fmt.Sprintf("%s: lists %s under the role %s; roles.go makes it need %s", doc, name, role, need))
		}
		seen[name] = true
	}
	var missing []string
	for name := range want {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	for _, name := range missing {
		problems = append(problems, fmt.Sprintf("%s: omits %s (role %s)", doc, name, want[name]))
	}
	return problems
}

// TestDocsListEveryRPCWithItsRole keeps the three RPC tables in step with the service: every
// method of the descriptor, once, under the role the server authorises it with.
func TestDocsListEveryRPCWithItsRole(t *testing.T) {
	t.Parallel()
	want := serviceRoles(t)
	if len(want) < 20 {
		t.Fatalf("the descriptor names %d methods; the control service has more", len(want))
	}
	root := repo.Root(t)
	for _, doc := range rpcDocs {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range checkRPCTable(doc, string(text), want) {
			t.Error(p)
		}
	}
}

// TestCheckRPCTableFindsEachDefect plants each defect the check looks for.
func TestCheckRPCTableFindsEachDefect(t *testing.T) {
	t.Parallel()
	want := map[string]string{"GetStatus": "reader", "Replay": "operator", "Reopen": "operator"}
	table := func(rows ...string) string {
		return "intro\n" + rpcTableBegin + "\n| RPC | role | what |\n|---|---|---|\n" +
			strings.Join(rows, "\n") + "\n" + rpcTableEnd + "\n"
	}
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"complete", table("| `GetStatus` | reader | x |", "| `Replay` | operator | y |", "| `Reopen` | operator | z |"), nil},
		{"no table", "| `GetStatus` | reader | x |\n", []string{"doc.md: no RPC table"}},
		{"omitted", table("| `GetStatus` | reader | x |", "| `Replay` | operator | y |"), []string{"doc.md: omits Reopen (role operator)"}},
		{"wrong role", table("| `GetStatus` | reader | x |", "| `Replay` | reader | y |", "| `Reopen` | operator | z |"),
			[]string{"doc.md: lists Replay under the role reader; roles.go makes it need operator"}},
		{"unknown", table("| `GetStatus` | reader | x |", "| `Replay` | operator | y |", "| `Reopen` | operator | z |", "| `Frobnicate` | operator | w |"),
			[]string{"doc.md: lists Frobnicate, which the control service does not have"}},
		{"twice", table("| `GetStatus` | reader | x |", "| `Replay` | operator | y |", "| `Reopen` | operator | z |", "| `Replay` | operator | again |"),
			[]string{"doc.md: lists Replay twice"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := checkRPCTable("doc.md", tc.text, want)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %q, want one starting %q", got[i], tc.want[i])
				}
			}
		})
	}
}
