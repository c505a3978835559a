package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/msgexchange/msgexchange/testkit/ports"
)

// startTimeout bounds a broker's start: a JVM, the KRaft quorum of one, the broker's
// registration. About 5 s on an idle machine of two cores; make test runs beside it.
const startTimeout = 2 * time.Minute

// Server is a broker of the test's own: one KRaft node (broker and controller) of the pinned
// release in a process of its own, with its data in the test's temporary folder. Kill,
// Stop and Start fault it as an operator's or a crash's would; the shared broker is never
// touched. The process is killed when the test ends.
type Server struct {
	*Cluster
	t       testing.TB
	java    string
	dir     string
	port    int
	cport   int
	configs map[string]string
	// listeners are the listeners beside PLAINTEXT (the admin client's) and CONTROLLER, their
	// ports drawn with the broker's; formatArgs are kafka-storage format's extra arguments.
	listeners  []*Listener
	formatArgs []string
	// node is the KRaft node id (1 for a broker alone); voters the controller quorum, and
	// clusterID the cluster's id, shared by the nodes of an OwnCluster (empty: this node's own).
	node      int
	voters    string
	clusterID string
	// role is the node's process.roles: empty for a combined node (broker and controller),
	// roleBroker or roleController for the nodes of a cluster with a controller of its own.
	role string
	// ownsCluster: the admin client is this server's own, closed with it (not an OwnCluster's).
	ownsCluster bool

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when the running process has exited (its Wait returned).
	exited chan struct{}
}

// Own starts a broker of the test's own with the given broker configs on top of the defaults
// (nil for none), and waits until it answers. A missing Java or a missing release fails the
// test naming the command that installs it.
func Own(t testing.TB, configs map[string]string) *Server {
	t.Helper()
	return own(t, configs, nil, nil)
}

// Listener is a listener of a broker of the test's own beside its PLAINTEXT one: a name and a
// security protocol (SSL, SASL_SSL); Addr is known once the broker started.
type Listener struct {
	Name, Protocol string
	port           int
}

// Addr is the listener's address.
func (l *Listener) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.port)) }

// own is Own with extra listeners and format arguments (SCRAM users).
func own(t testing.TB, configs map[string]string, listeners []*Listener, formatArgs []string) *Server {
	t.Helper()
	home, java := release(t)
	s := newServer(t, java, configs)
	s.listeners, s.formatArgs, s.node, s.ownsCluster = listeners, formatArgs, 1, true
	// Two tests can draw the same free port between the draw and the broker's bind: draw again.
	var err error
	for attempt := 0; ; attempt++ {
		if err = s.drawPorts(); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
		s.voters = fmt.Sprintf("1@127.0.0.1:%d", s.cport)
		if err = s.format(home); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
		if err = s.launch(); err == nil {
			err = s.listening()
		}
		if err == nil || attempt == 2 {
			break
		}
		t.Logf("kafkatest: broker did not start on ports %d/%d, drawing others: %v", s.port, s.cport, err)
		_ = os.RemoveAll(filepath.Join(s.dir, "data"))
	}
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	if s.Cluster, err = connect([]string{s.Addr()}); err != nil {
		t.Fatalf("kafkatest: own broker at %s does not answer: %v\n%s", s.Addr(), err, s.logTail())
	}
	return s
}

// release is the pinned release's folder and the java that runs it; a missing one fails the
// test naming the command that installs it.
func release(t testing.TB) (home, java string) {
	t.Helper()
	home = Home()
	if home == "" {
		t.Fatalf("kafkatest: no Kafka release: tools/deps/up -kafka fetches the pinned one, or set %s", EnvHome)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("kafkatest: no java on PATH (a JRE 17 or later runs the broker): %v", err)
	}
	return home, java
}

// newServer is a server with a data folder of its own, killed and removed when the test ends.
func newServer(t testing.TB, java string, configs map[string]string) *Server {
	t.Helper()
	// A short path: the folder names go into the broker's logs and its lock files.
	dir, err := os.MkdirTemp("", "msgxkafka")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, java: java, dir: dir, configs: configs}
	t.Cleanup(func() {
		s.Kill()
		if s.Cluster != nil && s.ownsCluster {
			s.admin.Close()
		}
		_ = os.RemoveAll(dir)
	})
	return s
}

// drawPorts draws the broker's, the controller's and the extra listeners' ports.
func (s *Server) drawPorts() error {
	var err error
	if s.port, err = ports.Free(); err == nil {
		s.cport, err = ports.Free()
	}
	for _, l := range s.listeners {
		if err == nil {
			l.port, err = ports.Free()
		}
	}
	return err
}

// Addr is the broker's bootstrap address.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Dir is the folder holding the broker's data and log.
func (s *Server) Dir() string { return s.dir }

// The process.roles of the nodes of a cluster with a controller of its own.
const (
	roleBroker     = "broker"
	roleController = "controller"
)

func (s *Server) properties() string {
	listeners := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", s.port, s.cport)
	advertised := "PLAINTEXT://" + s.Addr()
	protocols := "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	for _, l := range s.listeners {
		listeners += fmt.Sprintf(",%s://%s", l.Name, l.Addr())
		advertised += fmt.Sprintf(",%s://%s", l.Name, l.Addr())
		protocols += fmt.Sprintf(",%s:%s", l.Name, l.Protocol)
	}
	roles := "broker,controller"
	switch s.role {
	case roleBroker:
		roles, listeners = roleBroker, fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", s.port)
	case roleController:
		roles, listeners = roleController, fmt.Sprintf("CONTROLLER://127.0.0.1:%d", s.cport)
	}
	props := map[string]string{
		"process.roles":                            roles,
		"node.id":                                  strconv.Itoa(s.node),
		"controller.quorum.voters":                 s.voters,
		"listeners":                                listeners,
		"advertised.listeners":                     advertised,
		"controller.listener.names":                "CONTROLLER",
		"listener.security.protocol.map":           protocols,
		"inter.broker.listener.name":               "PLAINTEXT",
		"log.dirs":                                 filepath.Join(s.dir, "data"),
		"auto.create.topics.enable":                "false",
		"num.partitions":                           "1",
		"offsets.topic.replication.factor":         "1",
		"offsets.topic.num.partitions":             "2",
		"transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr":            "1",
		"transaction.state.log.num.partitions":     "2",
		"group.initial.rebalance.delay.ms":         "0",
		"log.segment.bytes":                        "16777216",
	}
	// A controller alone has neither a broker listener to advertise nor one between brokers.
	if s.role == roleController {
		delete(props, "advertised.listeners")
		delete(props, "inter.broker.listener.name")
		props["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT"
	}
	maps.Copy(props, s.configs)
	// The controller creates the topics with these; a broker alone only warns that it ignores
	// them, on every start.
	if s.role == roleBroker {
		delete(props, "num.partitions")
		delete(props, "default.replication.factor")
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return b.String()
}

// log4j keeps the broker's own log short: warnings, and the line that says it started.
const log4j = `rootLogger.level=WARN
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
logger.server.name=kafka.server.KafkaRaftServer
logger.server.level=INFO
`

// log4j1 is the same for Kafka 3.9, which logs through reload4j.
const log4j1 = `log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaRaftServer=INFO
`

func (s *Server) javaArgs(home string, args ...string) []string {
	heap := "-Xmx512m"
	if s.role == roleController {
		heap = "-Xmx256m" // the metadata of a test's few topics
	}
	return append([]string{"-Xms128m", heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + filepath.Join(s.dir, "log4j2.properties"),
		"-Dlog4j.configuration=file:" + filepath.Join(s.dir, "log4j.properties"),
		"-cp", filepath.Join(home, "libs", "*")}, args...)
}

// format writes the configuration and formats the data folder (kafka-storage format).
func (s *Server) format(home string) error {
	conf := filepath.Join(s.dir, "server.properties")
	if err := os.WriteFile(conf, []byte(s.properties()), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "log4j2.properties"), []byte(log4j), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "log4j.properties"), []byte(log4j1), 0o600); err != nil {
		return err
	}
	id := s.clusterID
	if id == "" {
		id = clusterID()
	}
	args := append([]string{"kafka.tools.StorageTool", "format", "-t", id, "-c", conf}, s.formatArgs...)
	out, err := exec.Command(s.java, s.javaArgs(home, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("format the broker's data: %w\n%s", err, out)
	}
	// Start reads the release from here, so a restart runs the same one.
	return os.WriteFile(filepath.Join(s.dir, "home"), []byte(home), 0o600)
}

// clusterID is a fresh KRaft cluster id: 16 random bytes in URL-safe base64, as random-uuid
// prints it.
func clusterID() string {
	return base64.RawURLEncoding.EncodeToString([]byte(rand.Text())[:16])
}

// start runs the broker on its data and waits until it accepts connections.
func (s *Server) start() error {
	if err := s.launch(); err != nil {
		return err
	}
	return s.listening()
}

// launch runs the broker on its data.
func (s *Server) launch() error {
	home, err := os.ReadFile(filepath.Join(s.dir, "home"))
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "kafka.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.java, s.javaArgs(string(home), "kafka.Kafka", filepath.Join(s.dir, "server.properties"))...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A process group of its own: a kill reaches the JVM, and make's Ctrl-C does not reach it
	// before the test's cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start the broker: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// listening waits until the launched broker accepts connections.
func (s *Server) listening() error {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	deadline := time.After(startTimeout)
	addr := s.Addr()
	if s.role == roleController {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.cport))
	}
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the broker exited during its start:\n%s", s.logTail())
		case <-deadline:
			s.Kill()
			return fmt.Errorf("the broker did not listen on %s within %s:\n%s", addr, startTimeout, s.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Start restarts a killed or stopped broker on its data, at the same address, and waits until
// it answers a metadata request.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.Restart(); err != nil {
		s.t.Fatalf("kafkatest: %v", err)
	}
}

// Restart is Start for a caller off the test's goroutine (a harness's fault injector, which
// must not end the test from there): it returns the error where Start fails the test.
func (s *Server) Restart() error {
	if err := s.start(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return s.waitListed()
}

// waitListed waits until the broker answers. A broker of a cluster is back once the cluster
// lists it among its unfenced brokers: the others answer meanwhile, and the controller unfences
// a broker only once it registered again and caught up with the metadata.
func (s *Server) waitListed() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		var err error
		if s.ownsCluster || s.role == roleController {
			_, err = s.admin.BrokerMetadata(ctx)
		} else {
			err = s.unfenced(ctx)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("broker %d at %s does not answer: %w\n%s", s.node, s.Addr(), err, s.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unfenced reports, as an error, why the cluster does not list the broker as unfenced yet.
// DescribeCluster lists the unfenced brokers only, where a metadata response may still name a
// fenced one.
func (s *Server) unfenced(ctx context.Context) error {
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, s.client)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return err
	}
	for _, b := range resp.Brokers {
		if b.NodeID == int32(s.node) {
			return nil
		}
	}
	return fmt.Errorf("node %d not among the cluster's unfenced brokers yet", s.node)
}

// ID is the broker's KRaft node id, as metadata names a partition's leader or a coordinator.
func (s *Server) ID() int32 { return int32(s.node) }

// Kill ends the broker with SIGKILL, as a crash or an OOM kill would, and waits until it is
// gone. A broker that is not running is left as it is.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

// Stop ends the broker with SIGTERM (a controlled shutdown) and waits until it is gone.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Pause freezes the broker (SIGSTOP): it keeps its connections and answers nothing, as a broker
// in a long GC pause or behind a dropped network does. Resume undoes it.
func (s *Server) Pause() { s.send(syscall.SIGSTOP) }

// Resume continues a paused broker (SIGCONT).
func (s *Server) Resume() { s.send(syscall.SIGCONT) }

func (s *Server) send(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, sig)
	}
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT) // a paused broker cannot act on SIGTERM
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// logTail is the end of the broker's log, for an error message.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "kafka.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
