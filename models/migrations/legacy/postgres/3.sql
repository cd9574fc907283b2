-- Step 3 of schema_migrations, frozen: open jobs and video tasks are found through partial indexes.
DROP INDEX IF EXISTS idx_jobs_status;
DROP INDEX IF EXISTS idx_video_tasks_status;
CREATE INDEX IF NOT EXISTS idx_jobs_pending ON jobs (deadline) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS idx_video_tasks_open ON video_tasks (created_at) WHERE status IN ('pending', 'running');
INSERT INTO schema_migrations (version, name, applied_at) VALUES (3, 'open jobs and video tasks are found through partial indexes', now());
