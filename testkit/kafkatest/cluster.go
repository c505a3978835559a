package kafkatest

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// Nodes is a cluster of the test's own: KRaft nodes that are each broker and controller, in
// processes of their own, replicating as production does (every topic, the offsets and the
// transaction state at replication factor len(Servers), min.insync.replicas a majority). A test
// kills a partition's leader or the transaction coordinator with Kill on its node.
type Nodes struct {
	*Cluster
	Servers []*Server
}

// OwnCluster starts n nodes with the given broker configs on top of the replication defaults
// (nil for none) and waits until the cluster answers.
func OwnCluster(t testing.TB, n int, configs map[string]string) *Nodes {
	t.Helper()
	home, java := release(t)
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
	maps.Copy(props, configs)
	nodes := &Nodes{}
	id := clusterID()
	for i := range n {
		s := newServer(t, java, props)
		s.node, s.clusterID = i+1, id
		if err := s.drawPorts(); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
		nodes.Servers = append(nodes.Servers, s)
	}
	var voters, addrs []string
	for _, s := range nodes.Servers {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", s.node, s.cport))
		addrs = append(addrs, s.Addr())
	}
	// The nodes start together: a node's broker listens only once a majority of the
	// controllers elected a leader.
	for _, s := range nodes.Servers {
		s.voters = strings.Join(voters, ",")
		if err := s.format(home); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
		if err := s.launch(); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
	}
	for _, s := range nodes.Servers {
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
	for _, s := range nodes.Servers {
		s.Cluster = c
	}
	return nodes
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
