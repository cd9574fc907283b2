package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// App is the core: the database, the configuration and the rules that change entities.
// The surfaces (rest, graph, web) and the workers (jobs) call its methods.
type App struct {
	DB     *DB
	Config Config
	secret []byte
	sealer *Sealer
	Admin  *AdminActions
	// Now is the clock; tests replace it.
	Now     func() time.Time
	submits *groupCommit[*submitUnit]
	// completions commits the image jobs' completions that come together (CompleteJob).
	completions *groupCommit[*completeUnit]
	// Resolver looks up the hosts of submitted callback and media URLs (CheckPublicHost); nil means
	// net.DefaultResolver. Tests point it at a name server they control.
	Resolver Resolver
	// deps are the queue, the event publisher and the binding check of the asynchronous side (NewApp).
	deps Deps
	svc  services
}

// NewApp loads (or creates once) the service secret and returns the core over an open, migrated database.
// deps are the asynchronous side it calls: jobs.New builds them and then the App (see Deps for nil parts).
func NewApp(ctx context.Context, db *DB, cfg Config, deps Deps) (*App, error) {
	a := &App{DB: db, Config: cfg, Now: func() time.Time { return time.Now().UTC() }, deps: deps}
	a.initServices()
	a.submits = newSubmitBatcher(a)
	a.completions = newCompleteBatcher(a)
	secret := cfg.Secret
	if secret == "" {
		var err error
		secret, err = a.settingOrCreate(ctx, "service_secret", func() string { return RandomString(48, keyAlphabet) })
		if err != nil {
			return nil, err
		}
	}
	a.secret = []byte(secret)
	a.sealer = NewSealer(a.secret)
	a.Admin = NewAdminActions(a)
	a.identityCacheOf() // on deps.Listener before anything starts it
	return a, nil
}

// settingOrCreate returns a setting, storing make() first when it is absent; concurrent replicas agree on one value.
func (a *App) settingOrCreate(ctx context.Context, key string, make func() string) (string, error) {
	s := Setting{Key: key, Value: make(), UpdatedAt: a.Now()}
	if err := a.DB.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&s).Error; err != nil {
		return "", fmt.Errorf("settings: store %s: %w", key, err)
	}
	var got Setting
	if err := a.DB.WithContext(ctx).First(&got, "key = ?", key).Error; err != nil {
		return "", fmt.Errorf("settings: read %s: %w", key, err)
	}
	return got.Value, nil
}

// setting returns a stored setting, or "" when absent.
func (a *App) setting(ctx context.Context, key string) (string, error) {
	var got Setting
	err := a.DB.WithContext(ctx).First(&got, "key = ?", key).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", nil
	}
	return got.Value, err
}

// EnsureAdminKey makes sure a platform administrator key exists. It returns the plaintext only when it
// was created now (first start, no SERVICE_ADMIN_KEY), so that the caller prints it once.
func (au *AuthService) EnsureAdminKey(ctx context.Context) (string, error) {
	a := au.a
	if a.Config.AdminKey != "" {
		return "", nil
	}
	fresh := NewAPIKey()
	stored, err := a.settingOrCreate(ctx, "admin_key_hash", func() string { return HashKey(fresh) })
	if err != nil {
		return "", err
	}
	if stored == HashKey(fresh) {
		return fresh, nil
	}
	return "", nil
}

// RotateAdminKey replaces the stored administrator key and returns the new plaintext.
func (au *AuthService) RotateAdminKey(ctx context.Context) (string, error) {
	a := au.a
	fresh := NewAPIKey()
	err := a.DB.WithContext(ctx).Save(&Setting{Key: "admin_key_hash", Value: HashKey(fresh), UpdatedAt: a.Now()}).Error
	if err != nil {
		return "", fmt.Errorf("settings: rotate admin key: %w", err)
	}
	slog.Warn("platform administrator key rotated")
	return fresh, nil
}

// Tx runs fn in one database transaction. A transaction that meets a deadlock or a serialization
// failure (PostgreSQL 40P01, 40001) or a busy or locked SQLite database was rolled back whole by the
// database: Tx runs fn again from the start, at most txAttempts times in all, after a short jittered
// pause (retryableTxError, txBackoff in db.go). fn must therefore be safe to re-run: it reads what it
// needs inside tx and assigns (never accumulates into) the variables it shares with its caller. Work that
// must happen once per committed transaction (metrics) is registered with afterCommit and runs only
// after the commit that succeeded.
func (a *App) Tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	for attempt := 1; ; attempt++ {
		hooks := &txHooks{}
		err := a.DB.WithContext(context.WithValue(ctx, txHooksKey{}, hooks)).Transaction(fn)
		if err == nil {
			hooks.run()
			return nil
		}
		if attempt >= txAttempts || !retryableTxError(err) {
			return err
		}
		slog.WarnContext(ctx, "transaction rolled back by the database; running it again", "attempt", attempt, "err", err.Error())
		if !sleepCtx(ctx, txBackoff(attempt)) {
			return err
		}
	}
}

// Ping checks that the database answers.
func (a *App) Ping(ctx context.Context) error { return a.DB.Ping(ctx) }

// Worker states, as readiness reports them.
const (
	WorkersRunning  = "running"
	WorkersStopped  = "stopped"
	WorkersDraining = "draining"
)

// Workers reports the state of this replica's workers: running, stopped, or draining (stopping after
// SIGTERM).
func (a *App) Workers() string {
	p := a.deps.Process
	switch {
	case p != nil && p.Draining():
		return WorkersDraining
	case p == nil || !p.Running():
		return WorkersStopped
	}
	return WorkersRunning
}

// The core's domain services. Each is a small set of use cases over the App's database and rules, in the
// file of its domain (JobService in job.go, ClaimService in claim.go...), reached by accessor
// (app.Jobs().SubmitImages, app.Claims().RedeemClaim), as a store's parts are in mattermost: no type
// carries every operation, and a surface holds the App alone.

// services are the App's domain services, made once by NewApp.
type services struct {
	jobs      *JobService
	videos    *VideoService
	copy      *CopyService
	templates *TemplateService
	accounts  *AccountService
	uploads   *UploadService
	auth      *AuthService
	claims    *ClaimService
	credits   *CreditService
	runners   *RunnerService
}

func (a *App) initServices() {
	a.svc = services{jobs: &JobService{a}, videos: &VideoService{a}, copy: &CopyService{a}, templates: &TemplateService{a},
		accounts: &AccountService{a}, uploads: &UploadService{a}, auth: &AuthService{a}, claims: &ClaimService{a}, credits: &CreditService{a},
		runners: &RunnerService{a}}
}
