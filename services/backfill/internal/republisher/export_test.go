package republisher

import (
	"context"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// The tests drive the jobs a step at a time, or to their end, where production runs them from
// Run's poll.

// RunJobs executes the open job, if any, to its end. It returns when there is no open job, or
// with the error of a step (recorded on the job, which the next call resumes).
func (r *Republisher) RunJobs(ctx context.Context, sess db.Txer) error {
	return r.runner.RunJobs(ctx, sess)
}

// Step does one step of the open job: it returns the job's ID (0 without an open job) and
// whether the job goes on.
func (r *Republisher) Step(ctx context.Context, sess db.Txer) (id int64, more bool, err error) {
	return r.runner.Step(ctx, sess)
}
