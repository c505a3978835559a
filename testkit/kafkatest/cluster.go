package kafkatest

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// Nodes is a cluster of the test's own: KRaft nodes in processes of their own, replicating as
// production does (every topic, the offsets and the transaction state at replication factor
// len(Servers), min.insync.replicas a majority). A test kills a partition's leader or the
// transaction coordinator with Kill on its node.
type Nodes struct {
	*Cluster
	// Servers are the brokers, node ids 1 to len(Servers).
	Servers []*Server
	// Controller is the KRaft controller of a cluster started with ClusterOptions.Controller,
	// node id len(Servers)+1, a process of its own; nil where every broker is also a controller.
	Controller *Server
}

// ClusterOptions shapes a cluster of the test's own (OwnClusterWith).
type ClusterOptions struct {
	// Brokers is the number of brokers; the replication defaults follow it.
	Brokers int
	// Controller runs the metadata quorum in one controller process of its own and the brokers
	// as brokers only. Where each node is both, killing a majority of the nodes also loses the
	// quorum, and with it every partition's leadership; with a controller of its own any number
	// of brokers can be down while the cluster still answers and elects leaders among the rest
	// (a chaos run keeps two of three brokers down for NOT_ENOUGH_REPLICAS).
	Controller bool
	// Configs are broker configs on top of the replication defaults (nil for none).
	Configs map[string]string
}

// OwnCluster starts n nodes, each broker and controller, with the given broker configs on top
// of the replication defaults (nil for none) and waits until the cluster answers.
func OwnCluster(t testing.TB, n int, configs map[string]string) *Nodes {
	t.Helper()
	return OwnClusterWith(t, ClusterOptions{Brokers: n, Configs: configs})
}

// OwnClusterWith starts the cluster opts describes and waits until every broker is registered
// and the cluster answers.
func OwnClusterWith(t testing.TB, opts ClusterOptions) *Nodes {
	t.Helper()
	home, java := release(t)
	n := opts.Brokers
	isr := fmt.Sprint(n/2 + 1)
	props := map[string]string{
		"default.replication.factor":               fmt.Sprint(n),
		"min.insync.replicas":                      isr,
		"offsets.topic.replication.factor":         fmt.Sprint(n),
		"transaction.state.log.replication.factor": fmt.Sprint(n),
		"transaction.state.log.min.isr":            isr,
		// A replica out of the ISR for this long is dropped from it: short, so that a killed
		// node's partitions go below min.insync.replicas within a test's patience.
		"replica.lag.time.max.ms": "10000",
	}
	maps.Copy(props, opts.Configs)
	nodes := &Nodes{}
	id := clusterID()
	for i := range n {
		s := newServer(t, java, props)
		s.node, s.clusterID = i+1, id
		if opts.Controller {
			s.role = roleBroker
		}
		if err := s.drawPorts(); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
		nodes.Servers = append(nodes.Servers, s)
	}
	all := nodes.Servers
	if opts.Controller {
		// The controller gets the replication defaults too: it creates the topics, and decides
		// their leaders and in-sync replicas by them.
		c := newServer(t, java, props)
		c.node, c.clusterID, c.role = n+1, id, roleController
		if err := c.drawPorts(); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
		nodes.Controller = c
		all = append([]*Server{c}, all...)
	}
	var voters, addrs []string
	for _, s := range all {
		if s.role != roleBroker {
			voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", s.node, s.cport))
		}
		if s.role != roleController {
			addrs = append(addrs, s.Addr())
		}
	}
	// The nodes start together: a node's broker listens only once a majority of the
	// controllers elected a leader.
	for _, s := range all {
		s.voters = strings.Join(voters, ",")
		if err := s.format(home); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
		if err := s.launch(); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
	}
	for _, s := range all {
		if err := s.listening(); err != nil {
			t.Fatalf("kafkatest: node %d: %v", s.node, err)
		}
	}
	c, err := connect(addrs)
	if err != nil {
		t.Fatalf("kafkatest: own cluster at %v does not answer: %v", addrs, err)
	}
	t.Cleanup(func() { c.admin.Close() })
	nodes.Cluster = c
	for _, s := range all {
		s.Cluster = c
	}
	if err := nodes.registered(); err != nil {
		t.Fatalf("kafkatest: own cluster at %v: %v", addrs, err)
	}
	return nodes
}

// registered waits until the cluster lists every broker: a topic created before would get
// fewer replicas than the replication factor asks, or none.
func (n *Nodes) registered() error {
	for _, s := range n.Servers {
		if err := s.waitListed(); err != nil {
			return err
		}
	}
	return nil
}

// Node is the server of the node with the given id (a partition's leader, a coordinator).
func (n *Nodes) Node(id int32) *Server {
	for _, s := range n.Servers {
		if int32(s.node) == id {
			return s
		}
	}
	return nil
}
