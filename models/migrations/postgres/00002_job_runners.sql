-- Version 2: a generation waits on its upstream outside the queue (jobs/inflight.go). The job names the
-- process that holds it (runner), and every such process keeps a row fresh in job_runners; a job whose
-- runner stopped beating is queued again (models/runner.go). Never edit this file: append a new one.

-- +goose Up
ALTER TABLE jobs ADD COLUMN runner varchar(64);
CREATE INDEX idx_jobs_runner ON jobs (runner) WHERE status = 'pending' AND runner IS NOT NULL;
CREATE TABLE job_runners (
	id varchar(64) NOT NULL,
	seen_at timestamptz NOT NULL,
	PRIMARY KEY (id)
);
