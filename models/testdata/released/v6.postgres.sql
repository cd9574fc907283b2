
CREATE TABLE public.accounts (
    id character varying(36) NOT NULL,
    tenant_id character varying(36) NOT NULL,
    email character varying(320) NOT NULL,
    nickname character varying(100) DEFAULT ''::character varying NOT NULL,
    shared boolean DEFAULT true NOT NULL,
    credits bigint DEFAULT 0 NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone,
    updated_at timestamp with time zone
);

CREATE TABLE public.api_keys (
    id character varying(36) NOT NULL,
    hash character varying(64) NOT NULL,
    kind character varying(16) NOT NULL,
    tenant_id character varying(36) NOT NULL,
    account_id character varying(36),
    sealed character varying(200) DEFAULT ''::character varying NOT NULL,
    created_at timestamp with time zone
);

CREATE TABLE public.claim_codes (
    code character varying(64) NOT NULL,
    tenant_id character varying(36) NOT NULL,
    credits bigint NOT NULL,
    note character varying(500) DEFAULT ''::character varying NOT NULL,
    template_ids jsonb,
    product_copy character varying(4000) DEFAULT ''::character varying NOT NULL,
    product_images jsonb,
    tutorial_pdf_url character varying(1000) DEFAULT ''::character varying NOT NULL,
    tutorial_pdf_title character varying(200) DEFAULT ''::character varying NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    redeemed_by character varying(36),
    redeemed_email character varying(320) DEFAULT ''::character varying NOT NULL,
    redeemed_at timestamp with time zone,
    created_at timestamp with time zone
);

CREATE TABLE public.claim_redemptions (
    id character varying(36) NOT NULL,
    code character varying(64) NOT NULL,
    user_id character varying(36) NOT NULL,
    email character varying(320) NOT NULL,
    nickname character varying(100) DEFAULT ''::character varying NOT NULL,
    created_at timestamp with time zone
);

CREATE TABLE public.device_authorizations (
    device_code_hash character varying(64) NOT NULL,
    user_code character varying(16) NOT NULL,
    status character varying(16) NOT NULL,
    user_id character varying(36),
    "interval" bigint NOT NULL,
    last_poll_at timestamp with time zone,
    expires_at timestamp with time zone,
    created_at timestamp with time zone
);

CREATE TABLE public.email_codes (
    id character varying(36) NOT NULL,
    email character varying(320) NOT NULL,
    code_hash character varying(64) NOT NULL,
    client_ip character varying(64) DEFAULT ''::character varying NOT NULL,
    attempts bigint DEFAULT 0 NOT NULL,
    expires_at timestamp with time zone,
    used_at timestamp with time zone,
    created_at timestamp with time zone
);

CREATE TABLE public.idempotency_records (
    key character varying(300) NOT NULL,
    body_hash character varying(64) NOT NULL,
    status bigint NOT NULL,
    response bytea,
    created_at timestamp with time zone
);

CREATE TABLE public.invitations (
    code character varying(64) NOT NULL,
    used_by character varying(36),
    used_at timestamp with time zone,
    created_at timestamp with time zone
);

CREATE TABLE public.jobs (
    id character varying(36) NOT NULL,
    kind character varying(32) DEFAULT 'image'::character varying NOT NULL,
    tenant_id character varying(36),
    account_id character varying(36),
    user_id character varying(36),
    status character varying(16) NOT NULL,
    progress character varying(300) DEFAULT ''::character varying NOT NULL,
    steps jsonb,
    params jsonb,
    credits bigint DEFAULT 0 NOT NULL,
    charged_to character varying(32) DEFAULT ''::character varying NOT NULL,
    cost_usd numeric DEFAULT 0 NOT NULL,
    cdn_url character varying(1000) DEFAULT ''::character varying NOT NULL,
    error character varying(1000),
    elapsed_ms bigint DEFAULT 0 NOT NULL,
    callback_url character varying(2000) DEFAULT ''::character varying NOT NULL,
    callback character varying(16) DEFAULT ''::character varying NOT NULL,
    callback_err character varying(500) DEFAULT ''::character varying NOT NULL,
    result_ref character varying(36) DEFAULT ''::character varying NOT NULL,
    deadline timestamp with time zone,
    created_at timestamp with time zone,
    updated_at timestamp with time zone,
    finished_at timestamp with time zone,
    refunded_at timestamp with time zone
);

CREATE TABLE public.ledger_entries (
    id bigint NOT NULL,
    at timestamp with time zone NOT NULL,
    tx_id character varying(36) NOT NULL,
    kind character varying(32) NOT NULL,
    balance character varying(32) NOT NULL,
    tenant_id character varying(36),
    account_id character varying(36),
    user_id character varying(36),
    delta bigint NOT NULL,
    after bigint NOT NULL,
    ref character varying(100) DEFAULT ''::character varying NOT NULL,
    note character varying(500) DEFAULT ''::character varying NOT NULL
);

CREATE SEQUENCE public.ledger_entries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.ledger_entries_id_seq OWNED BY public.ledger_entries.id;

CREATE TABLE public.rate_counters (
    key character varying(200) NOT NULL,
    window_start timestamp with time zone NOT NULL,
    count bigint NOT NULL
);

CREATE TABLE public.schema_migrations (
    version bigint NOT NULL,
    name text,
    applied_at timestamp with time zone
);

CREATE TABLE public.sessions (
    id character varying(64) NOT NULL,
    kind character varying(16) NOT NULL,
    tenant_id character varying(36),
    account_id character varying(36),
    user_id character varying(36),
    key_hash character varying(64) DEFAULT ''::character varying NOT NULL,
    csrf character varying(64) NOT NULL,
    expires_at timestamp with time zone,
    created_at timestamp with time zone
);

CREATE TABLE public.settings (
    key character varying(100) NOT NULL,
    value character varying(2000) NOT NULL,
    updated_at timestamp with time zone
);

CREATE TABLE public.template_grants (
    user_id character varying(36) NOT NULL,
    template_id character varying(36) NOT NULL,
    code character varying(64) NOT NULL,
    created_at timestamp with time zone
);

CREATE TABLE public.template_hooks (
    id character varying(36) NOT NULL,
    tenant_id character varying(36) NOT NULL,
    image_template_slug character varying(200) NOT NULL,
    hook_type character varying(16) NOT NULL,
    hook_template_slug character varying(200) NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    note character varying(500) DEFAULT ''::character varying NOT NULL,
    created_at timestamp with time zone,
    updated_at timestamp with time zone
);

CREATE TABLE public.templates (
    id character varying(36) NOT NULL,
    type character varying(16) NOT NULL,
    tenant_id character varying(36),
    user_id character varying(36),
    author_kind character varying(16) DEFAULT ''::character varying NOT NULL,
    author_id character varying(36) DEFAULT ''::character varying NOT NULL,
    slug character varying(200),
    zh_name character varying(200) NOT NULL,
    ratio character varying(16) DEFAULT ''::character varying NOT NULL,
    sample_images jsonb,
    template_type character varying(64) DEFAULT ''::character varying NOT NULL,
    category character varying(64) DEFAULT ''::character varying NOT NULL,
    domain character varying(64) DEFAULT ''::character varying NOT NULL,
    genre character varying(64) DEFAULT ''::character varying NOT NULL,
    description character varying(2000) DEFAULT ''::character varying NOT NULL,
    variable_labels jsonb,
    generation_configs jsonb,
    active boolean DEFAULT true NOT NULL,
    gated boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone,
    updated_at timestamp with time zone
);

CREATE TABLE public.tenants (
    id character varying(36) NOT NULL,
    name character varying(200) NOT NULL,
    spendable bigint DEFAULT 0 NOT NULL,
    reserved bigint DEFAULT 0 NOT NULL,
    unmetered boolean DEFAULT false NOT NULL,
    quota_monthly bigint,
    used_month bigint DEFAULT 0 NOT NULL,
    used_month_key character varying(7) DEFAULT ''::character varying NOT NULL,
    markup numeric DEFAULT 1 NOT NULL,
    binding character varying(200) DEFAULT ''::character varying NOT NULL,
    callback_secret character varying(100) NOT NULL,
    created_at timestamp with time zone,
    updated_at timestamp with time zone
);

CREATE TABLE public.uploads (
    id character varying(36) NOT NULL,
    owner_kind character varying(16) NOT NULL,
    owner_id character varying(36) NOT NULL,
    tenant_id character varying(36),
    key character varying(500) NOT NULL,
    url character varying(1000) NOT NULL,
    media_type character varying(16) NOT NULL,
    mime character varying(100) NOT NULL,
    size bigint NOT NULL,
    committed boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone
);

CREATE TABLE public.upstream_attempts (
    id bigint NOT NULL,
    upstream character varying(200) NOT NULL,
    at timestamp with time zone NOT NULL,
    job_id character varying(36) DEFAULT ''::character varying NOT NULL,
    ok boolean NOT NULL,
    latency_ms bigint NOT NULL,
    class character varying(16) DEFAULT ''::character varying NOT NULL,
    count bigint DEFAULT 1 NOT NULL,
    origin character varying(32) DEFAULT ''::character varying NOT NULL
);

CREATE SEQUENCE public.upstream_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.upstream_attempts_id_seq OWNED BY public.upstream_attempts.id;

CREATE TABLE public.upstream_states (
    upstream character varying(200) NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    removed boolean DEFAULT false NOT NULL,
    reason character varying(500) DEFAULT ''::character varying NOT NULL,
    since timestamp with time zone
);

CREATE TABLE public.upstream_tasks (
    owner_id character varying(36) NOT NULL,
    media character varying(16) NOT NULL,
    upstream character varying(200) DEFAULT ''::character varying NOT NULL,
    ref character varying(80) DEFAULT ''::character varying NOT NULL,
    task_id character varying(500) DEFAULT ''::character varying NOT NULL,
    state character varying(16) DEFAULT ''::character varying NOT NULL,
    attempt bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone,
    updated_at timestamp with time zone
);

CREATE TABLE public.usage_dailies (
    tenant_id character varying(36) NOT NULL,
    day character varying(10) NOT NULL,
    service character varying(32) NOT NULL,
    agent_id character varying(100) NOT NULL,
    count bigint NOT NULL
);

CREATE TABLE public.users (
    id character varying(36) NOT NULL,
    email character varying(320) NOT NULL,
    nickname character varying(100) DEFAULT ''::character varying NOT NULL,
    password_hash character varying(200) DEFAULT ''::character varying NOT NULL,
    o_id_c_subject character varying(300),
    credits bigint DEFAULT 0 NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    token_version bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone,
    updated_at timestamp with time zone
);

CREATE TABLE public.video_tasks (
    id character varying(36) NOT NULL,
    tenant_id character varying(36),
    account_id character varying(36),
    user_id character varying(36),
    status character varying(16) NOT NULL,
    model character varying(64) NOT NULL,
    resolution character varying(16) NOT NULL,
    duration bigint NOT NULL,
    ratio character varying(16) DEFAULT ''::character varying NOT NULL,
    params jsonb,
    credits bigint NOT NULL,
    charged_to character varying(32) DEFAULT ''::character varying NOT NULL,
    progress bigint DEFAULT 0 NOT NULL,
    video_url character varying(1000) DEFAULT ''::character varying NOT NULL,
    error character varying(1000),
    upstream character varying(200) DEFAULT ''::character varying NOT NULL,
    upstream_task_id character varying(200) DEFAULT ''::character varying NOT NULL,
    cost_usd numeric DEFAULT 0 NOT NULL,
    created_at timestamp with time zone,
    updated_at timestamp with time zone,
    finished_at timestamp with time zone,
    refunded_at timestamp with time zone
);

CREATE TABLE public.video_templates (
    id character varying(36) NOT NULL,
    tenant_id character varying(36),
    user_id character varying(36),
    author_kind character varying(16) DEFAULT ''::character varying NOT NULL,
    author_id character varying(36) DEFAULT ''::character varying NOT NULL,
    slug character varying(200) NOT NULL,
    zh_name character varying(200) NOT NULL,
    sample_cover_image character varying(1000) DEFAULT ''::character varying NOT NULL,
    sample_video_url character varying(1000) DEFAULT ''::character varying NOT NULL,
    category character varying(64) DEFAULT ''::character varying NOT NULL,
    description character varying(2000) DEFAULT ''::character varying NOT NULL,
    generation_configs jsonb,
    active boolean DEFAULT true NOT NULL,
    gated boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone,
    updated_at timestamp with time zone
);

ALTER TABLE ONLY public.ledger_entries ALTER COLUMN id SET DEFAULT nextval('public.ledger_entries_id_seq'::regclass);

ALTER TABLE ONLY public.upstream_attempts ALTER COLUMN id SET DEFAULT nextval('public.upstream_attempts_id_seq'::regclass);

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.claim_codes
    ADD CONSTRAINT claim_codes_pkey PRIMARY KEY (code);

ALTER TABLE ONLY public.claim_redemptions
    ADD CONSTRAINT claim_redemptions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.device_authorizations
    ADD CONSTRAINT device_authorizations_pkey PRIMARY KEY (device_code_hash);

ALTER TABLE ONLY public.email_codes
    ADD CONSTRAINT email_codes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.idempotency_records
    ADD CONSTRAINT idempotency_records_pkey PRIMARY KEY (key);

ALTER TABLE ONLY public.invitations
    ADD CONSTRAINT invitations_pkey PRIMARY KEY (code);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.ledger_entries
    ADD CONSTRAINT ledger_entries_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.rate_counters
    ADD CONSTRAINT rate_counters_pkey PRIMARY KEY (key, window_start);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.settings
    ADD CONSTRAINT settings_pkey PRIMARY KEY (key);

ALTER TABLE ONLY public.template_grants
    ADD CONSTRAINT template_grants_pkey PRIMARY KEY (user_id, template_id);

ALTER TABLE ONLY public.template_hooks
    ADD CONSTRAINT template_hooks_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.templates
    ADD CONSTRAINT templates_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.uploads
    ADD CONSTRAINT uploads_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.upstream_attempts
    ADD CONSTRAINT upstream_attempts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.upstream_states
    ADD CONSTRAINT upstream_states_pkey PRIMARY KEY (upstream);

ALTER TABLE ONLY public.upstream_tasks
    ADD CONSTRAINT upstream_tasks_pkey PRIMARY KEY (owner_id);

ALTER TABLE ONLY public.usage_dailies
    ADD CONSTRAINT usage_dailies_pkey PRIMARY KEY (tenant_id, day, service, agent_id);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.video_tasks
    ADD CONSTRAINT video_tasks_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.video_templates
    ADD CONSTRAINT video_templates_pkey PRIMARY KEY (id);

CREATE INDEX idx_accounts_tenant_id ON public.accounts USING btree (tenant_id);

CREATE INDEX idx_api_keys_account_id ON public.api_keys USING btree (account_id);

CREATE UNIQUE INDEX idx_api_keys_hash ON public.api_keys USING btree (hash);

CREATE INDEX idx_api_keys_tenant_id ON public.api_keys USING btree (tenant_id);

CREATE INDEX idx_attempt_up_at ON public.upstream_attempts USING btree (upstream, at);

CREATE INDEX idx_claim_codes_tenant_id ON public.claim_codes USING btree (tenant_id);

CREATE UNIQUE INDEX idx_claim_redemptions_code ON public.claim_redemptions USING btree (code);

CREATE INDEX idx_claim_redemptions_user_id ON public.claim_redemptions USING btree (user_id);

CREATE UNIQUE INDEX idx_device_authorizations_user_code ON public.device_authorizations USING btree (user_code);

CREATE INDEX idx_email_codes_email ON public.email_codes USING btree (email);

CREATE UNIQUE INDEX idx_hook_unique ON public.template_hooks USING btree (tenant_id, image_template_slug, hook_type);

CREATE INDEX idx_idempotency_records_created_at ON public.idempotency_records USING btree (created_at);

CREATE INDEX idx_jobs_account_id ON public.jobs USING btree (account_id);

CREATE INDEX idx_jobs_pending ON public.jobs USING btree (deadline) WHERE ((status)::text = 'pending'::text);

CREATE INDEX idx_jobs_tenant_created ON public.jobs USING btree (tenant_id, created_at);

CREATE INDEX idx_jobs_user_id ON public.jobs USING btree (user_id);

CREATE INDEX idx_ledger_entries_account_id ON public.ledger_entries USING btree (account_id);

CREATE INDEX idx_ledger_entries_at ON public.ledger_entries USING btree (at);

CREATE INDEX idx_ledger_entries_ref ON public.ledger_entries USING btree (ref);

CREATE INDEX idx_ledger_entries_tenant_id ON public.ledger_entries USING btree (tenant_id);

CREATE INDEX idx_ledger_entries_tx_id ON public.ledger_entries USING btree (tx_id);

CREATE INDEX idx_ledger_entries_user_id ON public.ledger_entries USING btree (user_id);

CREATE INDEX idx_sessions_expires_at ON public.sessions USING btree (expires_at);

CREATE INDEX idx_sessions_tenant_id ON public.sessions USING btree (tenant_id);

CREATE INDEX idx_sessions_user_id ON public.sessions USING btree (user_id);

CREATE UNIQUE INDEX idx_templates_slug ON public.templates USING btree (slug);

CREATE INDEX idx_templates_tenant_id ON public.templates USING btree (tenant_id);

CREATE INDEX idx_templates_type ON public.templates USING btree (type);

CREATE INDEX idx_templates_user_id ON public.templates USING btree (user_id);

CREATE INDEX idx_upload_owner ON public.uploads USING btree (owner_kind, owner_id);

CREATE UNIQUE INDEX idx_uploads_key ON public.uploads USING btree (key);

CREATE INDEX idx_uploads_tenant_id ON public.uploads USING btree (tenant_id);

CREATE INDEX idx_upstream_attempts_at ON public.upstream_attempts USING btree (at);

CREATE INDEX idx_upstream_attempts_job_id ON public.upstream_attempts USING btree (job_id);

CREATE UNIQUE INDEX idx_users_email ON public.users USING btree (email);

CREATE UNIQUE INDEX idx_users_o_id_c_subject ON public.users USING btree (o_id_c_subject);

CREATE INDEX idx_video_tasks_account_id ON public.video_tasks USING btree (account_id);

CREATE INDEX idx_video_tasks_open ON public.video_tasks USING btree (created_at) WHERE status IN ('pending', 'running');

CREATE INDEX idx_video_tasks_tenant_id ON public.video_tasks USING btree (tenant_id);

CREATE INDEX idx_video_tasks_user_id ON public.video_tasks USING btree (user_id);

CREATE UNIQUE INDEX idx_video_templates_slug ON public.video_templates USING btree (slug);

CREATE INDEX idx_video_templates_tenant_id ON public.video_templates USING btree (tenant_id);

CREATE INDEX idx_video_templates_user_id ON public.video_templates USING btree (user_id);

INSERT INTO public.schema_migrations VALUES (1, 'initial schema', '2026-11-26 21:03:36.630916+00');
INSERT INTO public.schema_migrations VALUES (2, 'console sessions remember the hash of their key', '2026-11-26 21:03:36.689149+00');
INSERT INTO public.schema_migrations VALUES (3, 'open jobs and video tasks are found through partial indexes', '2026-11-26 21:03:36.694622+00');
INSERT INTO public.schema_migrations VALUES (4, 'an upstream attempt row counts alike calls and names the process that made them', '2026-11-26 21:03:36.726497+00');
INSERT INTO public.schema_migrations VALUES (5, 'login tokens carry a version that ends them; e-mailed codes count wrong attempts; logins of claimed accounts end', '2026-11-26 21:03:36.735511+00');
INSERT INTO public.schema_migrations VALUES (6, 'submissions to upstream task protocols are recorded before they leave', '2026-11-26 21:03:36.741102+00');

