-- Step 4 of schema_migrations, frozen: an upstream attempt row counts alike calls and names the process that made them.
ALTER TABLE upstream_attempts ADD COLUMN count bigint NOT NULL DEFAULT 1;
ALTER TABLE upstream_attempts ADD COLUMN origin varchar(32) NOT NULL DEFAULT '';
INSERT INTO schema_migrations (version, name, applied_at) VALUES (4, 'an upstream attempt row counts alike calls and names the process that made them', now());
