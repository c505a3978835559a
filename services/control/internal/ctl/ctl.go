// Package ctl is msgxctl, the operator's command line for msgx.control.v1.ControlService.
//
// The commands are not written by hand: they are built at start-up from the service's
// protobuf descriptor (compiled into the binary with the generated code), one subcommand per
// RPC and one flag per request field. An RPC or a field added to control.proto is therefore
// reachable from the CLI as soon as the binary is rebuilt, and the CLI cannot offer a flag the
// API does not have.
package ctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/msgexchange/msgexchange/pkg/buildinfo"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// Exit codes. A script can tell a usage mistake from a local failure and, for a call the
// server answered with an error, which gRPC code it was: ExitRPC + the code (see
// docs/control.md for the table).
const (
	ExitOK    = 0
	ExitLocal = 1 // the call could not be made: token file, TLS files, output
	ExitUsage = 2 // unknown command or flag, a flag value that does not parse, an invalid request
	// ExitStandby: a standby control instance answered (UNAVAILABLE with the ErrorInfo reason
	// STANDBY) and refused the change; the message names the active instance. It is not 24,
	// which means the server could not be reached: a script retries that one, but sends this
	// one elsewhere (issue #56, finding 5).
	ExitStandby = 3
	ExitRPC     = 10
)

// standbyReason is the ErrorInfo reason and domain a standby control instance refuses with.
const (
	standbyReason = "STANDBY"
	standbyDomain = "msgx.control.v1"
)

// exitCodeOf is the exit code of the server's answer st: ExitStandby for a standby's refusal,
// else ExitRPC + its code.
func exitCodeOf(st *status.Status) int {
	if st.Code() == codes.Unavailable {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == standbyReason && info.GetDomain() == standbyDomain {
				return ExitStandby
			}
		}
	}
	return ExitCode(st.Code())
}

// ExitCode is the process exit code for an RPC error with code c.
func ExitCode(c codes.Code) int { return ExitRPC + int(c) }

// Environment variables that supply flag defaults, so a token never has to be on the command
// line (where ps shows it).
const (
	EnvAddr      = "MSGXCTL_ADDR"
	EnvToken     = "MSGXCTL_TOKEN"
	EnvTokenFile = "MSGXCTL_TOKEN_FILE"
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

func localErr(err error) error { return &exitError{code: ExitLocal, err: err} }

// options are the global flags.
type options struct {
	addr, token, tokenFile string
	ca, cert, key          string
	serverName             string
	insecure               bool
	output                 string
	noHeaders              bool
	timeout                time.Duration
}

// Main runs msgxctl with args (without the program name) and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := Command(stdout)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintln(stderr, "msgxctl:", ee.err)
		return ee.code
	}
	// Whatever cobra itself refused (unknown command or flag, bad flag value) is usage.
	fmt.Fprintln(stderr, "msgxctl:", err)
	fmt.Fprintln(stderr, "Run 'msgxctl --help' for usage.")
	return ExitUsage
}

// Service is the API msgxctl drives.
func Service() protoreflect.ServiceDescriptor {
	return controlv1.File_msgx_control_v1_control_proto.Services().ByName("ControlService")
}

// Output formats of -o.
var outputFormats = []string{"table", "wide", "json", "yaml", "name"}

// Command builds the command tree from the service descriptor.
func Command(stdout io.Writer) *cobra.Command {
	o := &options{}
	root := &cobra.Command{
		Use:   "msgxctl",
		Short: "Operate msgexchange: look at the pipeline, messages and flights, and act on them",
		Long: "msgxctl calls the control API of msgexchange (" + string(Service().FullName()) + ").\n\n" +
			"Reads are served by any control instance; commands that change something only by the\n" +
			"active one (a standby answers UNAVAILABLE naming it, exit 3), and they are written to the\n" +
			"audit log under your token's name (control.tokens) with --comment, which a change needs\n" +
			"unless the server sets control.require-comment=false. Reads need the reader or the operator token, changes the operator token (a reader\n" +
			"token gets PERMISSION_DENIED, exit 17); each command's help says which.\n\n" +
			"Set the address and the token once per shell:\n" +
			"  export " + EnvAddr + "=control.example:9000\n" +
			"  export " + EnvTokenFile + "=/run/secrets/msgx-token\n\n" +
			"Exit codes: 0 ok, 1 local failure, 2 usage, 3 a standby answered (send the change to the\n" +
			"active instance it names), 10+N the server answered gRPC code N (e.g. 15 NOT_FOUND, also\n" +
			"when reopen or acknowledge-dead names a message that does not exist; 19\n" +
			"FAILED_PRECONDITION, 24 UNAVAILABLE: the server cannot be reached, 26 UNAUTHENTICATED).",
		Example: indent("# The pipeline at a glance\nmsgxctl get-status\n" +
			"# One message's story\nmsgxctl get-message 123456\n" +
			"# What needs an operator\nmsgxctl list-messages --state dead --all\n" +
			"# Tab completion of commands, flags and their values (bash; zsh and fish alike)\nsource <(msgxctl completion bash)"),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&o.addr, "addr", envOr(EnvAddr, "localhost:9000"), "the control API's address as host:port (env "+EnvAddr+")")
	pf.StringVar(&o.token, "token", os.Getenv(EnvToken), "the bearer token (env "+EnvToken+"; prefer --token-file, since ps shows flags)")
	pf.StringVar(&o.tokenFile, "token-file", os.Getenv(EnvTokenFile), "a file holding the bearer token (env "+EnvTokenFile+")")
	pf.StringVar(&o.ca, "ca", "", "a PEM CA bundle to verify the server's certificate (turns TLS on)")
	pf.StringVar(&o.cert, "cert", "", "a PEM client certificate for mTLS (turns TLS on; needs --key)")
	pf.StringVar(&o.key, "key", "", "the PEM private key of --cert")
	pf.StringVar(&o.serverName, "server-name", "", "the name to verify the server's certificate against (default: the host of --addr)")
	pf.BoolVar(&o.insecure, "insecure", false, "TLS without verifying the server's certificate (testing only)")
	pf.StringVarP(&o.output, "output", "o", "table", "output format: table (narrow), wide (every column, long text too), json, yaml, or name (IDs only, one a line)")
	pf.BoolVar(&o.noHeaders, "no-headers", false, "table and wide: print only the rows of a list, without its title, column headers and notes")
	pf.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for each answer (0: no limit)")
	for _, f := range []string{"ca", "cert", "key", "token-file"} {
		_ = root.MarkPersistentFlagFilename(f)
	}
	_ = root.RegisterFlagCompletionFunc("output", fixedChoices(outputFormats))
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return flagError(c, err) })

	methods := Service().Methods()
	for i := range methods.Len() {
		root.AddCommand(methodCommand(o, root, methods.Get(i), stdout))
	}
	root.AddCommand(versionCommand(stdout))
	return root
}

// indent sets examples off from the text, as kubectl and gh print them.
func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// versionCommand prints msgxctl's build, as the services' --version does.
func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Show msgxctl's version and commit",
		Example: indent("# This binary's build\nmsgxctl version"),
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(stdout, "msgxctl %s\n", buildinfo.Get())
			return wrapWrite(err)
		},
	}
}

// flagError says which flag was given what, and what it takes, without the parser's internals.
func flagError(cmd *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		f := iv.GetFlag()
		cause := iv.Unwrap().Error()
		switch f.Value.Type() {
		case "duration":
			cause = fmt.Sprintf("%q is not valid: expected a duration such as 30s, 2m or 1h30m (0: no limit)", iv.GetValue())
		case "bool":
			cause = fmt.Sprintf("%q is not valid: expected true or false", iv.GetValue())
		}
		return usageErr("--%s: %s", f.Name, cause)
	}
	return usageErr("%v ('%s --help' lists the flags)", err, cmd.CommandPath())
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// CommandName is the subcommand of an RPC: its name in kebab case (GetStatus → get-status).
func CommandName(md protoreflect.MethodDescriptor) string { return kebab(string(md.Name())) }

func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fullMethod is the method's name as the server's role table has it.
func fullMethod(md protoreflect.MethodDescriptor) string {
	return "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
}

func methodCommand(o *options, root *cobra.Command, md protoreflect.MethodDescriptor, stdout io.Writer) *cobra.Command {
	doc, _ := docOf(md)
	// The server's own table decides, so the help cannot promise a reader what the server
	// refuses.
	kind := "Reads only: needs the reader or the operator token; served by any control instance."
	if controlv1.Mutating(fullMethod(md)) {
		kind = "Changes state: needs the operator token; served by the active control instance only, and audited."
	}
	short := doc.Short
	if short == "" {
		short = "Call " + string(md.Name())
	}
	long := short + "."
	if doc.Long != "" {
		long = doc.Long
	}
	cmd := &cobra.Command{
		Use:     CommandName(md),
		Short:   short,
		Long:    long + "\n\n" + kind + "\nAPI: " + string(md.Parent().FullName()) + "/" + string(md.Name()) + " (docs/control.md).",
		Example: indent(doc.Example),
		Aliases: aliases[md.Name()],
	}
	flags := newRequestFlags(doc, md.Input(), cmd.Flags(), root.PersistentFlags())
	pos := positionals(doc, flags)
	cmd.Use += pos.usage()
	cmd.Args = pos.check
	cmd.ValidArgsFunction = pos.complete(o)
	registerCompletions(o, cmd, flags)
	var requestJSON string
	cmd.Flags().StringVar(&requestJSON, "request-json", "", "the whole request as JSON (protojson); flags given too override its fields")
	follow, detach := followers[md.Name()], false
	if follow != nil {
		cmd.Flags().BoolVar(&detach, "detach", false, "return once the server accepted the call instead of following the job it started")
	}
	confirm, yes := confirmers[md.Name()], false
	if confirm != nil {
		cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for a confirmation of --all (for scripts; the preview is skipped too)")
	}
	pg, all := pagerOf(md), false
	if pg != nil {
		cmd.Flags().BoolVar(&all, "all", false, "follow the pages to the end and print them as one list")
	}
	var w watchFlags
	if md.Name() == "GetStatus" {
		cmd.Flags().BoolVarP(&w.on, "watch", "w", false, "redraw the status in place every --interval until interrupted (plain lines when stdout is not a terminal; with -o json one JSON document a line)")
		cmd.Flags().DurationVar(&w.interval, "interval", 5*time.Second, "with --watch: how often to ask")
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := pos.set(args); err != nil {
			return err
		}
		if !slices.Contains(outputFormats, o.output) {
			return usageErr("-o %q: expected one of %s", o.output, strings.Join(outputFormats, ", "))
		}
		if err := checkAddr(o.addr); err != nil {
			return err
		}
		req, err := newMessage(md.Input())
		if err != nil {
			return localErr(err)
		}
		if requestJSON != "" {
			if err := protojson.Unmarshal([]byte(requestJSON), req); err != nil {
				return usageErr("--request-json: not a valid %s request: %v", CommandName(md), err)
			}
		}
		if err := flags.apply(req); err != nil {
			return usageErr("%v", err)
		}
		// The same checks the server runs, before dialling: a runbook typo is a usage error.
		if v, ok := req.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return usageErr("%s: %s", CommandName(md), flags.inFlagWords(err.Error()))
			}
		}
		if w.on {
			if w.interval < time.Second {
				return usageErr("--interval %s: expected at least 1s", w.interval)
			}
			return o.watch(cmd.Context(), md, req, stdout, cmd.ErrOrStderr(), w.interval)
		}
		if all && pg.started(req) {
			return usageErr("--all starts at the first page: leave out --%s", flags.flagName(pg.request))
		}
		c, err := o.dial()
		if err != nil {
			return err
		}
		defer func() { _ = c.conn.Close() }()
		c.words = flags.inFlagWords
		c.command = CommandName(md)
		resp, err := newMessage(md.Output())
		if err != nil {
			return localErr(err)
		}
		if confirm != nil && !yes {
			p := prompt{in: cmd.InOrStdin(), out: cmd.ErrOrStderr(), interactive: stdinTerminal(cmd.InOrStdin())}
			if err := confirm(cmd.Context(), c, md, req, p); err != nil {
				return err
			}
		}
		switch {
		case all:
			err = pg.fetchAll(cmd.Context(), c, md, req, resp)
		case pg != nil:
			if err = c.call(cmd.Context(), md, req, resp); err == nil {
				err = pg.fill(cmd.Context(), c, md, req, resp)
			}
		default:
			err = c.call(cmd.Context(), md, req, resp)
		}
		if err != nil {
			return err
		}
		if follow != nil && !detach {
			return follow(cmd.Context(), o, resp, stdout, cmd.ErrOrStderr())
		}
		if err := renderAs(stdout, o.output, o.noHeaders, resp, doc.Name, strings.HasPrefix(CommandName(md), "get-")); err != nil {
			return err
		}
		if body, ok := resp.(*controlv1.GetMessageBodyResponse); ok && o.output == "table" {
			// Nothing after the XML on stdout: the next chunk is named on stderr, and only
			// while there is one.
			if note := bodyNote(body); note != "" {
				_, err := fmt.Fprintln(cmd.ErrOrStderr(), note)
				return wrapWrite(err)
			}
			return nil
		}
		if explain := explainers[md.Name()]; explain != nil {
			note, fail := explain(cmd.Context(), c, req, resp)
			if note != "" {
				out := stdout
				if o.output != "table" && o.output != "wide" {
					out = cmd.ErrOrStderr() // the output stays parseable
				}
				if _, err := fmt.Fprintln(out, note); err != nil {
					return wrapWrite(err)
				}
			}
			if fail != nil || note != "" {
				return fail
			}
		}
		if pg != nil && !all && (o.output == "table" || o.output == "wide") {
			if next := pg.next(resp); next != "" {
				out := stdout
				if o.noHeaders {
					out = cmd.ErrOrStderr() // stdout holds rows only
				}
				_, err := fmt.Fprintf(out, "\nmore: --%s %s, or --all for every page\n", flags.flagName(pg.request), next)
				return wrapWrite(err)
			}
		}
		return nil
	}
	return cmd
}

// aliases are a command's other names: the flight's history reads as a noun, as the runbook
// says it.
var aliases = map[protoreflect.Name][]string{"GetFlightHistory": {"flight-history"}}

// newMessage returns an empty message of the generated type registered for md.
func newMessage(md protoreflect.MessageDescriptor) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		return nil, fmt.Errorf("message type %s: %w", md.FullName(), err)
	}
	return mt.New().Interface(), nil
}

// invoke makes the call on a new connection.
func (o *options) invoke(ctx context.Context, md protoreflect.MethodDescriptor, req, resp proto.Message) error {
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer func() { _ = c.conn.Close() }()
	return c.call(ctx, md, req, resp)
}

// client is a connection and the token its calls carry.
type client struct {
	conn    *grpc.ClientConn
	addr    string
	tls     bool // any TLS flag given
	token   string
	source  string // where the token came from, for an error
	timeout time.Duration
	// command names the calls in errors; words turns the request's field names in a server's
	// message into flags.
	command string
	words   func(string) string
}

// checkAddr refuses an address gRPC would otherwise complete on its own (a host without a port
// is dialled on 443, which is never control's port).
func checkAddr(addr string) error {
	if strings.Contains(addr, "://") || strings.HasPrefix(addr, "unix:") {
		return nil // a gRPC target with a scheme names its own form
	}
	host, port, err := net.SplitHostPort(addr)
	if err == nil && host != "" {
		if n, perr := strconv.Atoi(port); perr == nil && n > 0 && n < 65536 {
			return nil
		}
	}
	return usageErr("--addr %q: expected host:port, e.g. localhost:9000 or [::1]:9000 (env %s)", addr, EnvAddr)
}

// loopback reports whether addr's host is this machine: the development control
// (MSGX_CONTROL_INSECURE=true) that needs no token listens there.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (o *options) dial() (*client, error) {
	if err := checkAddr(o.addr); err != nil {
		return nil, err
	}
	creds, err := o.credentials()
	if err != nil {
		return nil, err
	}
	token, source, err := o.bearer()
	if err != nil {
		return nil, err
	}
	// Every control outside a developer's machine needs a credential: say which before dialling
	// rather than relay the server's refusal. A client certificate may be the credential (mTLS
	// subjects), and a loopback control may be the development one without any.
	if token == "" && o.cert == "" && !loopback(o.addr) {
		return nil, usageErr("no token: set %s (a file holding it) or %s, or give --token-file or --token", EnvTokenFile, EnvToken)
	}
	conn, err := grpc.NewClient(o.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, usageErr("--addr %q: %v", o.addr, err)
	}
	useTLS := o.ca != "" || o.cert != "" || o.key != "" || o.insecure
	return &client{conn: conn, addr: o.addr, tls: useTLS, token: token, source: source, timeout: o.timeout}, nil
}

// call makes one call, bounded by --timeout (none when it is 0).
func (c *client) call(ctx context.Context, md protoreflect.MethodDescriptor, req, resp proto.Message) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if c.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
	}
	if err := c.conn.Invoke(ctx, fullMethod(md), req, resp); err != nil {
		st := status.Convert(err)
		name := c.command
		if name == "" {
			name = CommandName(md)
		}
		return &exitError{code: exitCodeOf(st), err: fmt.Errorf("%s: %s: %s", name, st.Code(), c.explain(st))}
	}
	return nil
}

// explain is a server's refusal in the operator's terms: what to set or check, the flags a
// message names.
func (c *client) explain(st *status.Status) string {
	msg := st.Message()
	switch st.Code() {
	case codes.Unauthenticated:
		if c.token == "" {
			return fmt.Sprintf("this control needs a token and none was given: set %s (a file holding it) or %s, or give --token-file", EnvTokenFile, EnvToken)
		}
		return fmt.Sprintf("the token from %s was refused (%s): check that it is this control's reader or operator token", c.source, msg)
	case codes.PermissionDenied:
		return msg + " (this command needs the operator token)"
	case codes.DeadlineExceeded:
		if c.timeout > 0 {
			return fmt.Sprintf("no answer within --timeout %s (%s)", c.timeout, msg)
		}
	case codes.Unavailable:
		if m := c.addressMistake(msg); m != "" {
			return m
		}
		if i := strings.Index(msg, "Error while dialing: "); i >= 0 {
			return fmt.Sprintf("cannot reach the control API at %s: %s", c.addr, strings.Trim(msg[i+len("Error while dialing: "):], `"`))
		}
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		if c.words != nil {
			return c.words(msg)
		}
	}
	return msg
}

// addressMistake is the likely mistake behind a connection that failed on the usual
// addressing errors, in words and with the flag that fixes it, instead of gRPC's and Go's
// transport internals (issue #56 finding 6); "" for any other failure.
func (c *client) addressMistake(msg string) string {
	switch {
	case strings.Contains(msg, "http2: frame too large"), strings.Contains(msg, "looked like an HTTP/1.1 header"):
		return fmt.Sprintf("%s answers HTTP/1.1, not gRPC: --addr names an HTTP port, such as a service's admin port "+
			"(/metrics, /readyz; admin.addr, 9090 in the chart), not control's gRPC port (grpc.addr, 9000 in the chart): "+
			"fix --addr (env %s)", c.addr, EnvAddr)
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return fmt.Sprintf("%s does not speak TLS: that control serves plaintext (no control.tls-cert), so leave out "+
			"--ca, --cert, --key and --insecure, or fix --addr (env %s) if it names another server", c.addr, EnvAddr)
	case strings.Contains(msg, "produced zero addresses"), strings.Contains(msg, "no such host"):
		host, _, _ := net.SplitHostPort(c.addr)
		return fmt.Sprintf("the host %q of --addr %s is unknown (no address found for it): check the name in --addr "+
			"(env %s), e.g. the control Service's name in the cluster, or localhost through kubectl port-forward", host, c.addr, EnvAddr)
	case !c.tls && strings.Contains(msg, "server preface") &&
		(strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "closed before")):
		return fmt.Sprintf("%s closed the connection before speaking gRPC: if that control serves TLS (control.tls-cert), "+
			"give --ca (the CA of its certificate), or check --addr (env %s)", c.addr, EnvAddr)
	}
	return ""
}

// bearer is the token and where it came from.
func (o *options) bearer() (token, source string, err error) {
	switch {
	case o.token != "" && o.tokenFile != "":
		return "", "", usageErr("set --token or --token-file, not both (env %s and %s count as them: unset one)", EnvToken, EnvTokenFile)
	case o.tokenFile != "":
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", "", localErr(fmt.Errorf("token file %s (--token-file, env %s): %w", o.tokenFile, EnvTokenFile, err))
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", "", localErr(fmt.Errorf("token file %s (--token-file, env %s) is empty", o.tokenFile, EnvTokenFile))
		}
		return t, "the token file " + o.tokenFile, nil
	case o.token != "":
		return o.token, "--token (env " + EnvToken + ")", nil
	}
	return "", "", nil
}

// credentials chooses the transport: TLS as soon as any TLS flag is given, plaintext
// otherwise (the server's default inside the cluster network).
func (o *options) credentials() (credentials.TransportCredentials, error) {
	if o.ca == "" && o.cert == "" && o.key == "" && !o.insecure {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.serverName, InsecureSkipVerify: o.insecure} //nolint:gosec // --insecure is the operator's explicit choice
	if o.ca != "" {
		pem, err := os.ReadFile(o.ca)
		if err != nil {
			return nil, localErr(fmt.Errorf("--ca: %w", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, localErr(fmt.Errorf("--ca %s holds no PEM certificate", o.ca))
		}
		cfg.RootCAs = pool
	}
	if (o.cert == "") != (o.key == "") {
		return nil, usageErr("--cert and --key go together")
	}
	if o.cert != "" {
		pair, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return nil, localErr(fmt.Errorf("--cert/--key: %w", err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg), nil
}
