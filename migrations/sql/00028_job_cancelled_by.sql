-- +goose Up
-- Who cancelled a job and why (docs/control.md, "Projection rebuilds" and "Republishing
-- KAFKA:schd"): until now the cancel's caller and comment reached only the audit log, so the job
-- row (what GetRepublish and ListRepublishes show) could not say who stopped it. The first cancel
-- is kept; a second one of a job still running changes nothing (pkg/jobs Table.Cancel). Expand
-- only: the columns have constant defaults, so adding them rewrites nothing.
ALTER TABLE schd_republish ADD COLUMN cancelled_by text NOT NULL DEFAULT '';
ALTER TABLE schd_republish ADD COLUMN cancel_comment text NOT NULL DEFAULT '';
ALTER TABLE schd_republish ADD COLUMN cancel_requested_at timestamptz;
ALTER TABLE projection_rebuild ADD COLUMN cancelled_by text NOT NULL DEFAULT '';
ALTER TABLE projection_rebuild ADD COLUMN cancel_comment text NOT NULL DEFAULT '';
ALTER TABLE projection_rebuild ADD COLUMN cancel_requested_at timestamptz;

-- +goose Down
ALTER TABLE projection_rebuild DROP COLUMN cancel_requested_at;
ALTER TABLE projection_rebuild DROP COLUMN cancel_comment;
ALTER TABLE projection_rebuild DROP COLUMN cancelled_by;
ALTER TABLE schd_republish DROP COLUMN cancel_requested_at;
ALTER TABLE schd_republish DROP COLUMN cancel_comment;
ALTER TABLE schd_republish DROP COLUMN cancelled_by;
