-- Step 7 of schema_migrations, frozen: replicas announce themselves (a replica with local media refuses to join others).
CREATE TABLE replicas (
	id varchar(64) NOT NULL,
	host varchar(255) NOT NULL,
	media varchar(16) NOT NULL,
	started_at timestamptz,
	seen_at timestamptz,
	PRIMARY KEY (id)
);
CREATE INDEX idx_replicas_seen_at ON replicas (seen_at);
INSERT INTO schema_migrations (version, name, applied_at) VALUES (7, 'replicas announce themselves (a replica with local media refuses to join others)', now());
