// Package leaktest is every test package's TestMain: it runs the tests and then fails the
// package when a test left a goroutine running, since a leaked worker in a service holds a
// connection, a lock or a role after its owner thinks it stopped (goleak, by Uber).
package leaktest

import "go.uber.org/goleak"

// libraries are the goroutines of the libraries that outlive what started them by design;
// ours never do.
var libraries = []goleak.Option{
	// sarama's metrics library starts one process-wide meter ticker and never stops it.
	goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	// kfake's control-function goroutines outlive a closed test cluster, and its run loop
	// waits for them: at its top, or inside one of its own calls (continueSleptControl waiting
	// for the cluster's lock was seen in make test).
	goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).runControl.func1"),
	goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
	// go-redis keeps redialling a refused address for a second after its client is closed.
	goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
	// sarama's producer opens a circuit breaker after three failures in a row to find a
	// partition or its leader (a broker killed, a topic deleted under it), and the breaker's
	// timer sleeps out its 10 s even after the producer is closed: nothing can stop it (seen in
	// the dispatcher's delivery tests).
	goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
}

// VerifyTestMain runs the package's tests and checks for leaked goroutines; cleanup, when
// given, runs after the check with the tests' exit code and must exit the process. m is the
// package's *testing.M, or a wrapper whose Run also closes what the tests shared and the
// process would otherwise close at its exit (kafkatest.Main).
func VerifyTestMain(m goleak.TestingM, cleanup ...func(code int)) {
	opts := libraries
	if len(cleanup) > 0 {
		opts = append(opts[:len(opts):len(opts)], goleak.Cleanup(cleanup[0]))
	}
	goleak.VerifyTestMain(m, opts...)
}
