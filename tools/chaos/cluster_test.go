package chaos_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/msgexchange/msgexchange/testkit/kafkatest"
	"github.com/msgexchange/msgexchange/tools/chaos"
)

// withCluster adds a cluster of the stack's own to tg: three brokers and a KRaft controller of
// their own (kafkatest.OwnClusterWith), so that two brokers can be down while the cluster still
// answers. The two topics are as production has them, three partitions each at replication
// factor 3 and min.insync.replicas 2, and the cluster's defaults give __transaction_state the
// same. A failed test keeps each node's log in logDir beside the services' (kafka-4.log is the
// controller's).
func withCluster(t *testing.T, tg chaos.Target, logDir string) chaos.Target {
	t.Helper()
	n := kafkatest.OwnClusterWith(t, kafkatest.ClusterOptions{Brokers: 3, Controller: true, Configs: map[string]string{
		// The controller moves each partition's leadership back to its preferred replica once a
		// restarted broker is in sync again (auto.leader.rebalance.enable, on by default). It
		// checks every 5 minutes by default, longer than a short run: every 10 s, the restarts
		// cause these elections under traffic too.
		"leader.imbalance.check.interval.seconds": "10",
	}})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, s := range append(n.Servers, n.Controller) {
			if b, err := os.ReadFile(filepath.Join(s.Dir(), "kafka.log")); err == nil {
				_ = os.WriteFile(filepath.Join(logDir, fmt.Sprintf("kafka-%d.log", s.ID())), b, 0o600)
			}
		}
	})
	tg.KafkaCluster = cluster{n}
	isr := map[string]string{"min.insync.replicas": "2"}
	tg.TopicMsg = n.Topic(t, "msgx.flight.msg", 3, isr)
	tg.TopicSchd = n.Topic(t, "msgx.flight.schd", 3, map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"})
	return tg
}

// cluster is kafkatest's cluster as the harness sees it.
type cluster struct{ n *kafkatest.Nodes }

func (c cluster) Brokers() []chaos.Node {
	out := make([]chaos.Node, len(c.n.Servers))
	for i, s := range c.n.Servers {
		out[i] = s
	}
	return out
}

func (c cluster) Admin() *kadm.Client { return c.n.Admin() }
