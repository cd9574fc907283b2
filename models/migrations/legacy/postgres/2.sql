-- Step 2 of schema_migrations, frozen: console sessions remember the hash of their key.
ALTER TABLE sessions ADD COLUMN key_hash varchar(64) NOT NULL DEFAULT '';
INSERT INTO schema_migrations (version, name, applied_at) VALUES (2, 'console sessions remember the hash of their key', now());
