-- Version 2: a generation waits on its upstream outside the queue (jobs/inflight.go). The job names the
-- process that holds it (runner), and every such process keeps a row fresh in job_runners; a job whose
-- runner stopped beating is queued again (models/runner.go). Never edit this file: append a new one.

-- +goose Up
ALTER TABLE `jobs` ADD COLUMN `runner` text;
CREATE INDEX idx_jobs_runner ON jobs (runner) WHERE status = 'pending' AND runner IS NOT NULL;
CREATE TABLE `job_runners` (`id` text NOT NULL, `seen_at` datetime NOT NULL, PRIMARY KEY (`id`));
