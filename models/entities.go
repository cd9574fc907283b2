package models

import (
	"time"

	"gorm.io/datatypes"
)

// This file lists every table of the service; the rules that change each entity live in the file named after it.

// Tenant is an organisation: it holds a credit pool and owns member accounts, templates and jobs.
type Tenant struct {
	ID             string `gorm:"primaryKey;size:36"`
	Name           string `gorm:"size:200;not null"`
	Spendable      int64  `gorm:"not null;default:0"`
	Reserved       int64  `gorm:"not null;default:0"`
	Unmetered      bool   `gorm:"not null;default:false"`
	QuotaMonthly   *int64
	UsedMonth      int64   `gorm:"not null;default:0"`
	UsedMonthKey   string  `gorm:"size:7;not null;default:''"`
	Markup         float64 `gorm:"not null;default:1"`
	Binding        string  `gorm:"size:200;not null;default:''"`
	CallbackSecret string  `gorm:"size:100;not null"`
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Balance is the whole pool: spendable plus reserved.
func (t *Tenant) Balance() int64 { return t.Spendable + t.Reserved }

// APIKey is a hashed credential of a tenant or a member account; account keys also keep a sealed copy.
type APIKey struct {
	ID        string  `gorm:"primaryKey;size:36"`
	Hash      string  `gorm:"size:64;uniqueIndex;not null"`
	Kind      string  `gorm:"size:16;not null"` // tenant | account
	TenantID  string  `gorm:"size:36;index;not null"`
	AccountID *string `gorm:"size:36;index"`
	Sealed    string  `gorm:"size:200;not null;default:''"`
	CreatedAt time.Time
}

// Account is a member account of a tenant, in shared or dedicated quota mode.
type Account struct {
	ID        string `gorm:"primaryKey;size:36"`
	TenantID  string `gorm:"size:36;index;not null"`
	Email     string `gorm:"size:320;not null"`
	Nickname  string `gorm:"size:100;not null;default:''"`
	Shared    bool   `gorm:"not null;default:true"`
	Credits   int64  `gorm:"not null;default:0"`
	Disabled  bool   `gorm:"not null;default:false"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// User is a personal account: registered by e-mail, third-party sign-in, or a claim redemption.
type User struct {
	ID           string  `gorm:"primaryKey;size:36"`
	Email        string  `gorm:"size:320;uniqueIndex;not null"`
	Nickname     string  `gorm:"size:100;not null;default:''"`
	PasswordHash string  `gorm:"size:200;not null;default:''"`
	OIDCSubject  *string `gorm:"size:300;uniqueIndex"`
	Credits      int64   `gorm:"not null;default:0"`
	Disabled     bool    `gorm:"not null;default:false"`
	// TokenVersion is carried by every login token of the account (claim "ver"); raising it ends every
	// token issued before (endUserLoginsTx).
	TokenVersion int64 `gorm:"not null;default:0"`
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// LedgerEntry is one append-only movement of credits on one balance.
type LedgerEntry struct {
	ID        int64     `gorm:"primaryKey;autoIncrement"`
	At        time.Time `gorm:"index;not null"`
	TxID      string    `gorm:"size:36;index;not null"` // groups the rows of one transaction
	Kind      string    `gorm:"size:32;not null"`       // charge | refund | grant | allocate | release | claim | admin_credit
	Balance   string    `gorm:"size:32;not null"`       // tenant_spendable | tenant_reserved | account | user
	TenantID  *string   `gorm:"size:36;index"`
	AccountID *string   `gorm:"size:36;index"`
	UserID    *string   `gorm:"size:36;index"`
	Delta     int64     `gorm:"not null"`
	After     int64     `gorm:"not null"`
	Ref       string    `gorm:"size:100;index;not null;default:''"` // job, video task, claim code...
	Note      string    `gorm:"size:500;not null;default:''"`
}

// Job is an asynchronous image job (plain image generation or image-to-template).
type Job struct {
	ID          string         `gorm:"primaryKey;size:36"`
	Kind        string         `gorm:"size:32;not null;default:'image'"` // image | image_to_template
	TenantID    *string        `gorm:"size:36;index:idx_jobs_tenant_created,priority:1"`
	AccountID   *string        `gorm:"size:36;index"`
	UserID      *string        `gorm:"size:36;index"`
	Status      JobStatus      `gorm:"size:16;not null"` // pending | done | failed (open jobs: idx_jobs_pending, migration 3)
	Progress    string         `gorm:"size:300;not null;default:''"`
	Steps       datatypes.JSON `gorm:"type:text"`
	Params      datatypes.JSON `gorm:"type:text"` // validated request (resolved prompt included: never shown to tenants)
	Credits     int64          `gorm:"not null;default:0"`
	ChargedTo   string         `gorm:"size:32;not null;default:''"`
	CostUSD     float64        `gorm:"not null;default:0"`
	CDNURL      string         `gorm:"size:1000;not null;default:''"`
	Error       *string        `gorm:"size:1000"`
	ElapsedMS   int64          `gorm:"not null;default:0"`
	CallbackURL string         `gorm:"size:2000;not null;default:''"`
	Callback    CallbackState  `gorm:"size:16;not null;default:''"` // '' | pending | delivered | failed
	CallbackErr string         `gorm:"size:500;not null;default:''"`
	ResultRef   string         `gorm:"size:36;not null;default:''"` // e.g. the template created by image-to-template
	Deadline    time.Time
	// Runner is the process holding the job while it waits on its upstream outside the queue (runner.go).
	Runner     *string   `gorm:"size:64"`
	CreatedAt  time.Time `gorm:"index:idx_jobs_tenant_created,priority:2"`
	UpdatedAt  time.Time
	FinishedAt *time.Time
	RefundedAt *time.Time
}

// UpstreamAttempt is one real call to an upstream, or several alike ones: the health record that scores
// are computed from.
type UpstreamAttempt struct {
	ID        int64     `gorm:"primaryKey;autoIncrement"`
	Upstream  string    `gorm:"size:200;index:idx_attempt_up_at,priority:1;not null"`
	At        time.Time `gorm:"index:idx_attempt_up_at,priority:2;index;not null"`
	JobID     string    `gorm:"size:36;index;not null;default:''"`
	OK        bool      `gorm:"not null"`
	LatencyMS int64     `gorm:"not null"`
	Class     string    `gorm:"size:16;not null;default:''"`
	// Count is how many alike calls (same upstream, outcome, latency and job) the row stands for.
	Count int64 `gorm:"not null;default:1"`
	// Origin is the routing engine (one per process) that made the calls.
	Origin string `gorm:"size:32;not null;default:''"`
}

// UpstreamState records that an upstream was disabled by an administrator or removed after a revoked or unpaid answer.
type UpstreamState struct {
	Upstream string `gorm:"primaryKey;size:200"`
	Disabled bool   `gorm:"not null;default:false"`
	Removed  bool   `gorm:"not null;default:false"`
	Reason   string `gorm:"size:500;not null;default:''"`
	Since    time.Time
}

// VideoTask is an asynchronous video generation task.
type VideoTask struct {
	ID             string         `gorm:"primaryKey;size:36"`
	TenantID       *string        `gorm:"size:36;index"`
	AccountID      *string        `gorm:"size:36;index"`
	UserID         *string        `gorm:"size:36;index"`
	Status         VideoStatus    `gorm:"size:16;not null"` // pending | running | done | failed | cancelled (open tasks: idx_video_tasks_open, migration 3)
	Model          string         `gorm:"size:64;not null"` // tier code
	Resolution     string         `gorm:"size:16;not null"`
	Duration       int            `gorm:"not null"`
	Ratio          string         `gorm:"size:16;not null;default:''"`
	Params         datatypes.JSON `gorm:"type:text"`
	Credits        int64          `gorm:"not null"`
	ChargedTo      string         `gorm:"size:32;not null;default:''"`
	Progress       int            `gorm:"not null;default:0"`
	VideoURL       string         `gorm:"size:1000;not null;default:''"`
	Error          *string        `gorm:"size:1000"`
	Upstream       string         `gorm:"size:200;not null;default:''"` // private: never shown to tenants
	UpstreamTaskID string         `gorm:"size:200;not null;default:''"`
	CostUSD        float64        `gorm:"not null;default:0"`
	CreatedAt      time.Time
	UpdatedAt      time.Time
	FinishedAt     *time.Time
	RefundedAt     *time.Time
}

// Template is an image or copy (article) template.
type Template struct {
	ID                string         `gorm:"primaryKey;size:36"`
	Type              string         `gorm:"size:16;not null;index"` // image | article
	TenantID          *string        `gorm:"size:36;index"`          // owning tenant; nil with UserID nil = platform
	UserID            *string        `gorm:"size:36;index"`          // personal template
	AuthorKind        string         `gorm:"size:16;not null;default:''"`
	AuthorID          string         `gorm:"size:36;not null;default:''"`
	Slug              *string        `gorm:"size:200;uniqueIndex"`
	ZhName            string         `gorm:"size:200;not null"`
	Ratio             string         `gorm:"size:16;not null;default:''"`
	SampleImages      datatypes.JSON `gorm:"type:text"`
	TemplateType      string         `gorm:"size:64;not null;default:''"`
	Category          string         `gorm:"size:64;not null;default:''"`
	Domain            string         `gorm:"size:64;not null;default:''"`
	Genre             string         `gorm:"size:64;not null;default:''"`
	Description       string         `gorm:"size:2000;not null;default:''"`
	VariableLabels    datatypes.JSON `gorm:"type:text"`
	GenerationConfigs datatypes.JSON `gorm:"type:text"`
	Active            bool           `gorm:"not null;default:true"`
	Gated             bool           `gorm:"not null;default:false"`
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// VideoTemplate is a video template.
type VideoTemplate struct {
	ID                string         `gorm:"primaryKey;size:36"`
	TenantID          *string        `gorm:"size:36;index"`
	UserID            *string        `gorm:"size:36;index"`
	AuthorKind        string         `gorm:"size:16;not null;default:''"`
	AuthorID          string         `gorm:"size:36;not null;default:''"`
	Slug              string         `gorm:"size:200;uniqueIndex;not null"`
	ZhName            string         `gorm:"size:200;not null"`
	SampleCoverImage  string         `gorm:"size:1000;not null;default:''"`
	SampleVideoURL    string         `gorm:"size:1000;not null;default:''"`
	Category          string         `gorm:"size:64;not null;default:''"`
	Description       string         `gorm:"size:2000;not null;default:''"`
	GenerationConfigs datatypes.JSON `gorm:"type:text"`
	Active            bool           `gorm:"not null;default:true"`
	Gated             bool           `gorm:"not null;default:false"`
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// TemplateHook binds an image template to a follow-up copy or video template, by slug.
type TemplateHook struct {
	ID                string `gorm:"primaryKey;size:36"`
	TenantID          string `gorm:"size:36;not null;uniqueIndex:idx_hook_unique,priority:1"`
	ImageTemplateSlug string `gorm:"size:200;not null;uniqueIndex:idx_hook_unique,priority:2"`
	HookType          string `gorm:"size:16;not null;uniqueIndex:idx_hook_unique,priority:3"` // article | video
	HookTemplateSlug  string `gorm:"size:200;not null"`
	Enabled           bool   `gorm:"not null;default:true"`
	Note              string `gorm:"size:500;not null;default:''"`
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// ClaimCode bundles platform templates and credits for one buyer.
type ClaimCode struct {
	Code             string         `gorm:"primaryKey;size:64"`
	TenantID         string         `gorm:"size:36;index;not null"`
	Credits          int64          `gorm:"not null"`
	Note             string         `gorm:"size:500;not null;default:''"`
	TemplateIDs      datatypes.JSON `gorm:"type:text"`
	ProductCopy      string         `gorm:"size:4000;not null;default:''"`
	ProductImages    datatypes.JSON `gorm:"type:text"`
	TutorialPDFURL   string         `gorm:"size:1000;not null;default:''"`
	TutorialPDFTitle string         `gorm:"size:200;not null;default:''"`
	Disabled         bool           `gorm:"not null;default:false"`
	RedeemedBy       *string        `gorm:"size:36"`
	RedeemedEmail    string         `gorm:"size:320;not null;default:''"`
	RedeemedAt       *time.Time
	CreatedAt        time.Time
}

// ClaimRedemption records the redemption of a code by a personal account.
type ClaimRedemption struct {
	ID        string `gorm:"primaryKey;size:36"`
	Code      string `gorm:"size:64;uniqueIndex;not null"`
	UserID    string `gorm:"size:36;index;not null"`
	Email     string `gorm:"size:320;not null"`
	Nickname  string `gorm:"size:100;not null;default:''"`
	CreatedAt time.Time
}

// TemplateGrant gives a personal account access to a gated template.
type TemplateGrant struct {
	UserID     string `gorm:"primaryKey;size:36"`
	TemplateID string `gorm:"primaryKey;size:36"`
	Code       string `gorm:"size:64;not null"`
	CreatedAt  time.Time
}

// Upload is a stored file uploaded by an identity.
type Upload struct {
	ID        string  `gorm:"primaryKey;size:36"`
	OwnerKind string  `gorm:"size:16;not null;index:idx_upload_owner,priority:1"`
	OwnerID   string  `gorm:"size:36;not null;index:idx_upload_owner,priority:2"`
	TenantID  *string `gorm:"size:36;index"`
	Key       string  `gorm:"size:500;uniqueIndex;not null"`
	URL       string  `gorm:"size:1000;not null"`
	MediaType string  `gorm:"size:16;not null"`
	MIME      string  `gorm:"size:100;not null"`
	Size      int64   `gorm:"not null"`
	Committed bool    `gorm:"not null;default:true"`
	CreatedAt time.Time
}

// Invitation is a single-use platform invitation code for e-mail registration.
type Invitation struct {
	Code      string  `gorm:"primaryKey;size:64"`
	UsedBy    *string `gorm:"size:36"`
	UsedAt    *time.Time
	CreatedAt time.Time
}

// EmailCode is a six-digit registration code sent to an e-mail address.
type EmailCode struct {
	ID       string `gorm:"primaryKey;size:36"`
	Email    string `gorm:"size:320;index;not null"`
	CodeHash string `gorm:"size:64;not null"`
	ClientIP string `gorm:"size:64;not null;default:''"`
	// Attempts counts wrong codes entered for this address while this code was its latest: at
	// maxCodeAttempts the code is spent (a new one must be asked for).
	Attempts  int `gorm:"not null;default:0"`
	ExpiresAt time.Time
	UsedAt    *time.Time
	CreatedAt time.Time
}

// DeviceAuthorization is one RFC 8628 device authorization request.
type DeviceAuthorization struct {
	DeviceCodeHash string  `gorm:"primaryKey;size:64"`
	UserCode       string  `gorm:"size:16;uniqueIndex;not null"`
	Status         string  `gorm:"size:16;not null"` // pending | approved | denied | consumed
	UserID         *string `gorm:"size:36"`
	Interval       int     `gorm:"not null"`
	LastPollAt     *time.Time
	ExpiresAt      time.Time
	CreatedAt      time.Time
}

// Session is a signed-in browser session of the console.
type Session struct {
	ID        string    `gorm:"primaryKey;size:64"` // SHA-256 of the cookie value
	Kind      string    `gorm:"size:16;not null"`   // tenant | admin | user | account
	TenantID  *string   `gorm:"size:36;index"`
	AccountID *string   `gorm:"size:36"`
	UserID    *string   `gorm:"size:36;index"`
	KeyHash   string    `gorm:"size:64;not null;default:''"` // SHA-256 of the API key it was opened with; '' for personal logins
	CSRF      string    `gorm:"size:64;not null"`
	ExpiresAt time.Time `gorm:"index"`
	CreatedAt time.Time
}

// Setting is a service-wide key/value pair (the generated secret, the administrator key hash).
type Setting struct {
	Key       string `gorm:"primaryKey;size:100"`
	Value     string `gorm:"size:2000;not null"`
	UpdatedAt time.Time
}

// RateCounter counts calls of one identity in one fixed window, shared by every replica.
type RateCounter struct {
	Key         string    `gorm:"primaryKey;size:200"`
	WindowStart time.Time `gorm:"primaryKey"`
	Count       int       `gorm:"not null"`
}

// UsageDaily counts accepted calls per tenant, local day and service type.
type UsageDaily struct {
	TenantID string `gorm:"primaryKey;size:36"`
	Day      string `gorm:"primaryKey;size:10"` // YYYY-MM-DD in Asia/Shanghai
	Service  string `gorm:"primaryKey;size:32"` // image | video | chat | reverse | other...
	AgentID  string `gorm:"primaryKey;size:100"`
	Count    int64  `gorm:"not null"`
}

// IdempotencyRecord keeps the first response to a request carrying an Idempotency-Key.
type IdempotencyRecord struct {
	Key       string `gorm:"primaryKey;size:300"` // identity + route + client key
	BodyHash  string `gorm:"size:64;not null"`
	Status    int    `gorm:"not null"`
	Response  []byte
	CreatedAt time.Time `gorm:"index"`
}

// AllEntities lists every table, in creation order.
func AllEntities() []any {
	return []any{
		&Tenant{}, &APIKey{}, &Account{}, &User{}, &LedgerEntry{}, &Job{}, &UpstreamAttempt{}, &UpstreamState{},
		&VideoTask{}, &Template{}, &VideoTemplate{}, &TemplateHook{}, &ClaimCode{}, &ClaimRedemption{}, &TemplateGrant{},
		&Upload{}, &Invitation{}, &EmailCode{}, &DeviceAuthorization{}, &Session{}, &Setting{}, &RateCounter{}, &UsageDaily{},
		&IdempotencyRecord{},
	}
}
