// Package probecmd is `msgx-control probe`: it checks that a deployment answers, for the
// chart's `helm test` hook, which runs it from the control image (distroless: no shell, no
// curl, no grpcurl there). It asks control's gRPC health service and each service's /readyz,
// and exits non-zero naming every check that failed.
package probecmd

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/msgexchange/msgexchange/pkg/service"
)

type urls []string

func (u *urls) String() string     { return strings.Join(*u, ",") }
func (u *urls) Set(v string) error { *u = append(*u, v); return nil }

// Run parses args and runs the checks; it returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("msgx-control probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if len(args) == 1 && service.IsHelp(args[0]) {
		// Asked for: the usage on stdout, exit 0 (issue #56), as the binary's own --help.
		fs.SetOutput(stdout)
	}
	grpcAddr := fs.String("grpc", "", "control's gRPC address (host:port) whose health service must answer SERVING")
	useTLS := fs.Bool("tls", false, "connect to -grpc over TLS (the certificate is not verified: this checks that the API answers, it does not authenticate it)")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on each check")
	var ready urls
	fs.Var(&ready, "readyz", "an admin /readyz URL that must answer 200 (repeatable)")
	if len(args) == 1 && args[0] == "help" {
		fs.Usage()
		return 0
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if *grpcAddr == "" && len(ready) == 0 {
		fmt.Fprintln(stderr, "msgx-control probe: nothing to check; give -grpc and/or -readyz")
		return 2
	}
	var failed []error
	if *grpcAddr != "" {
		if err := checkGRPC(ctx, *grpcAddr, *useTLS, *timeout); err != nil {
			failed = append(failed, err)
		} else {
			fmt.Fprintf(stdout, "ok   gRPC health %s: SERVING\n", *grpcAddr)
		}
	}
	client := &http.Client{Timeout: *timeout}
	for _, u := range ready {
		if err := checkReady(ctx, client, u); err != nil {
			failed = append(failed, err)
		} else {
			fmt.Fprintf(stdout, "ok   %s: 200\n", u)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "FAIL %v\n", errors.Join(failed...))
		return 1
	}
	return 0
}

func checkGRPC(ctx context.Context, addr string, useTLS bool, timeout time.Duration) error {
	creds := insecure.NewCredentials()
	if useTLS {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a liveness check, not authentication
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("gRPC %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("gRPC health %s: %w", addr, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("gRPC health %s: %s", addr, resp.GetStatus())
	}
	return nil
}

func checkReady(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
