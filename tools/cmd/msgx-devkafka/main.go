// Command msgx-devkafka runs a one-broker, in-memory server that speaks the Kafka wire protocol
// (franz-go's kfake), so that `make demo` and the end-to-end tests can run the dispatcher against
// a real Kafka client connection on a machine that has no Kafka. It is a development tool only:
// records live in memory and vanish when it stops, unless -data-dir names a directory: then the
// broker keeps its log, producer and transaction state there and a restart on the same directory
// resumes it (the chaos harness stops and restarts the broker under running services).
// docker-compose and production use real Kafka.
//
// Usage:
//
//	msgx-devkafka [-addr 127.0.0.1:9092] [-topics msgx.flight.msg,msgx.flight.schd] [-partitions 3] [-data-dir DIR]
//
// Once the broker accepts connections it prints exactly one line on stdout,
// "msgx-devkafka listening on <host:port>", which scripts wait for; it runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/msgexchange/msgexchange/pkg/buildinfo"
)

func main() {
	if buildinfo.PrintVersion("msgx-devkafka", os.Args[1:], os.Stdout) {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		if err != errUsage { // the flag package has printed its own refusal
			fmt.Fprintf(os.Stderr, "msgx-devkafka: %v\n", err)
		}
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "msgx-devkafka: %v\n", err)
		os.Exit(1)
	}
}

// errUsage marks a command line the flags refuse: exit 2, as every binary does.
var errUsage = errors.New("usage")

// options are the parsed command line.
type options struct {
	addr       string
	topics     []string
	partitions int
	logLevel   kfake.LogLevel
	dataDir    string
}

// run starts the broker, announces it on stdout and serves until ctx is done. It is main without
// the process: the tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cluster, addr, err := start(o, stderr)
	if err != nil {
		return err
	}
	defer cluster.Close()
	// The listener is bound before this line is printed, so a script that waits for it can
	// connect at once.
	if _, err := fmt.Fprintf(stdout, "msgx-devkafka listening on %s\n", addr); err != nil {
		return fmt.Errorf("announce: %w", err)
	}
	<-ctx.Done()
	return nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("msgx-devkafka", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:9092", "host:port of the single broker (port 0 picks a free port)")
	topics := fs.String("topics", "msgx.flight.msg,msgx.flight.schd", "comma-separated topics to create at start")
	partitions := fs.Int("partitions", 3, "partitions of every created topic, seeded or auto-created")
	level := fs.String("log-level", "warn", "broker log level on stderr: none, error, warn, info, debug")
	dataDir := fs.String("data-dir", "", "keep the broker's records and state in this directory across restarts (empty: in memory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return options{}, err
		}
		return options{}, errUsage
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}

	o := options{addr: *addr, partitions: *partitions, dataDir: *dataDir}
	if err := checkAddr(o.addr); err != nil {
		return options{}, err
	}
	if o.partitions < 1 {
		return options{}, fmt.Errorf("-partitions must be at least 1, got %d", o.partitions)
	}
	for _, t := range strings.Split(*topics, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !legalTopic(t) {
			return options{}, fmt.Errorf("-topics: %q is not a legal Kafka topic name", t)
		}
		o.topics = append(o.topics, t)
	}
	levels := map[string]kfake.LogLevel{
		"none": kfake.LogLevelNone, "error": kfake.LogLevelError, "warn": kfake.LogLevelWarn,
		"info": kfake.LogLevelInfo, "debug": kfake.LogLevelDebug,
	}
	l, ok := levels[strings.ToLower(*level)]
	if !ok {
		return options{}, fmt.Errorf("-log-level must be none, error, warn, info or debug, got %q", *level)
	}
	o.logLevel = l
	return o, nil
}

// legalTopic reports whether Kafka accepts t as a topic name: 1 to 249 of [a-zA-Z0-9._-].
func legalTopic(t string) bool {
	if len(t) == 0 || len(t) > 249 {
		return false
	}
	for _, r := range t {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// checkAddr refuses an address that clients could not be sent to. A Kafka broker tells its clients,
// in every metadata response, the address to connect to, and kfake takes that from its listener:
// a wildcard host (":9092", "0.0.0.0:9092") would be advertised as "::" or "0.0.0.0".
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("-addr %q: port must be a number from 0 to 65535", addr)
	}
	if host == "" {
		return fmt.Errorf("-addr %q: name a host (e.g. 127.0.0.1): the broker advertises this address to its clients", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("-addr %q: a wildcard address cannot be advertised to clients; name the interface's address", addr)
	}
	return nil
}

// start binds the listener and starts a one-broker kfake cluster on it. It returns the address
// clients should use (the bound one, which differs from o.addr when the port was 0).
func start(o options, logOut io.Writer) (*kfake.Cluster, string, error) {
	// We bind the listener ourselves rather than pass kfake.Ports: kfake always binds 127.0.0.1,
	// while -addr may name another local address (a test network namespace), and binding first
	// turns "port already in use" into a plain error instead of a half-built cluster.
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	handedOut := false
	listen := func(string, string) (net.Listener, error) {
		// kfake asks once per broker; there is one broker and one listener.
		if handedOut {
			return nil, errors.New("msgx-devkafka runs exactly one broker")
		}
		handedOut = true
		return ln, nil
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(listen),
		kfake.ClusterID("msgx-devkafka"),
		// The topics the services produce to exist from the start with the partition count the
		// compose stack uses; any other topic a test or the demo names is created on first use
		// with the same count, as a broker with auto.create.topics.enable would.
		kfake.SeedTopics(int32(o.partitions), o.topics...),
		kfake.DefaultNumPartitions(o.partitions),
		kfake.AllowAutoTopicCreation(),
		kfake.WithLogger(kfake.BasicLogger(logOut, o.logLevel)),
	}
	if o.dataDir != "" {
		// Every batch is written to the directory as it is accepted (the page cache keeps it
		// across a killed process; only a machine crash could lose the tail), and a stop saves
		// the rest. A restart on the same directory reloads it and aborts the transactions a
		// killed broker left open, as a real broker's recovery does.
		opts = append(opts, kfake.DataDir(o.dataDir))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		_ = ln.Close() // kfake closes only the listeners it finished setting up
		return nil, "", fmt.Errorf("start broker: %w", err)
	}
	return cluster, ln.Addr().String(), nil
}
