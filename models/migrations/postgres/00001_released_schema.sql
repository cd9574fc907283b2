-- Version 1: the schema as released before the migrations moved to goose, exactly as a fresh database
-- got it then (GORM's statements after the steps 1 to 7 of schema_migrations). Never edit this file:
-- append a new numbered one.
--
-- schema_migrations keeps the record of the old numbering (steps 1 to 7, all contained here), so that
-- a release from before goose, started on this database, finds nothing left to do. A database of that
-- numbering is brought to this version by the frozen steps of legacy/ instead (models.Migrate).

-- +goose Up
CREATE TABLE schema_migrations (
	version bigint NOT NULL,
	name text,
	applied_at timestamptz,
	PRIMARY KEY (version)
);

CREATE TABLE tenants (
	id varchar(36) NOT NULL,
	name varchar(200) NOT NULL,
	spendable bigint NOT NULL DEFAULT 0,
	reserved bigint NOT NULL DEFAULT 0,
	unmetered boolean NOT NULL DEFAULT false,
	quota_monthly bigint,
	used_month bigint NOT NULL DEFAULT 0,
	used_month_key varchar(7) NOT NULL DEFAULT '',
	markup numeric NOT NULL DEFAULT 1,
	binding varchar(200) NOT NULL DEFAULT '',
	callback_secret varchar(100) NOT NULL,
	created_at timestamptz,
	updated_at timestamptz,
	PRIMARY KEY (id)
);

CREATE TABLE api_keys (
	id varchar(36) NOT NULL,
	hash varchar(64) NOT NULL,
	kind varchar(16) NOT NULL,
	tenant_id varchar(36) NOT NULL,
	account_id varchar(36),
	sealed varchar(200) NOT NULL DEFAULT '',
	created_at timestamptz,
	PRIMARY KEY (id)
);
CREATE INDEX idx_api_keys_account_id ON api_keys (account_id);
CREATE UNIQUE INDEX idx_api_keys_hash ON api_keys (hash);
CREATE INDEX idx_api_keys_tenant_id ON api_keys (tenant_id);

CREATE TABLE accounts (
	id varchar(36) NOT NULL,
	tenant_id varchar(36) NOT NULL,
	email varchar(320) NOT NULL,
	nickname varchar(100) NOT NULL DEFAULT '',
	shared boolean NOT NULL DEFAULT true,
	credits bigint NOT NULL DEFAULT 0,
	disabled boolean NOT NULL DEFAULT false,
	created_at timestamptz,
	updated_at timestamptz,
	PRIMARY KEY (id)
);
CREATE INDEX idx_accounts_tenant_id ON accounts (tenant_id);

CREATE TABLE users (
	id varchar(36) NOT NULL,
	email varchar(320) NOT NULL,
	nickname varchar(100) NOT NULL DEFAULT '',
	password_hash varchar(200) NOT NULL DEFAULT '',
	o_id_c_subject varchar(300),
	credits bigint NOT NULL DEFAULT 0,
	disabled boolean NOT NULL DEFAULT false,
	token_version bigint NOT NULL DEFAULT 0,
	created_at timestamptz,
	updated_at timestamptz,
	PRIMARY KEY (id)
);
CREATE UNIQUE INDEX idx_users_email ON users (email);
CREATE UNIQUE INDEX idx_users_o_id_c_subject ON users (o_id_c_subject);

CREATE TABLE ledger_entries (
	id bigserial NOT NULL,
	at timestamptz NOT NULL,
	tx_id varchar(36) NOT NULL,
	kind varchar(32) NOT NULL,
	balance varchar(32) NOT NULL,
	tenant_id varchar(36),
	account_id varchar(36),
	user_id varchar(36),
	delta bigint NOT NULL,
	after bigint NOT NULL,
	ref varchar(100) NOT NULL DEFAULT '',
	note varchar(500) NOT NULL DEFAULT '',
	PRIMARY KEY (id)
);
CREATE INDEX idx_ledger_entries_account_id ON ledger_entries (account_id);
CREATE INDEX idx_ledger_entries_at ON ledger_entries (at);
CREATE INDEX idx_ledger_entries_ref ON ledger_entries (ref);
CREATE INDEX idx_ledger_entries_tenant_id ON ledger_entries (tenant_id);
CREATE INDEX idx_ledger_entries_tx_id ON ledger_entries (tx_id);
CREATE INDEX idx_ledger_entries_user_id ON ledger_entries (user_id);

CREATE TABLE jobs (
	id varchar(36) NOT NULL,
	kind varchar(32) NOT NULL DEFAULT 'image',
	tenant_id varchar(36),
	account_id varchar(36),
	user_id varchar(36),
	status varchar(16) NOT NULL,
	progress varchar(300) NOT NULL DEFAULT '',
	steps jsonb,
	params jsonb,
	credits bigint NOT NULL DEFAULT 0,
	charged_to varchar(32) NOT NULL DEFAULT '',
	cost_usd numeric NOT NULL DEFAULT 0,
	cdn_url varchar(1000) NOT NULL DEFAULT '',
	error varchar(1000),
	elapsed_ms bigint NOT NULL DEFAULT 0,
	callback_url varchar(2000) NOT NULL DEFAULT '',
	callback varchar(16) NOT NULL DEFAULT '',
	callback_err varchar(500) NOT NULL DEFAULT '',
	result_ref varchar(36) NOT NULL DEFAULT '',
	deadline timestamptz,
	created_at timestamptz,
	updated_at timestamptz,
	finished_at timestamptz,
	refunded_at timestamptz,
	PRIMARY KEY (id)
);
CREATE INDEX idx_jobs_account_id ON jobs (account_id);
CREATE INDEX idx_jobs_tenant_created ON jobs (tenant_id, created_at);
CREATE INDEX idx_jobs_user_id ON jobs (user_id);

CREATE TABLE upstream_attempts (
	id bigserial NOT NULL,
	upstream varchar(200) NOT NULL,
	at timestamptz NOT NULL,
	job_id varchar(36) NOT NULL DEFAULT '',
	ok boolean NOT NULL,
	latency_ms bigint NOT NULL,
	class varchar(16) NOT NULL DEFAULT '',
	count bigint NOT NULL DEFAULT 1,
	origin varchar(32) NOT NULL DEFAULT '',
	PRIMARY KEY (id)
);
CREATE INDEX idx_attempt_up_at ON upstream_attempts (upstream, at);
CREATE INDEX idx_upstream_attempts_at ON upstream_attempts (at);
CREATE INDEX idx_upstream_attempts_job_id ON upstream_attempts (job_id);

CREATE TABLE upstream_states (
	upstream varchar(200) NOT NULL,
	disabled boolean NOT NULL DEFAULT false,
	removed boolean NOT NULL DEFAULT false,
	reason varchar(500) NOT NULL DEFAULT '',
	since timestamptz,
	PRIMARY KEY (upstream)
);

CREATE TABLE video_tasks (
	id varchar(36) NOT NULL,
	tenant_id varchar(36),
	account_id varchar(36),
	user_id varchar(36),
	status varchar(16) NOT NULL,
	model varchar(64) NOT NULL,
	resolution varchar(16) NOT NULL,
	duration bigint NOT NULL,
	ratio varchar(16) NOT NULL DEFAULT '',
	params jsonb,
	credits bigint NOT NULL,
	charged_to varchar(32) NOT NULL DEFAULT '',
	progress bigint NOT NULL DEFAULT 0,
	video_url varchar(1000) NOT NULL DEFAULT '',
	error varchar(1000),
	upstream varchar(200) NOT NULL DEFAULT '',
	upstream_task_id varchar(200) NOT NULL DEFAULT '',
	cost_usd numeric NOT NULL DEFAULT 0,
	created_at timestamptz,
	updated_at timestamptz,
	finished_at timestamptz,
	refunded_at timestamptz,
	PRIMARY KEY (id)
);
CREATE INDEX idx_video_tasks_account_id ON video_tasks (account_id);
CREATE INDEX idx_video_tasks_tenant_id ON video_tasks (tenant_id);
CREATE INDEX idx_video_tasks_user_id ON video_tasks (user_id);

CREATE TABLE templates (
	id varchar(36) NOT NULL,
	type varchar(16) NOT NULL,
	tenant_id varchar(36),
	user_id varchar(36),
	author_kind varchar(16) NOT NULL DEFAULT '',
	author_id varchar(36) NOT NULL DEFAULT '',
	slug varchar(200),
	zh_name varchar(200) NOT NULL,
	ratio varchar(16) NOT NULL DEFAULT '',
	sample_images jsonb,
	template_type varchar(64) NOT NULL DEFAULT '',
	category varchar(64) NOT NULL DEFAULT '',
	domain varchar(64) NOT NULL DEFAULT '',
	genre varchar(64) NOT NULL DEFAULT '',
	description varchar(2000) NOT NULL DEFAULT '',
	variable_labels jsonb,
	generation_configs jsonb,
	active boolean NOT NULL DEFAULT true,
	gated boolean NOT NULL DEFAULT false,
	created_at timestamptz,
	updated_at timestamptz,
	PRIMARY KEY (id)
);
CREATE UNIQUE INDEX idx_templates_slug ON templates (slug);
CREATE INDEX idx_templates_tenant_id ON templates (tenant_id);
CREATE INDEX idx_templates_type ON templates (type);
CREATE INDEX idx_templates_user_id ON templates (user_id);

CREATE TABLE video_templates (
	id varchar(36) NOT NULL,
	tenant_id varchar(36),
	user_id varchar(36),
	author_kind varchar(16) NOT NULL DEFAULT '',
	author_id varchar(36) NOT NULL DEFAULT '',
	slug varchar(200) NOT NULL,
	zh_name varchar(200) NOT NULL,
	sample_cover_image varchar(1000) NOT NULL DEFAULT '',
	sample_video_url varchar(1000) NOT NULL DEFAULT '',
	category varchar(64) NOT NULL DEFAULT '',
	description varchar(2000) NOT NULL DEFAULT '',
	generation_configs jsonb,
	active boolean NOT NULL DEFAULT true,
	gated boolean NOT NULL DEFAULT false,
	created_at timestamptz,
	updated_at timestamptz,
	PRIMARY KEY (id)
);
CREATE UNIQUE INDEX idx_video_templates_slug ON video_templates (slug);
CREATE INDEX idx_video_templates_tenant_id ON video_templates (tenant_id);
CREATE INDEX idx_video_templates_user_id ON video_templates (user_id);

CREATE TABLE template_hooks (
	id varchar(36) NOT NULL,
	tenant_id varchar(36) NOT NULL,
	image_template_slug varchar(200) NOT NULL,
	hook_type varchar(16) NOT NULL,
	hook_template_slug varchar(200) NOT NULL,
	enabled boolean NOT NULL DEFAULT true,
	note varchar(500) NOT NULL DEFAULT '',
	created_at timestamptz,
	updated_at timestamptz,
	PRIMARY KEY (id)
);
CREATE UNIQUE INDEX idx_hook_unique ON template_hooks (tenant_id, image_template_slug, hook_type);

CREATE TABLE claim_codes (
	code varchar(64) NOT NULL,
	tenant_id varchar(36) NOT NULL,
	credits bigint NOT NULL,
	note varchar(500) NOT NULL DEFAULT '',
	template_ids jsonb,
	product_copy varchar(4000) NOT NULL DEFAULT '',
	product_images jsonb,
	tutorial_pdf_url varchar(1000) NOT NULL DEFAULT '',
	tutorial_pdf_title varchar(200) NOT NULL DEFAULT '',
	disabled boolean NOT NULL DEFAULT false,
	redeemed_by varchar(36),
	redeemed_email varchar(320) NOT NULL DEFAULT '',
	redeemed_at timestamptz,
	created_at timestamptz,
	PRIMARY KEY (code)
);
CREATE INDEX idx_claim_codes_tenant_id ON claim_codes (tenant_id);

CREATE TABLE claim_redemptions (
	id varchar(36) NOT NULL,
	code varchar(64) NOT NULL,
	user_id varchar(36) NOT NULL,
	email varchar(320) NOT NULL,
	nickname varchar(100) NOT NULL DEFAULT '',
	created_at timestamptz,
	PRIMARY KEY (id)
);
CREATE UNIQUE INDEX idx_claim_redemptions_code ON claim_redemptions (code);
CREATE INDEX idx_claim_redemptions_user_id ON claim_redemptions (user_id);

CREATE TABLE template_grants (
	user_id varchar(36) NOT NULL,
	template_id varchar(36) NOT NULL,
	code varchar(64) NOT NULL,
	created_at timestamptz,
	PRIMARY KEY (user_id, template_id)
);

CREATE TABLE uploads (
	id varchar(36) NOT NULL,
	owner_kind varchar(16) NOT NULL,
	owner_id varchar(36) NOT NULL,
	tenant_id varchar(36),
	key varchar(500) NOT NULL,
	url varchar(1000) NOT NULL,
	media_type varchar(16) NOT NULL,
	mime varchar(100) NOT NULL,
	size bigint NOT NULL,
	committed boolean NOT NULL DEFAULT true,
	created_at timestamptz,
	PRIMARY KEY (id)
);
CREATE INDEX idx_upload_owner ON uploads (owner_kind, owner_id);
CREATE UNIQUE INDEX idx_uploads_key ON uploads (key);
CREATE INDEX idx_uploads_tenant_id ON uploads (tenant_id);

CREATE TABLE invitations (
	code varchar(64) NOT NULL,
	used_by varchar(36),
	used_at timestamptz,
	created_at timestamptz,
	PRIMARY KEY (code)
);

CREATE TABLE email_codes (
	id varchar(36) NOT NULL,
	email varchar(320) NOT NULL,
	code_hash varchar(64) NOT NULL,
	client_ip varchar(64) NOT NULL DEFAULT '',
	attempts bigint NOT NULL DEFAULT 0,
	expires_at timestamptz,
	used_at timestamptz,
	created_at timestamptz,
	PRIMARY KEY (id)
);
CREATE INDEX idx_email_codes_email ON email_codes (email);

CREATE TABLE device_authorizations (
	device_code_hash varchar(64) NOT NULL,
	user_code varchar(16) NOT NULL,
	status varchar(16) NOT NULL,
	user_id varchar(36),
	"interval" bigint NOT NULL,
	last_poll_at timestamptz,
	expires_at timestamptz,
	created_at timestamptz,
	PRIMARY KEY (device_code_hash)
);
CREATE UNIQUE INDEX idx_device_authorizations_user_code ON device_authorizations (user_code);

CREATE TABLE sessions (
	id varchar(64) NOT NULL,
	kind varchar(16) NOT NULL,
	tenant_id varchar(36),
	account_id varchar(36),
	user_id varchar(36),
	key_hash varchar(64) NOT NULL DEFAULT '',
	csrf varchar(64) NOT NULL,
	expires_at timestamptz,
	created_at timestamptz,
	PRIMARY KEY (id)
);
CREATE INDEX idx_sessions_expires_at ON sessions (expires_at);
CREATE INDEX idx_sessions_tenant_id ON sessions (tenant_id);
CREATE INDEX idx_sessions_user_id ON sessions (user_id);

CREATE TABLE settings (
	key varchar(100) NOT NULL,
	value varchar(2000) NOT NULL,
	updated_at timestamptz,
	PRIMARY KEY (key)
);

CREATE TABLE rate_counters (
	key varchar(200) NOT NULL,
	window_start timestamptz NOT NULL,
	count bigint NOT NULL,
	PRIMARY KEY (key, window_start)
);

CREATE TABLE usage_dailies (
	tenant_id varchar(36) NOT NULL,
	day varchar(10) NOT NULL,
	service varchar(32) NOT NULL,
	agent_id varchar(100) NOT NULL,
	count bigint NOT NULL,
	PRIMARY KEY (tenant_id, day, service, agent_id)
);

CREATE TABLE idempotency_records (
	key varchar(300) NOT NULL,
	body_hash varchar(64) NOT NULL,
	status bigint NOT NULL,
	response bytea,
	created_at timestamptz,
	PRIMARY KEY (key)
);
CREATE INDEX idx_idempotency_records_created_at ON idempotency_records (created_at);

CREATE TABLE upstream_tasks (
	owner_id varchar(36) NOT NULL,
	media varchar(16) NOT NULL,
	upstream varchar(200) NOT NULL DEFAULT '',
	ref varchar(80) NOT NULL DEFAULT '',
	task_id varchar(500) NOT NULL DEFAULT '',
	state varchar(16) NOT NULL DEFAULT '',
	attempt bigint NOT NULL DEFAULT 0,
	created_at timestamptz,
	updated_at timestamptz,
	PRIMARY KEY (owner_id)
);

CREATE TABLE replicas (
	id varchar(64) NOT NULL,
	host varchar(255) NOT NULL,
	media varchar(16) NOT NULL,
	started_at timestamptz,
	seen_at timestamptz,
	PRIMARY KEY (id)
);
CREATE INDEX idx_replicas_seen_at ON replicas (seen_at);

CREATE INDEX idx_jobs_pending ON jobs (deadline) WHERE status = 'pending';
CREATE INDEX idx_video_tasks_open ON video_tasks (created_at) WHERE status IN ('pending', 'running');

INSERT INTO schema_migrations (version, name, applied_at) VALUES
	(1, 'initial schema', now()),
	(2, 'console sessions remember the hash of their key', now()),
	(3, 'open jobs and video tasks are found through partial indexes', now()),
	(4, 'an upstream attempt row counts alike calls and names the process that made them', now()),
	(5, 'login tokens carry a version that ends them; e-mailed codes count wrong attempts; logins of claimed accounts end', now()),
	(6, 'submissions to upstream task protocols are recorded before they leave', now()),
	(7, 'replicas announce themselves (a replica with local media refuses to join others)', now());
