package models

// The core's domain services. Each is a small set of use cases over the App's database and rules,
// reached by accessor (app.Jobs().Submit, app.Claims().Redeem...), as a store's parts are in mattermost:
// no type carries every operation, and a surface holds the App alone.

// JobService holds the image jobs: submitting, reading and the steps the workers record.
type JobService struct{ a *App }

// VideoService holds the video tasks: submitting, cancelling, reading and the steps the workers record.
type VideoService struct{ a *App }

// CopyService holds the generations answered at once: copy (articles), image readings and chat.
type CopyService struct{ a *App }

// TemplateService holds image and video templates and the skills behind them.
type TemplateService struct{ a *App }

// AccountService holds tenants, their member accounts, their settings, callbacks and reports.
type AccountService struct{ a *App }

// UploadService holds the files tenants upload into their workspaces.
type UploadService struct{ a *App }

// AuthService holds identities and the ways to obtain one: keys, passwords, e-mailed codes, sessions,
// device logins and OpenID Connect.
type AuthService struct{ a *App }

// ClaimService holds claim codes: creating, listing, previewing and redeeming them.
type ClaimService struct{ a *App }

// CreditService holds balances and the ledger: every charge, refund, allocation and grant, and usage.
type CreditService struct{ a *App }

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
}

func (a *App) initServices() {
	a.svc = services{jobs: &JobService{a}, videos: &VideoService{a}, copy: &CopyService{a}, templates: &TemplateService{a},
		accounts: &AccountService{a}, uploads: &UploadService{a}, auth: &AuthService{a}, claims: &ClaimService{a}, credits: &CreditService{a}}
}

// Jobs returns the image jobs.
func (a *App) Jobs() *JobService { return a.svc.jobs }

// Videos returns the video tasks.
func (a *App) Videos() *VideoService { return a.svc.videos }

// Copy returns copy, image readings and chat.
func (a *App) Copy() *CopyService { return a.svc.copy }

// Templates returns the templates.
func (a *App) Templates() *TemplateService { return a.svc.templates }

// Accounts returns tenants and accounts.
func (a *App) Accounts() *AccountService { return a.svc.accounts }

// Uploads returns the uploads.
func (a *App) Uploads() *UploadService { return a.svc.uploads }

// Auth returns identities and sign-in.
func (a *App) Auth() *AuthService { return a.svc.auth }

// Claims returns the claim codes.
func (a *App) Claims() *ClaimService { return a.svc.claims }

// Credits returns balances and the ledger.
func (a *App) Credits() *CreditService { return a.svc.credits }
