-- Step 6 of schema_migrations, frozen: submissions to upstream task protocols are recorded before they leave.
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
INSERT INTO schema_migrations (version, name, applied_at) VALUES (6, 'submissions to upstream task protocols are recorded before they leave', now());
