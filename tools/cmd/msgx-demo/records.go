package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
)

// maxBroken is how many contract violations the demo quotes: the first few say what is wrong.
const maxBroken = 5

// checkRecords reads the run's two topics from the start as a downstream consumer must
// (read_committed), at least the records of the sent events and then until a second passes
// without one, and checks every record against the published event contract
// (pkg/kafkarecord/contract, docs/dispatcher.md "Event contract"). It returns how many records
// it read and how many broke the contract, with the first violations.
func checkRecords(ctx context.Context, brokers []string, n runNames, sent int64) (read, broken int, first []string, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(n.topicMsg, n.topicSchd),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("kafka consumer: %w", err)
	}
	defer cl.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		poll, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(poll)
		cancel()
		if ctx.Err() != nil {
			return read, broken, first, ctx.Err()
		}
		got := 0
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			target := outbox.TargetSchd
			if r.Topic == n.topicMsg {
				target = outbox.TargetMsg
			}
			if err := contracttest.CheckRecord(target, r); err != nil {
				if broken++; broken <= maxBroken {
					first = append(first, err.Error())
				}
			}
		})
		read += got
		switch {
		case int64(read) >= sent && got == 0:
			return read, broken, first, nil
		case time.Now().After(deadline):
			return read, broken, first, fmt.Errorf("read %d records of the %d events sent in a minute", read, sent)
		}
	}
}
