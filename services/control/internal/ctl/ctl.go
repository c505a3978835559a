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
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
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

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// Exit codes. A script can tell a usage mistake from a local failure and, for a call the
// server answered with an error, which gRPC code it was: ExitRPC + the code (see
// docs/control.md for the table).
const (
	ExitOK    = 0
	ExitLocal = 1 // the call could not be made: token file, TLS files, output
	ExitUsage = 2 // unknown command or flag, a flag value that does not parse, an invalid request
	ExitRPC   = 10
)

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

// Command builds the command tree from the service descriptor.
func Command(stdout io.Writer) *cobra.Command {
	o := &options{}
	root := &cobra.Command{
		Use:   "msgxctl",
		Short: "Operate msgexchange through its control API (" + string(Service().FullName()) + ")",
		Long: "msgxctl calls the control service of msgexchange. Each command is one RPC of " +
			string(Service().FullName()) + "; its flags are the request's fields.\n\n" +
			"Reads are served by any control instance; mutating commands only by the active one\n" +
			"(a standby answers UNAVAILABLE naming it) and are written to the audit log.\n" +
			"Reads need the reader or the operator token, mutating commands the operator token\n" +
			"(a reader token gets PERMISSION_DENIED, exit 17); each command's help says which.\n\n" +
			"Exit codes: 0 ok, 1 local failure, 2 usage, 10+N the server answered gRPC code N\n" +
			"(e.g. 19 FAILED_PRECONDITION, 24 UNAVAILABLE, 26 UNAUTHENTICATED).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&o.addr, "addr", envOr(EnvAddr, "localhost:9000"), "control API address host:port (env "+EnvAddr+")")
	pf.StringVar(&o.token, "token", os.Getenv(EnvToken), "bearer token (env "+EnvToken+"; prefer --token-file)")
	pf.StringVar(&o.tokenFile, "token-file", os.Getenv(EnvTokenFile), "file holding the bearer token (env "+EnvTokenFile+")")
	pf.StringVar(&o.ca, "ca", "", "PEM CA bundle to verify the server's certificate (turns TLS on)")
	pf.StringVar(&o.cert, "cert", "", "PEM client certificate for mTLS (turns TLS on; needs --key)")
	pf.StringVar(&o.key, "key", "", "PEM private key of --cert")
	pf.StringVar(&o.serverName, "server-name", "", "name to verify the server's certificate against (default: the host of --addr)")
	pf.BoolVar(&o.insecure, "insecure", false, "TLS without verifying the server's certificate (testing only)")
	pf.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	pf.DurationVar(&o.timeout, "timeout", 30*time.Second, "deadline of the call")

	methods := Service().Methods()
	for i := range methods.Len() {
		root.AddCommand(methodCommand(o, root, methods.Get(i), stdout))
	}
	return root
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
	// The server's own table decides, so the help cannot promise a reader what the server
	// refuses.
	kind := "read, reader or operator token: served by any control instance"
	if controlv1.Mutating(fullMethod(md)) {
		kind = "MUTATING, operator token: served by the active instance only, audited"
	}
	cmd := &cobra.Command{
		Use:   CommandName(md),
		Short: fmt.Sprintf("call %s (%s)", md.Name(), kind),
		Long: fmt.Sprintf("Calls /%s/%s (%s).\nThe flags are the fields of %s; see docs/control.md.",
			md.Parent().FullName(), md.Name(), kind, md.Input().FullName()),
		Args:    cobra.NoArgs,
		Aliases: aliases[md.Name()],
	}
	arg, hasArg := positional[md.Name()]
	if hasArg {
		cmd.Use += " [" + arg + "]"
		cmd.Args = cobra.MaximumNArgs(1)
	}
	flags := newRequestFlags(md.Input(), cmd.Flags(), root.PersistentFlags())
	var requestJSON string
	cmd.Flags().StringVar(&requestJSON, "request-json", "", "the whole request as JSON (protojson); flags given too override its fields")
	follow, detach := followers[md.Name()], false
	if follow != nil {
		cmd.Flags().BoolVar(&detach, "detach", false, "return once the server accepted the call instead of following the job it started")
	}
	var w watchFlags
	if md.Name() == "GetStatus" {
		cmd.Flags().BoolVarP(&w.on, "watch", "w", false, "redraw the status in place every --interval until interrupted (plain lines when stdout is not a terminal)")
		cmd.Flags().DurationVar(&w.interval, "interval", 5*time.Second, "with --watch: how often to ask")
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			if cmd.Flags().Changed(arg) {
				return usageErr("give the %s as an argument or as --%s, not both", arg, arg)
			}
			if err := cmd.Flags().Set(arg, args[0]); err != nil {
				return usageErr("%s %q: %v", arg, args[0], err)
			}
		}
		req, err := newMessage(md.Input())
		if err != nil {
			return localErr(err)
		}
		if requestJSON != "" {
			if err := protojson.Unmarshal([]byte(requestJSON), req); err != nil {
				return usageErr("--request-json: %v", err)
			}
		}
		if err := flags.apply(req); err != nil {
			return usageErr("%v", err)
		}
		// The same checks the server runs, before dialling: a runbook typo is a usage error.
		if v, ok := req.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return usageErr("invalid %s request: %v", CommandName(md), err)
			}
		}
		if o.output != "table" && o.output != "json" {
			return usageErr("-o must be table or json, got %q", o.output)
		}
		if w.on {
			if w.interval < time.Second {
				return usageErr("--interval must be at least 1s, got %s", w.interval)
			}
			return o.watch(cmd.Context(), md, req, stdout, w.interval)
		}
		resp, err := newMessage(md.Output())
		if err != nil {
			return localErr(err)
		}
		if err := o.invoke(cmd.Context(), md, req, resp); err != nil {
			return err
		}
		if follow != nil && !detach {
			return follow(cmd.Context(), o, resp, stdout, cmd.ErrOrStderr())
		}
		return render(stdout, o.output, resp)
	}
	return cmd
}

// positional names the one field a command also takes as its argument: msgxctl get-message
// 123 is msgxctl get-message --msg-id 123.
var positional = map[protoreflect.Name]string{"GetMessage": "msg-id", "GetMessageBody": "msg-id", "GetFlight": "flid", "GetFlightHistory": "flid"}

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
	token   string
	timeout time.Duration
}

func (o *options) dial() (*client, error) {
	creds, err := o.credentials()
	if err != nil {
		return nil, err
	}
	token, err := o.bearer()
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(o.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, usageErr("--addr %q: %v", o.addr, err)
	}
	return &client{conn: conn, token: token, timeout: o.timeout}, nil
}

// call makes one call, bounded by --timeout.
func (c *client) call(ctx context.Context, md protoreflect.MethodDescriptor, req, resp proto.Message) error {
	token, conn := c.token, c.conn
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	method := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	if err := conn.Invoke(ctx, method, req, resp); err != nil {
		st := status.Convert(err)
		return &exitError{code: ExitCode(st.Code()), err: fmt.Errorf("%s: %s: %s", md.Name(), st.Code(), st.Message())}
	}
	return nil
}

func (o *options) bearer() (string, error) {
	switch {
	case o.token != "" && o.tokenFile != "":
		return "", usageErr("set --token or --token-file, not both")
	case o.tokenFile != "":
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", localErr(fmt.Errorf("token file: %w", err))
		}
		return strings.TrimSpace(string(b)), nil
	}
	return o.token, nil
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
