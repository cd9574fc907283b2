-- Step 4 of schema_migrations, frozen: an upstream attempt row counts alike calls and names the process that made them.
ALTER TABLE `upstream_attempts` ADD `count` integer NOT NULL DEFAULT 1;
ALTER TABLE `upstream_attempts` ADD `origin` text NOT NULL DEFAULT "";
INSERT INTO `schema_migrations` (`version`, `name`, `applied_at`) VALUES (4, 'an upstream attempt row counts alike calls and names the process that made them', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'));
