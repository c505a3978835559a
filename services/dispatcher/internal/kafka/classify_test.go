package kafka

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"

	"github.com/IBM/sarama"

	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
)

// TestVerdicts: the broker errors the dispatcher meets, each with the verdict docs/dispatcher.md
// ("Broker errors") gives it, as sarama hands them over: bare, wrapped by the producer, or joined
// by sarama's transaction manager. Many of them a real broker returns only for moments no test
// can aim at (COORDINATOR_LOAD_IN_PROGRESS while a coordinator loads, NOT_ENOUGH_REPLICAS on a
// cluster of one) or only with authorization, which the brokers do not run yet (the issue "Kafka
// as production runs it"): this table is their test. The ones a real broker produces on demand
// are provoked in internal/delivery (TestDeletedTopicIsAnOutage, TestRecordOverTheTopicLimitIsRefused,
// TestTransactionTimeoutIsTheLanes).
func TestVerdicts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want Verdict
	}{
		{sarama.ErrUnknownTopicOrPartition, VerdictOutage},
		{sarama.ErrNotLeaderForPartition, VerdictOutage},
		{sarama.ErrLeaderNotAvailable, VerdictOutage},
		{sarama.ErrRequestTimedOut, VerdictOutage},
		{sarama.ErrNotEnoughReplicas, VerdictOutage},
		{sarama.ErrNotEnoughReplicasAfterAppend, VerdictOutage},
		{sarama.ErrNetworkException, VerdictOutage},
		{sarama.ErrConcurrentTransactions, VerdictOutage},
		{sarama.ErrOffsetsLoadInProgress, VerdictOutage},
		{sarama.ErrConsumerCoordinatorNotAvailable, VerdictOutage},
		{sarama.ErrNotCoordinatorForConsumer, VerdictOutage},
		{sarama.ErrProducerFenced, VerdictLane},
		{sarama.ErrInvalidProducerEpoch, VerdictLane},
		{sarama.ErrInvalidTxnState, VerdictLane},
		{sarama.ErrUnknownProducerID, VerdictLane},
		{sarama.ErrOutOfOrderSequenceNumber, VerdictLane},
		{ErrTransactionAbortable, VerdictLane},
		{sarama.ErrInvalidProducerIDMapping, VerdictLane},
		{sarama.ErrMessageSizeTooLarge, VerdictRefused},
		{sarama.ErrMessageSetSizeTooLarge, VerdictRefused},
		{sarama.ErrInvalidRecord, VerdictOwn},
		{sarama.ErrInvalidMessage, VerdictOwn},
		{sarama.ErrTopicAuthorizationFailed, VerdictConfig},
		{sarama.ErrTransactionalIDAuthorizationFailed, VerdictConfig},
		{sarama.ErrClusterAuthorizationFailed, VerdictConfig},
		// sarama's own errors and the connection's.
		{ErrNoAnswer, VerdictOutage},
		{fmt.Errorf("kafka: %w", sarama.ErrOutOfBrokers), VerdictOutage},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, VerdictOutage},
		{fmt.Errorf("read: %w", io.EOF), VerdictOutage},
		{sarama.ErrTransactionNotReady, VerdictLane},
		{sarama.ErrShuttingDown, VerdictLane},
		{errors.New("something nobody foresaw"), VerdictOwn},
		{sarama.KError(9999), VerdictOwn},
		// An AddPartitionsToTxn answer joins one error per partition: a broken producer is
		// fenced again whatever else failed, and an outage beats the record's own.
		{sarama.Wrap(sarama.ErrAddPartitionsToTxn, sarama.ErrUnknownTopicOrPartition, sarama.ErrProducerFenced), VerdictLane},
		{sarama.Wrap(sarama.ErrAddPartitionsToTxn, sarama.ErrInvalidRecord, sarama.ErrNotLeaderForPartition), VerdictOutage},
		{sarama.Wrap(sarama.ErrAddPartitionsToTxn, sarama.ErrTopicAuthorizationFailed), VerdictConfig},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if got := Classify(nil); got != VerdictOwn {
		t.Errorf("Classify(nil) = %s", got)
	}
}

// TestEveryVerdictReachesDelivery: every row of the table, as the record's error of a Publish,
// becomes the delivery verdict its class stands for (Target.Deliver): an outage or a refusal of
// the client waits uncharged, a lane failure backs the lane off, a refusal is DEAD at once, the
// record's own is charged.
func TestEveryVerdictReachesDelivery(t *testing.T) {
	t.Parallel()
	sentinels := []error{delivery.ErrUnavailable, delivery.ErrLaneFailed, delivery.ErrRefused, delivery.ErrNotAttempted}
	want := map[Verdict]error{VerdictOutage: delivery.ErrUnavailable, VerdictConfig: delivery.ErrUnavailable,
		VerdictLane: delivery.ErrLaneFailed, VerdictRefused: delivery.ErrRefused, VerdictOwn: nil}
	check := func(name string, err error, v Verdict) {
		got := verdict(err)
		for _, s := range sentinels {
			if errors.Is(got, s) != (s == want[v]) {
				t.Errorf("%s (%s): delivery verdict %v; errors.Is(%v) = %v", name, v, got, s, errors.Is(got, s))
			}
		}
		if !errors.Is(got, err) {
			t.Errorf("%s: the delivery verdict %v lost the broker's error", name, got)
		}
	}
	for code, v := range verdicts {
		check(code.Error(), fmt.Errorf("produce: %w", code), v)
	}
	for _, c := range clientVerdicts {
		check(c.err.Error(), c.err, c.v)
	}
	// The producer's own outcomes come before the table.
	for _, c := range []struct {
		err  error
		want error
	}{
		{fmt.Errorf("%w: %w", ErrAborted, sarama.ErrProducerFenced), delivery.ErrNotAttempted},
		{ErrNotFenced, delivery.ErrNotAttempted},
		{fmt.Errorf("%w: %w", ErrCommit, sarama.ErrConsumerCoordinatorNotAvailable), delivery.ErrLaneFailed},
		{fmt.Errorf("%w: 2000000 bytes", ErrRecordTooLarge), delivery.ErrRefused},
		{fmt.Errorf("%w: 2 records: %w", ErrShared, sarama.ErrMessageSizeTooLarge), nil},
	} {
		got := verdict(c.err)
		for _, s := range sentinels {
			if errors.Is(got, s) != (s == c.want) {
				t.Errorf("%v: delivery verdict %v, want it to wrap %v", c.err, got, c.want)
			}
		}
	}
}

// TestEveryKErrorIsClassified: each code sarama knows (it names it in KError.Error) is either in
// the table or listed as one the dispatcher cannot meet, never both: a sarama upgrade that adds
// a code fails here until someone decided what it means for an event.
func TestEveryKErrorIsClassified(t *testing.T) {
	t.Parallel()
	unknown := fmt.Sprintf("Unknown error, how did this happen? Error code = %d", 32000)
	prefix := unknown[:len(unknown)-len("32000")]
	known := 0
	for code := sarama.KError(-1); code < 1000; code++ {
		if e := code.Error(); len(e) >= len(prefix) && e[:len(prefix)] == prefix {
			continue
		}
		known++
		_, classified := verdicts[code]
		unmet := slices.Contains(notMet, code)
		switch {
		case classified && unmet:
			t.Errorf("%d (%v) is both classified and listed as not met", code, code)
		case !classified && !unmet:
			t.Errorf("%d (%v) is neither classified nor listed as one the dispatcher cannot meet", code, code)
		}
	}
	// sarama v1.61.1 names 92 codes in KError.Error (PRODUCER_FENCED has a constant and no
	// message: the table has it all the same); fewer would mean the loop above missed some.
	if known < 92 {
		t.Errorf("%d codes known to sarama, want at least 92", known)
	}
	for _, code := range notMet {
		if Classify(code) != VerdictOwn {
			t.Errorf("%v is not met but classified %s", code, Classify(code))
		}
	}
}

// String names a verdict in the tests' failures.
func (v Verdict) String() string {
	switch v {
	case VerdictOwn:
		return "own"
	case VerdictRefused:
		return "refused"
	case VerdictOutage:
		return "outage"
	case VerdictConfig:
		return "config"
	case VerdictLane:
		return "lane"
	}
	return "unknown"
}
