-- Step 7 of schema_migrations, frozen: replicas announce themselves (a replica with local media refuses to join others).
CREATE TABLE `replicas` (`id` text,`host` text NOT NULL,`media` text NOT NULL,`started_at` datetime,`seen_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_replicas_seen_at` ON `replicas`(`seen_at`);
INSERT INTO `schema_migrations` (`version`, `name`, `applied_at`) VALUES (7, 'replicas announce themselves (a replica with local media refuses to join others)', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'));
