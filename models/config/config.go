// Package config is the service configuration of decision D2: every setting with its environment
// variable, flag, default and validation. It is infrastructure: it imports nothing of the core (models
// re-exports its names).
package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config is the service configuration of decision D2; every field has an environment variable and an equal flag.
type Config struct {
	Addr              string
	DatabaseURL       string
	DataDir           string
	BaseURL           string
	CDNURL            string
	SiteURL           string
	ClaimSiteURL      string
	AdminKey          string
	Upstreams         string
	Secret            string
	AllowPrivateURLs  bool
	GenerateRate      int
	UploadRate        int
	Workers           int
	S3Endpoint        string
	S3Bucket          string
	S3Region          string
	S3AccessKey       string
	S3SecretKey       string
	S3PublicURL       string
	SMTPURL           string
	USDCNY            float64
	MetricsAddr       string
	JobDeadline       time.Duration
	OIDCIssuer        string
	OIDCClientID      string
	OIDCClientSecret  string
	PresignRegionRule string

	// MaxSubscriptionsPerIdentity bounds the subscriptions one identity holds open at once on one replica.
	MaxSubscriptionsPerIdentity int
	// DBMaxConns bounds the PostgreSQL connections of this replica (ConnBudget).
	DBMaxConns int
	// MediaShared says the local media directory is shared by every replica.
	MediaShared bool
	// DrainWindow and ShutdownGrace shape a stop on SIGTERM (cmd/studio serve).
	DrainWindow, ShutdownGrace time.Duration
}

// ConfigVar describes one configuration variable: its environment name, flag, default and meaning.
type ConfigVar struct {
	Env     string
	Flag    string
	Default string
	Usage   string
	set     func(c *Config, v string) error
}

func str(p func(c *Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

// ConfigVars lists every variable in the order of the README's configuration table.
var ConfigVars = []ConfigVar{
	{"SERVICE_ADDR", "addr", "127.0.0.1:8080", "listen address", str(func(c *Config) *string { return &c.Addr })},
	{"DATABASE_URL", "database-url", "sqlite://./data/studio.db", "sqlite://PATH (embedded, pure Go) or postgres://...", str(func(c *Config) *string { return &c.DatabaseURL })},
	{"SERVICE_DATA_DIR", "data-dir", "./data", "local media store and other files", str(func(c *Config) *string { return &c.DataDir })},
	{"SERVICE_BASE_URL", "base-url", "", "public base URL (default http://{SERVICE_ADDR})", str(func(c *Config) *string { return &c.BaseURL })},
	{"SERVICE_CDN_URL", "cdn-url", "", "where stored media is served (default {base_url}/media)", str(func(c *Config) *string { return &c.CDNURL })},
	{"SERVICE_SITE_URL", "site-url", "", "public website (default {base_url})", str(func(c *Config) *string { return &c.SiteURL })},
	{"SERVICE_CLAIM_SITE_URL", "claim-site-url", "", "host of claim landing pages (default {base_url})", str(func(c *Config) *string { return &c.ClaimSiteURL })},
	{"SERVICE_ADMIN_KEY", "admin-key", "", "platform administrator key (unset: generated on first start)", str(func(c *Config) *string { return &c.AdminKey })},
	{"SERVICE_UPSTREAMS", "upstreams", "", "path of the upstreams YAML file (unset: built-in upstreams only)", str(func(c *Config) *string { return &c.Upstreams })},
	{"SERVICE_SECRET", "secret", "", "signs sessions, JWTs, callbacks (unset: generated once, stored in the database)", str(func(c *Config) *string { return &c.Secret })},
	{"SERVICE_ALLOW_PRIVATE_URLS", "allow-private-urls", "false", "let callbacks and fetched URLs reach loopback/private addresses", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		c.AllowPrivateURLs = b
		return err
	}},
	{"SERVICE_GENERATE_RATE", "generate-rate", "120", "image generation calls per hour per identity", func(c *Config, v string) error { return positiveInt(&c.GenerateRate, v) }},
	{"SERVICE_UPLOAD_RATE", "upload-rate", "120", "uploads per hour per owner", func(c *Config, v string) error { return positiveInt(&c.UploadRate, v) }},
	{"SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY", "max-subscriptions-per-identity", "100", "subscriptions (GraphQL job and video progress, the console's live job list) one identity may hold open at once on one replica", func(c *Config, v string) error {
		return positiveInt(&c.MaxSubscriptionsPerIdentity, v)
	}},
	{"SERVICE_DB_MAX_CONNS", "db-max-conns", "30", "PostgreSQL connections this replica opens at most, split between requests, background work, the queue and 3 notification connections (pool_max_conns in DATABASE_URL overrides it); N replicas need N times it", func(c *Config, v string) error {
		if err := positiveInt(&c.DBMaxConns, v); err != nil {
			return err
		}
		if c.DBMaxConns < MinMaxConns {
			return fmt.Errorf("must be at least %d (2 for notifications, the queue, background work and requests)", MinMaxConns)
		}
		return nil
	}},
	{"SERVICE_WORKERS", "workers", "50", "runs of the queue this replica works on at once: each is short (picking a job up, one poll of a provider's task, a callback, an e-mail). It does not bound the generations in flight: those wait on their upstreams without a worker (bounded by memory and each upstream's `max_concurrency`); lower it to leave CPU to requests", func(c *Config, v string) error { return positiveInt(&c.Workers, v) }},
	{"SERVICE_MEDIA_SHARED", "media-shared", "false", "SERVICE_DATA_DIR is one directory shared by every replica (a network file system): lets replicas with local media run together", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		c.MediaShared = b
		return err
	}},
	{"SERVICE_S3_ENDPOINT", "s3-endpoint", "", "S3-compatible endpoint; enables the S3 media store and direct uploads", str(func(c *Config) *string { return &c.S3Endpoint })},
	{"SERVICE_S3_BUCKET", "s3-bucket", "", "S3 bucket", str(func(c *Config) *string { return &c.S3Bucket })},
	{"SERVICE_S3_REGION", "s3-region", "", "S3 region", str(func(c *Config) *string { return &c.S3Region })},
	{"SERVICE_S3_ACCESS_KEY", "s3-access-key", "", "S3 access key", str(func(c *Config) *string { return &c.S3AccessKey })},
	{"SERVICE_S3_SECRET_KEY", "s3-secret-key", "", "S3 secret key", str(func(c *Config) *string { return &c.S3SecretKey })},
	{"SERVICE_S3_PUBLIC_URL", "s3-public-url", "", "public URL of the bucket ({cdn_url} with S3)", str(func(c *Config) *string { return &c.S3PublicURL })},
	{"SERVICE_SMTP_URL", "smtp-url", "", "smtp://user:pass@host:port (unset: e-mails are written to the log)", str(func(c *Config) *string { return &c.SMTPURL })},
	{"SERVICE_USD_CNY", "usd-cny", "7.2", "exchange rate for charged_cny", func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err == nil && f <= 0 {
			err = fmt.Errorf("must be positive")
		}
		c.USDCNY = f
		return err
	}},
	{"SERVICE_METRICS_ADDR", "metrics-addr", "", "separate listen address for /metrics (unset: /metrics on the main address, administrator key required)", str(func(c *Config) *string { return &c.MetricsAddr })},
	{"SERVICE_DRAIN_WINDOW", "drain-window", "5s", "on SIGTERM, how long the replica keeps accepting requests while /api/ready answers 503, so that a balancer stops sending before the listener closes", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err == nil && d < 0 {
			err = fmt.Errorf("must not be negative")
		}
		c.DrainWindow = d
		return err
	}},
	{"SERVICE_SHUTDOWN_GRACE", "shutdown-grace", "25s", "on SIGTERM, how long running jobs may take to finish before the rest is handed back to the queue for another replica", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err == nil && d < 0 {
			err = fmt.Errorf("must not be negative")
		}
		c.ShutdownGrace = d
		return err
	}},
	{"SERVICE_JOB_DEADLINE", "job-deadline", "10m", "deadline of one generation job", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err == nil && d <= 0 {
			err = fmt.Errorf("must be positive")
		}
		c.JobDeadline = d
		return err
	}},
	{"SERVICE_OIDC_ISSUER", "oidc-issuer", "", "OpenID Connect issuer for third-party sign-in (unset: disabled)", str(func(c *Config) *string { return &c.OIDCIssuer })},
	{"SERVICE_OIDC_CLIENT_ID", "oidc-client-id", "", "OpenID Connect client id", str(func(c *Config) *string { return &c.OIDCClientID })},
	{"SERVICE_OIDC_CLIENT_SECRET", "oidc-client-secret", "", "OpenID Connect client secret", str(func(c *Config) *string { return &c.OIDCClientSecret })},
}

func positiveInt(p *int, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("must be a positive integer")
	}
	*p = n
	return nil
}

// MinMaxConns is the smallest SERVICE_DB_MAX_CONNS that leaves every pool of a replica something
// (models.SplitConns splits the budget).
const MinMaxConns = 12

// LoadConfig builds a Config from a lookup function (environment or flags, flags winning) and validates it.
func LoadConfig(lookup func(v ConfigVar) (string, bool)) (Config, error) {
	var c Config
	for _, v := range ConfigVars {
		val, ok := lookup(v)
		if !ok {
			val = v.Default
		}
		if err := v.set(&c, val); err != nil {
			return c, fmt.Errorf("config: %s=%q: %v", v.Env, val, err)
		}
	}
	return c, c.complete()
}

// DefaultConfig returns the configuration with every default applied.
func DefaultConfig() Config {
	c, _ := LoadConfig(func(ConfigVar) (string, bool) { return "", false })
	return c
}

func (c *Config) complete() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("config: SERVICE_ADDR=%q: want host:port: %v", c.Addr, err)
	}
	if _, _, err := ParseDatabaseURL(c.DatabaseURL); err != nil {
		return err
	}
	if c.BaseURL == "" {
		c.BaseURL = "http://" + c.Addr
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.CDNURL == "" {
		c.CDNURL = c.BaseURL + "/media"
		if c.S3Endpoint != "" && c.S3PublicURL != "" {
			c.CDNURL = c.S3PublicURL
		}
	}
	if c.SiteURL == "" {
		c.SiteURL = c.BaseURL
	}
	if c.ClaimSiteURL == "" {
		c.ClaimSiteURL = c.BaseURL
	}
	for _, u := range []struct {
		name string
		val  *string
	}{{"SERVICE_BASE_URL", &c.BaseURL}, {"SERVICE_CDN_URL", &c.CDNURL}, {"SERVICE_SITE_URL", &c.SiteURL}, {"SERVICE_CLAIM_SITE_URL", &c.ClaimSiteURL}} {
		*u.val = strings.TrimRight(*u.val, "/")
		p, err := url.Parse(*u.val)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("config: %s=%q: want an absolute http(s) URL", u.name, *u.val)
		}
	}
	if c.S3Endpoint != "" {
		for name, v := range map[string]string{"SERVICE_S3_BUCKET": c.S3Bucket, "SERVICE_S3_ACCESS_KEY": c.S3AccessKey, "SERVICE_S3_SECRET_KEY": c.S3SecretKey, "SERVICE_S3_PUBLIC_URL": c.S3PublicURL} {
			if v == "" {
				return fmt.Errorf("config: %s is required when SERVICE_S3_ENDPOINT is set", name)
			}
		}
		if c.S3Region == "" {
			c.S3Region = "us-east-1"
		}
	}
	if c.SMTPURL != "" {
		if p, err := url.Parse(c.SMTPURL); err != nil || (p.Scheme != "smtp" && p.Scheme != "smtps") || p.Host == "" {
			return fmt.Errorf("config: SERVICE_SMTP_URL=%q: want smtp://user:pass@host:port", c.SMTPURL)
		}
	}
	return nil
}

// ParseDatabaseURL splits DATABASE_URL into a dialect ("sqlite" or "postgres") and the driver's DSN.
func ParseDatabaseURL(raw string) (dialect, dsn string, err error) {
	switch {
	case strings.HasPrefix(raw, "sqlite://"):
		path := strings.TrimPrefix(raw, "sqlite://")
		if path == "" {
			return "", "", fmt.Errorf("config: DATABASE_URL=%q: sqlite:// needs a file path, e.g. sqlite://./data/studio.db", raw)
		}
		return "sqlite", path, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		u, err := url.Parse(raw)
		if err != nil {
			return "", "", fmt.Errorf("config: DATABASE_URL: not a valid URL: %v", err)
		}
		if u.Host == "" {
			return "", "", fmt.Errorf("config: DATABASE_URL: postgres URL needs a host, e.g. postgres://user@127.0.0.1:5432/studio")
		}
		return "postgres", raw, nil
	}
	return "", "", fmt.Errorf("config: DATABASE_URL=%q: unsupported scheme; use sqlite://PATH or postgres://user:pass@host:port/db", RedactURL(raw))
}

// RedactURL returns raw without its password, for messages and logs.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxx")
	}
	return u.String()
}
