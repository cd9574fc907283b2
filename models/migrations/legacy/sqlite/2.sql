-- Step 2 of schema_migrations, frozen: console sessions remember the hash of their key.
ALTER TABLE `sessions` ADD `key_hash` text NOT NULL DEFAULT "";
INSERT INTO `schema_migrations` (`version`, `name`, `applied_at`) VALUES (2, 'console sessions remember the hash of their key', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'));
