-- Version 1: the schema as released before the migrations moved to goose, exactly as a fresh database
-- got it then (GORM's statements after the steps 1 to 7 of schema_migrations). Never edit this file:
-- append a new numbered one.
--
-- schema_migrations keeps the record of the old numbering (steps 1 to 7, all contained here), so that
-- a release from before goose, started on this database, finds nothing left to do. A database of that
-- numbering is brought to this version by the frozen steps of legacy/ instead (models.Migrate).

-- +goose Up
CREATE TABLE `schema_migrations` (`version` integer,`name` text,`applied_at` datetime,PRIMARY KEY (`version`));
CREATE TABLE `tenants` (`id` text,`name` text NOT NULL,`spendable` integer NOT NULL DEFAULT 0,`reserved` integer NOT NULL DEFAULT 0,`unmetered` numeric NOT NULL DEFAULT false,`quota_monthly` integer,`used_month` integer NOT NULL DEFAULT 0,`used_month_key` text NOT NULL DEFAULT "",`markup` real NOT NULL DEFAULT 1,`binding` text NOT NULL DEFAULT "",`callback_secret` text NOT NULL,`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`id`));
CREATE TABLE `api_keys` (`id` text,`hash` text NOT NULL,`kind` text NOT NULL,`tenant_id` text NOT NULL,`account_id` text,`sealed` text NOT NULL DEFAULT "",`created_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_api_keys_account_id` ON `api_keys`(`account_id`);
CREATE INDEX `idx_api_keys_tenant_id` ON `api_keys`(`tenant_id`);
CREATE UNIQUE INDEX `idx_api_keys_hash` ON `api_keys`(`hash`);
CREATE TABLE `accounts` (`id` text,`tenant_id` text NOT NULL,`email` text NOT NULL,`nickname` text NOT NULL DEFAULT "",`shared` numeric NOT NULL DEFAULT true,`credits` integer NOT NULL DEFAULT 0,`disabled` numeric NOT NULL DEFAULT false,`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_accounts_tenant_id` ON `accounts`(`tenant_id`);
CREATE TABLE `users` (`id` text,`email` text NOT NULL,`nickname` text NOT NULL DEFAULT "",`password_hash` text NOT NULL DEFAULT "",`o_id_c_subject` text,`credits` integer NOT NULL DEFAULT 0,`disabled` numeric NOT NULL DEFAULT false,`token_version` integer NOT NULL DEFAULT 0,`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX `idx_users_o_id_c_subject` ON `users`(`o_id_c_subject`);
CREATE UNIQUE INDEX `idx_users_email` ON `users`(`email`);
CREATE TABLE `ledger_entries` (`id` integer PRIMARY KEY AUTOINCREMENT,`at` datetime NOT NULL,`tx_id` text NOT NULL,`kind` text NOT NULL,`balance` text NOT NULL,`tenant_id` text,`account_id` text,`user_id` text,`delta` integer NOT NULL,`after` integer NOT NULL,`ref` text NOT NULL DEFAULT "",`note` text NOT NULL DEFAULT "");
CREATE INDEX `idx_ledger_entries_ref` ON `ledger_entries`(`ref`);
CREATE INDEX `idx_ledger_entries_user_id` ON `ledger_entries`(`user_id`);
CREATE INDEX `idx_ledger_entries_account_id` ON `ledger_entries`(`account_id`);
CREATE INDEX `idx_ledger_entries_tenant_id` ON `ledger_entries`(`tenant_id`);
CREATE INDEX `idx_ledger_entries_tx_id` ON `ledger_entries`(`tx_id`);
CREATE INDEX `idx_ledger_entries_at` ON `ledger_entries`(`at`);
CREATE TABLE `jobs` (`id` text,`kind` text NOT NULL DEFAULT "image",`tenant_id` text,`account_id` text,`user_id` text,`status` text NOT NULL,`progress` text NOT NULL DEFAULT "",`steps` JSON,`params` JSON,`credits` integer NOT NULL DEFAULT 0,`charged_to` text NOT NULL DEFAULT "",`cost_usd` real NOT NULL DEFAULT 0,`cdn_url` text NOT NULL DEFAULT "",`error` text,`elapsed_ms` integer NOT NULL DEFAULT 0,`callback_url` text NOT NULL DEFAULT "",`callback` text NOT NULL DEFAULT "",`callback_err` text NOT NULL DEFAULT "",`result_ref` text NOT NULL DEFAULT "",`deadline` datetime,`created_at` datetime,`updated_at` datetime,`finished_at` datetime,`refunded_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_jobs_user_id` ON `jobs`(`user_id`);
CREATE INDEX `idx_jobs_account_id` ON `jobs`(`account_id`);
CREATE INDEX `idx_jobs_tenant_created` ON `jobs`(`tenant_id`,`created_at`);
CREATE TABLE `upstream_attempts` (`id` integer PRIMARY KEY AUTOINCREMENT,`upstream` text NOT NULL,`at` datetime NOT NULL,`job_id` text NOT NULL DEFAULT "",`ok` numeric NOT NULL,`latency_ms` integer NOT NULL,`class` text NOT NULL DEFAULT "",`count` integer NOT NULL DEFAULT 1,`origin` text NOT NULL DEFAULT "");
CREATE INDEX `idx_upstream_attempts_job_id` ON `upstream_attempts`(`job_id`);
CREATE INDEX `idx_upstream_attempts_at` ON `upstream_attempts`(`at`);
CREATE INDEX `idx_attempt_up_at` ON `upstream_attempts`(`upstream`,`at`);
CREATE TABLE `upstream_states` (`upstream` text,`disabled` numeric NOT NULL DEFAULT false,`removed` numeric NOT NULL DEFAULT false,`reason` text NOT NULL DEFAULT "",`since` datetime,PRIMARY KEY (`upstream`));
CREATE TABLE `video_tasks` (`id` text,`tenant_id` text,`account_id` text,`user_id` text,`status` text NOT NULL,`model` text NOT NULL,`resolution` text NOT NULL,`duration` integer NOT NULL,`ratio` text NOT NULL DEFAULT "",`params` JSON,`credits` integer NOT NULL,`charged_to` text NOT NULL DEFAULT "",`progress` integer NOT NULL DEFAULT 0,`video_url` text NOT NULL DEFAULT "",`error` text,`upstream` text NOT NULL DEFAULT "",`upstream_task_id` text NOT NULL DEFAULT "",`cost_usd` real NOT NULL DEFAULT 0,`created_at` datetime,`updated_at` datetime,`finished_at` datetime,`refunded_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_video_tasks_user_id` ON `video_tasks`(`user_id`);
CREATE INDEX `idx_video_tasks_account_id` ON `video_tasks`(`account_id`);
CREATE INDEX `idx_video_tasks_tenant_id` ON `video_tasks`(`tenant_id`);
CREATE TABLE `templates` (`id` text,`type` text NOT NULL,`tenant_id` text,`user_id` text,`author_kind` text NOT NULL DEFAULT "",`author_id` text NOT NULL DEFAULT "",`slug` text,`zh_name` text NOT NULL,`ratio` text NOT NULL DEFAULT "",`sample_images` JSON,`template_type` text NOT NULL DEFAULT "",`category` text NOT NULL DEFAULT "",`domain` text NOT NULL DEFAULT "",`genre` text NOT NULL DEFAULT "",`description` text NOT NULL DEFAULT "",`variable_labels` JSON,`generation_configs` JSON,`active` numeric NOT NULL DEFAULT true,`gated` numeric NOT NULL DEFAULT false,`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX `idx_templates_slug` ON `templates`(`slug`);
CREATE INDEX `idx_templates_user_id` ON `templates`(`user_id`);
CREATE INDEX `idx_templates_tenant_id` ON `templates`(`tenant_id`);
CREATE INDEX `idx_templates_type` ON `templates`(`type`);
CREATE TABLE `video_templates` (`id` text,`tenant_id` text,`user_id` text,`author_kind` text NOT NULL DEFAULT "",`author_id` text NOT NULL DEFAULT "",`slug` text NOT NULL,`zh_name` text NOT NULL,`sample_cover_image` text NOT NULL DEFAULT "",`sample_video_url` text NOT NULL DEFAULT "",`category` text NOT NULL DEFAULT "",`description` text NOT NULL DEFAULT "",`generation_configs` JSON,`active` numeric NOT NULL DEFAULT true,`gated` numeric NOT NULL DEFAULT false,`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX `idx_video_templates_slug` ON `video_templates`(`slug`);
CREATE INDEX `idx_video_templates_user_id` ON `video_templates`(`user_id`);
CREATE INDEX `idx_video_templates_tenant_id` ON `video_templates`(`tenant_id`);
CREATE TABLE `template_hooks` (`id` text,`tenant_id` text NOT NULL,`image_template_slug` text NOT NULL,`hook_type` text NOT NULL,`hook_template_slug` text NOT NULL,`enabled` numeric NOT NULL DEFAULT true,`note` text NOT NULL DEFAULT "",`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX `idx_hook_unique` ON `template_hooks`(`tenant_id`,`image_template_slug`,`hook_type`);
CREATE TABLE `claim_codes` (`code` text,`tenant_id` text NOT NULL,`credits` integer NOT NULL,`note` text NOT NULL DEFAULT "",`template_ids` JSON,`product_copy` text NOT NULL DEFAULT "",`product_images` JSON,`tutorial_pdf_url` text NOT NULL DEFAULT "",`tutorial_pdf_title` text NOT NULL DEFAULT "",`disabled` numeric NOT NULL DEFAULT false,`redeemed_by` text,`redeemed_email` text NOT NULL DEFAULT "",`redeemed_at` datetime,`created_at` datetime,PRIMARY KEY (`code`));
CREATE INDEX `idx_claim_codes_tenant_id` ON `claim_codes`(`tenant_id`);
CREATE TABLE `claim_redemptions` (`id` text,`code` text NOT NULL,`user_id` text NOT NULL,`email` text NOT NULL,`nickname` text NOT NULL DEFAULT "",`created_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_claim_redemptions_user_id` ON `claim_redemptions`(`user_id`);
CREATE UNIQUE INDEX `idx_claim_redemptions_code` ON `claim_redemptions`(`code`);
CREATE TABLE `template_grants` (`user_id` text,`template_id` text,`code` text NOT NULL,`created_at` datetime,PRIMARY KEY (`user_id`,`template_id`));
CREATE TABLE `uploads` (`id` text,`owner_kind` text NOT NULL,`owner_id` text NOT NULL,`tenant_id` text,`key` text NOT NULL,`url` text NOT NULL,`media_type` text NOT NULL,`mime` text NOT NULL,`size` integer NOT NULL,`committed` numeric NOT NULL DEFAULT true,`created_at` datetime,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX `idx_uploads_key` ON `uploads`(`key`);
CREATE INDEX `idx_uploads_tenant_id` ON `uploads`(`tenant_id`);
CREATE INDEX `idx_upload_owner` ON `uploads`(`owner_kind`,`owner_id`);
CREATE TABLE `invitations` (`code` text,`used_by` text,`used_at` datetime,`created_at` datetime,PRIMARY KEY (`code`));
CREATE TABLE `email_codes` (`id` text,`email` text NOT NULL,`code_hash` text NOT NULL,`client_ip` text NOT NULL DEFAULT "",`attempts` integer NOT NULL DEFAULT 0,`expires_at` datetime,`used_at` datetime,`created_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_email_codes_email` ON `email_codes`(`email`);
CREATE TABLE `device_authorizations` (`device_code_hash` text,`user_code` text NOT NULL,`status` text NOT NULL,`user_id` text,`interval` integer NOT NULL,`last_poll_at` datetime,`expires_at` datetime,`created_at` datetime,PRIMARY KEY (`device_code_hash`));
CREATE UNIQUE INDEX `idx_device_authorizations_user_code` ON `device_authorizations`(`user_code`);
CREATE TABLE `sessions` (`id` text,`kind` text NOT NULL,`tenant_id` text,`account_id` text,`user_id` text,`key_hash` text NOT NULL DEFAULT "",`csrf` text NOT NULL,`expires_at` datetime,`created_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_sessions_expires_at` ON `sessions`(`expires_at`);
CREATE INDEX `idx_sessions_user_id` ON `sessions`(`user_id`);
CREATE INDEX `idx_sessions_tenant_id` ON `sessions`(`tenant_id`);
CREATE TABLE `settings` (`key` text,`value` text NOT NULL,`updated_at` datetime,PRIMARY KEY (`key`));
CREATE TABLE `rate_counters` (`key` text,`window_start` datetime,`count` integer NOT NULL,PRIMARY KEY (`key`,`window_start`));
CREATE TABLE `usage_dailies` (`tenant_id` text,`day` text,`service` text,`agent_id` text,`count` integer NOT NULL,PRIMARY KEY (`tenant_id`,`day`,`service`,`agent_id`));
CREATE TABLE `idempotency_records` (`key` text,`body_hash` text NOT NULL,`status` integer NOT NULL,`response` blob,`created_at` datetime,PRIMARY KEY (`key`));
CREATE INDEX `idx_idempotency_records_created_at` ON `idempotency_records`(`created_at`);
CREATE INDEX idx_jobs_pending ON jobs (deadline) WHERE status = 'pending';
CREATE INDEX idx_video_tasks_open ON video_tasks (created_at) WHERE status IN ('pending', 'running');
CREATE TABLE `upstream_tasks` (`owner_id` text,`media` text NOT NULL,`upstream` text NOT NULL DEFAULT "",`ref` text NOT NULL DEFAULT "",`task_id` text NOT NULL DEFAULT "",`state` text NOT NULL DEFAULT "",`attempt` integer NOT NULL DEFAULT 0,`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`owner_id`));
CREATE TABLE `replicas` (`id` text,`host` text NOT NULL,`media` text NOT NULL,`started_at` datetime,`seen_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_replicas_seen_at` ON `replicas`(`seen_at`);
INSERT INTO `schema_migrations` (`version`, `name`, `applied_at`) VALUES
	(1, 'initial schema', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
	(2, 'console sessions remember the hash of their key', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
	(3, 'open jobs and video tasks are found through partial indexes', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
	(4, 'an upstream attempt row counts alike calls and names the process that made them', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
	(5, 'login tokens carry a version that ends them; e-mailed codes count wrong attempts; logins of claimed accounts end', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
	(6, 'submissions to upstream task protocols are recorded before they leave', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
	(7, 'replicas announce themselves (a replica with local media refuses to join others)', strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'));
