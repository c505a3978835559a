package sentinel

import (
	"context"
	"fmt"
)

// The tests drive the rebuilds a step at a time, or to their end, where production runs them
// from Run's poll, and print results in their failures.

// RunJobs executes the open job, if any, to its end. It returns when there is no open job, or
// with the error of a step (recorded on the job, which the next call resumes).
func (s *Sentinel) RunJobs(ctx context.Context, sess Session) error {
	return s.rebuilds.RunJobs(ctx, sess)
}

// Step does one step of the open job: it returns the job's ID (0 without an open job) and
// whether the job goes on.
func (s *Sentinel) Step(ctx context.Context, sess Session) (id int64, more bool, err error) {
	return s.rebuilds.Step(ctx, sess)
}

// String renders a result in a test's failure.
func (r Result) String() string {
	return fmt.Sprintf("checked %d, drift %v, repaired %d, code-share violations %d", r.Checked, r.Drift, r.Repaired, r.CodeShare)
}
