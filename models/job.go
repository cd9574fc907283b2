package models

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"studio/models/metrics"

	"gorm.io/datatypes"
	"gorm.io/gorm"

	"studio/models/contract"
)

// The page of the jobs list: JobsPageDefault jobs unless the caller asks for another number, at most
// JobsPageMax (a larger number is served as JobsPageMax).
const (
	JobsPageDefault = 20
	JobsPageMax     = 100
)

// JobsPageSize reads the page size a caller gave as field (REST limit, GraphQL first): nil is the
// default; anything but a positive integer is 400.
func JobsPageSize(field string, n *int) (int, error) {
	if n == nil {
		return JobsPageDefault, nil
	}
	if *n < 1 {
		return 0, Invalid("%s must be a positive integer (at most %d)", field, JobsPageMax)
	}
	return min(*n, JobsPageMax), nil
}

// JobStatus is the status of an image job (spec section 3).
type JobStatus string

// Job statuses of spec section 3.
const (
	JobPending JobStatus = "pending"
	JobDone    JobStatus = "done"
	JobFailed  JobStatus = "failed"
)

// CallbackState is the delivery state of a job's callback ("" when the job has no callback URL).
type CallbackState string

// Callback delivery states.
const (
	CallbackPending   CallbackState = "pending"
	CallbackDelivered CallbackState = "delivered"
	CallbackFailed    CallbackState = "failed"
)

// StepStatus is the status of one phase of a multi-step job.
type StepStatus string

// Step statuses.
const (
	StepWaiting StepStatus = "waiting"
	StepRunning StepStatus = "running"
	StepDone    StepStatus = "done"
	StepFailed  StepStatus = "failed"
)

// Ended reports whether a job in this status will not change any more.
func (s JobStatus) Ended() bool { return s == JobDone || s == JobFailed }

// Job kinds.
const (
	JobKindImage           = "image"
	JobKindImageToTemplate = "image_to_template"
)

// MaxBatch is the largest batch of POST /api/generate-batch.
const MaxBatch = 32

// GenerateRequest is the body of POST /api/generate (spec 4.2) and of one batch item.
type GenerateRequest struct {
	Prompt          *string         `json:"prompt"`
	SkillSlug       string          `json:"skill_slug"`
	TemplateID      string          `json:"template_id"`
	TemplateSlug    string          `json:"template_slug"`
	Input           json.RawMessage `json:"input"`
	Provider        string          `json:"provider"`
	Model           string          `json:"model"`
	Ratio           string          `json:"ratio"`
	Quality         string          `json:"quality"`
	Background      string          `json:"background"`
	ReferenceImages []string        `json:"reference_images"`
	ImageURL        string          `json:"image_url"`
	Mask            string          `json:"mask"`
	Resolution      string          `json:"resolution"`
	CallbackURL     string          `json:"callback_url"`
}

// ImageParams is a validated image request as the worker needs it; it is private to the service
// (it holds the resolved prompt, which may come from a gated template or a skill).
type ImageParams struct {
	Prompt          string   `json:"prompt,omitempty"`
	SpecMD          string   `json:"spec_md,omitempty"`    // spec-mode template: expanded by a chat upstream first
	SpecInput       string   `json:"spec_input,omitempty"` // the caller's one-sentence description
	TemplateID      string   `json:"template_id,omitempty"`
	Provider        string   `json:"provider,omitempty"`
	Model           string   `json:"model,omitempty"`
	Binding         string   `json:"binding,omitempty"`
	Ratio           string   `json:"ratio"`
	Quality         string   `json:"quality"`
	QualityExplicit bool     `json:"quality_explicit,omitempty"`
	Background      string   `json:"background"`
	Resolution      string   `json:"resolution"`
	ReferenceImages []string `json:"reference_images,omitempty"`
	ImageURL        string   `json:"image_url,omitempty"`
	Mask            string   `json:"mask,omitempty"`
	// Image-to-template jobs: the source picture and the caller's wishes for the new template.
	SourceImage      string `json:"source_image,omitempty"`
	TemplateName     string `json:"template_name,omitempty"`
	TemplateSlug     string `json:"template_slug,omitempty"`
	TemplateCategory string `json:"template_category,omitempty"`
}

// Capabilities lists the upstream capabilities the request needs (routing filters on them first).
func (p *ImageParams) Capabilities() []string {
	var caps []string
	if len(p.ReferenceImages) > 0 || p.ImageURL != "" {
		caps = append(caps, "reference_images")
	}
	if p.Mask != "" {
		caps = append(caps, "mask")
	}
	if p.Background == contract.BackgroundTransparent {
		caps = append(caps, "transparent")
	}
	if p.QualityExplicit {
		caps = append(caps, "quality")
	}
	if p.Resolution == contract.ImageResolution2k || p.Resolution == contract.ImageResolution4k {
		caps = append(caps, "large")
	}
	return caps
}

// OutputFormat is the stored format: PNG with alpha for transparent backgrounds (enforced), PNG otherwise too
// when the upstream returns it; the service never lets the caller choose.
func (p *ImageParams) OutputFormat() string {
	if p.Background == contract.BackgroundTransparent {
		return "png"
	}
	return ""
}

// PreparedImage is a validated, priced image request ready to be charged and queued.
type PreparedImage struct {
	Params      ImageParams
	Credits     int64
	CallbackURL string
	Kind        string
}

// fromContract turns a template-rule error into a KindInvalid error with the rule's message.
func fromContract(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: KindInvalid, Message: err.Error(), Err: err}
}

// PrepareImage validates a generate request for the identity and resolves its prompt; nothing is stored.
func (js *JobService) PrepareImage(ctx context.Context, id *Identity, req GenerateRequest) (*PreparedImage, error) {
	a := js.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if err := checkPromptSource(req); err != nil {
		return nil, err
	}
	p := ImageParams{Provider: strings.TrimSpace(req.Provider), Model: strings.TrimSpace(req.Model)}
	if p.Provider == "auto" {
		p.Provider = ""
	}
	if err := parseImageOptions(req, &p); err != nil {
		return nil, err
	}
	if err := a.checkImageInputs(ctx, req); err != nil {
		return nil, err
	}
	p.ReferenceImages, p.ImageURL, p.Mask = req.ReferenceImages, req.ImageURL, req.Mask
	if req.CallbackURL != "" {
		if err := a.Jobs().CheckCallbackURL(ctx, req.CallbackURL); err != nil {
			return nil, err
		}
	}
	p.Ratio = req.Ratio
	if err := a.resolveImagePrompt(ctx, id, req, &p); err != nil {
		return nil, err
	}
	imageDefaults(id, &p)
	cost, err := contract.ImageCost(p.Resolution)
	if err != nil {
		return nil, fromContract(err)
	}
	return &PreparedImage{Params: p, Credits: int64(cost), CallbackURL: req.CallbackURL, Kind: JobKindImage}, nil
}

// checkPromptSource checks that a generate request names exactly one source of its prompt: a prompt, a
// skill, or a template (by id or by slug, not both).
func checkPromptSource(req GenerateRequest) error {
	sources := 0
	if req.Prompt != nil {
		sources++
	}
	if req.SkillSlug != "" {
		sources++
	}
	if req.TemplateID != "" || req.TemplateSlug != "" {
		sources++
	}
	if req.TemplateID != "" && req.TemplateSlug != "" {
		return Invalid("send template_id or template_slug, not both")
	}
	if sources != 1 {
		return Invalid("send exactly one of prompt, skill_slug (+ input) or template_id/template_slug (+ input)")
	}
	return nil
}

// parseImageOptions parses the quality, background and resolution of req into p and checks its ratio.
func parseImageOptions(req GenerateRequest, p *ImageParams) error {
	var err error
	if p.Quality, err = contract.ParseImageQuality(req.Quality); err != nil {
		return fromContract(err)
	}
	p.QualityExplicit = req.Quality != ""
	if p.Background, err = contract.ParseImageBackground(req.Background); err != nil {
		return fromContract(err)
	}
	if p.Resolution, err = contract.ParseImageResolution(req.Resolution); err != nil {
		return fromContract(err)
	}
	if req.Ratio != "" {
		if _, _, err := contract.ParseRatio(req.Ratio); err != nil {
			return fromContract(err)
		}
	}
	return nil
}

// checkImageInputs checks the input pictures of req: the reference images (at most 16), and the
// image_url and mask of inpainting, which go together; each must be a media URL CheckMediaURL accepts.
func (a *App) checkImageInputs(ctx context.Context, req GenerateRequest) error {
	if (req.ImageURL == "") != (req.Mask == "") {
		return Invalid("image_url and mask must be given together (inpainting)")
	}
	for i, u := range req.ReferenceImages {
		if err := a.Jobs().CheckMediaURL(ctx, u); err != nil {
			return Invalid("reference_images[%d]: %s", i, err.Error())
		}
	}
	if len(req.ReferenceImages) > 16 {
		return Invalid("reference_images: at most 16 images")
	}
	for name, u := range map[string]string{"image_url": req.ImageURL, "mask": req.Mask} {
		if u != "" {
			if err := a.Jobs().CheckMediaURL(ctx, u); err != nil {
				return Invalid("%s: %s", name, err.Error())
			}
		}
	}
	return nil
}

// resolveImagePrompt fills the prompt of p: the caller's own prompt, checked, or the one of the skill or
// template req names (resolveTemplatePrompt).
func (a *App) resolveImagePrompt(ctx context.Context, id *Identity, req GenerateRequest, p *ImageParams) error {
	if req.Prompt == nil {
		return a.resolveTemplatePrompt(ctx, id, req, p)
	}
	p.Prompt = strings.TrimSpace(*req.Prompt)
	if p.Prompt == "" {
		return Invalid("prompt must not be empty")
	}
	if len(p.Prompt) > 8000 {
		return Invalid("prompt is too long (at most 8000 bytes)")
	}
	if len(req.Input) > 0 && string(req.Input) != "null" {
		return Invalid("input goes with skill_slug or template_id, not with prompt")
	}
	return nil
}

// imageDefaults completes p: the 1:1 ratio when neither the request nor the template gives one, and the
// binding of a tenant or member key.
func imageDefaults(id *Identity, p *ImageParams) {
	if p.Ratio == "" {
		p.Ratio = "1:1"
	}
	if id.Kind == IdentityTenant || id.Kind == IdentityAccount {
		p.Binding = id.Binding
	}
}

// resolveTemplatePrompt fills the prompt from a skill or template: form mode substitutes on the server,
// spec mode keeps the specification for the worker to expand through a chat upstream.
func (a *App) resolveTemplatePrompt(ctx context.Context, id *Identity, req GenerateRequest, p *ImageParams) error {
	t, err := a.Templates().TemplateForUse(ctx, id, TemplateRef{ID: req.TemplateID, Slug: req.TemplateSlug, SkillSlug: req.SkillSlug})
	if err != nil {
		return err
	}
	cfgs, err := t.ImageConfigs()
	if err != nil || len(cfgs) == 0 {
		return Invalid("template has no usable generation config")
	}
	cfg := cfgs[0]
	p.TemplateID = t.ID
	if p.Ratio == "" {
		p.Ratio = t.Ratio
	}
	if p.Model == "" && cfg.Model != "" && cfg.Model != "auto" {
		p.Model = cfg.Model
	}
	if !p.QualityExplicit && cfg.Quality != "" {
		p.Quality = cfg.Quality
	}
	if len(p.ReferenceImages) == 0 && len(cfg.DefaultReferenceImages) > 0 {
		p.ReferenceImages = append([]string(nil), cfg.DefaultReferenceImages...)
	}
	if cfg.RefRequired && len(p.ReferenceImages) == 0 && p.ImageURL == "" {
		return Invalid("this template needs a reference image: upload one and send it in reference_images")
	}
	mode, err := contract.ModeOf(cfg.PromptTemplate, cfg.Fields, cfg.SkillSpecMD)
	if err != nil {
		return fromContract(err)
	}
	if mode == contract.ModeSpec {
		var sentence string
		if len(req.Input) > 0 && json.Unmarshal(req.Input, &sentence) != nil {
			return Invalid("input must be a one-sentence description (a string) for this template")
		}
		sentence = strings.TrimSpace(sentence)
		if sentence == "" {
			return Invalid("missing required field: input (a one-sentence description)")
		}
		p.SpecMD, p.SpecInput = cfg.SkillSpecMD, sentence
		return nil
	}
	input := map[string]any{}
	if len(req.Input) > 0 && string(req.Input) != "null" {
		if err := json.Unmarshal(req.Input, &input); err != nil {
			return Invalid("input must be an object of field values for this template")
		}
	}
	prompt, err := contract.Substitute(cfg.PromptTemplate, cfg.Fields, input)
	if err != nil {
		return fromContract(err)
	}
	p.Prompt = prompt
	return nil
}

// CheckMediaURL accepts media of this service and public http(s) URLs (fetched later with the safe
// client). A URL of this service's uploads must name a committed upload: a pending direct upload has not
// passed its type and size check yet.
func (js *JobService) CheckMediaURL(ctx context.Context, raw string) error {
	a := js.a
	if len(raw) > maxSubmittedURL {
		return fmt.Errorf("is too long: a URL may have at most %d characters", maxSubmittedURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an http(s) URL from the upload endpoint")
	}
	if strings.HasPrefix(raw, a.Config.CDNURL+"/uploads/") {
		var n int64
		if err := a.DB.WithContext(ctx).Model(&Upload{}).Where("url = ? AND committed = ?", raw, true).Count(&n).Error; err != nil {
			return errors.New("could not check the upload; retry shortly")
		}
		if n == 0 {
			return errors.New("is not a committed upload of this service: upload the file first (POST /api/upload-ref)")
		}
		return nil
	}
	if strings.HasPrefix(raw, a.Config.CDNURL+"/") {
		return nil
	}
	return a.CheckPublicHost(ctx, u.Hostname())
}

// maxSubmittedURL bounds the length of a callback or media URL given at submit.
const maxSubmittedURL = 2000

// CheckCallbackURL refuses callback URLs that are not http(s) or whose host is private (CheckPublicHost).
func (js *JobService) CheckCallbackURL(ctx context.Context, raw string) error {
	a := js.a
	u, err := url.Parse(raw)
	if len(raw) > maxSubmittedURL {
		return Invalid("callback_url is too long: a URL may have at most %d characters", maxSubmittedURL)
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Invalid("callback_url must be an absolute http(s) URL")
	}
	if err := a.CheckPublicHost(ctx, u.Hostname()); err != nil {
		return Invalid("callback_url %s", err.Error())
	}
	return nil
}

// rateWindow returns the counter key and the start of the current hourly window.
func (a *App) rateWindow(id *Identity, kind string) (string, time.Time) {
	return rateKey(kind + ":" + id.Owner()), a.Now().Truncate(time.Hour)
}

// maxRateKey is the longest counter key stored as it is (rate_counters.key is varchar(200)).
const maxRateKey = 120

// rateKey is the stored form of a counter key: the key itself when it is short text, else its kind
// (what precedes the first ':', cut short) with the SHA-256 of the whole key. A subject comes from the
// caller (an e-mail address, a client address): however long it is, or whatever bytes it holds, its
// key fits the column and is valid text, and one subject still has one counter.
func rateKey(key string) string {
	if len(key) <= maxRateKey && utf8.ValidString(key) && strings.IndexByte(key, 0) < 0 {
		return key
	}
	kind, _, _ := strings.Cut(key, ":")
	if len(kind) > 32 || !utf8.ValidString(kind) || strings.IndexByte(kind, 0) >= 0 {
		kind = "long"
	}
	sum := sha256.Sum256([]byte(key))
	return kind + ":sha256:" + hex.EncodeToString(sum[:])
}

// rateCountTx counts n more calls of a kind for the identity in the current hour and returns the count
// before them, in one statement; the counter row stays locked until the transaction ends, so that
// concurrent transactions (of other replicas too) wait for this one. A caller that refuses some of the
// calls takes them back with rateAddTx.
func (a *App) rateCountTx(tx *gorm.DB, id *Identity, kind string, n int) (int, error) {
	key, window := a.rateWindow(id, kind)
	var after int
	err := tx.Raw(`INSERT INTO rate_counters (key, window_start, count) VALUES (?, ?, ?) `+
		`ON CONFLICT (key, window_start) DO UPDATE SET count = rate_counters.count + excluded.count RETURNING count`,
		key, window, n).Scan(&after).Error
	if err != nil {
		return 0, Internal("rate limit", err)
	}
	return after - n, nil
}

// rateAddTx adds n (possibly negative) to the calls counted in the current hour.
func (a *App) rateAddTx(tx *gorm.DB, id *Identity, kind string, n int) error {
	key, window := a.rateWindow(id, kind)
	if err := tx.Model(&RateCounter{}).Where("key = ? AND window_start = ?", key, window).
		Update("count", gorm.Expr("count + ?", n)).Error; err != nil {
		return Internal("rate limit", err)
	}
	return nil
}

// rateLimitTx counts n calls of a kind for the identity in the current hour; over the limit it counts
// nothing and is KindRateLimited with the seconds until the window ends. It runs in the caller's transaction.
func (a *App) rateLimitTx(tx *gorm.DB, id *Identity, kind string, n, limit int) error {
	used, err := a.rateCountTx(tx, id, kind, n)
	if err != nil {
		return err
	}
	if used+n > limit {
		if err := a.rateAddTx(tx, id, kind, -n); err != nil {
			return err
		}
		_, window := a.rateWindow(id, kind)
		return a.rateLimited(kind, limit, window.Add(time.Hour).Sub(a.Now()))
	}
	return nil
}

func (a *App) rateLimited(kind string, limit int, retry time.Duration) error {
	return &Error{Kind: KindRateLimited, RetryAfter: retry,
		Message: fmt.Sprintf("rate limit exceeded: at most %d %s calls per hour; retry in %d s", limit, kind, int(retry.Seconds())+1)}
}

// CreateImageJobs charges and stores prepared image jobs and queues them (or, on a process that holds
// submits, stores them held by it: Holder), all in one transaction: every job of the call is accepted or
// none is. Concurrent calls of one identity are committed together
// (one transaction for all of them, each keeping its own outcome), so a busy tenant is not serialised
// on its pool row one request at a time.
func (js *JobService) CreateImageJobs(ctx context.Context, id *Identity, items []*PreparedImage) ([]*Job, error) {
	a := js.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, Invalid("no items")
	}
	now := a.Now()
	jobs := make([]*Job, len(items))
	for i, it := range items {
		params, _ := json.Marshal(it.Params)
		j := &Job{ID: NewID(), Kind: it.Kind, Status: JobPending, Params: datatypes.JSON(params), Credits: it.Credits,
			CallbackURL: it.CallbackURL, Deadline: now.Add(a.Config.JobDeadline), CreatedAt: now, UpdatedAt: now}
		if it.Kind == JobKindImageToTemplate {
			steps, _ := json.Marshal(imageToTemplateSteps(0))
			j.Steps = steps
		} else if it.Params.SpecMD != "" {
			steps, _ := json.Marshal(specSteps(0))
			j.Steps = steps
		}
		setJobOwner(id, &j.TenantID, &j.AccountID, &j.UserID)
		if it.CallbackURL != "" {
			j.Callback = CallbackPending
		}
		jobs[i] = j
	}
	u := &submitUnit{id: id, jobs: jobs}
	if a.submits.do(ctx, id.Owner(), u); u.err != nil {
		return nil, u.err
	}
	return jobs, nil
}

// submitUnit is one call's jobs waiting to be committed.
type submitUnit struct {
	id   *Identity
	jobs []*Job
	err  error
}

// credits is what the unit costs.
func (u *submitUnit) credits() int64 {
	var n int64
	for _, j := range u.jobs {
		n += j.Credits
	}
	return n
}

// maxSubmitBatch bounds the jobs committed in one transaction.
const maxSubmitBatch = 256

// newSubmitBatcher groups concurrent submits of one identity into one transaction (commitSubmits).
func newSubmitBatcher(a *App) *groupCommit[*submitUnit] {
	return &groupCommit[*submitUnit]{max: maxSubmitBatch, size: func(u *submitUnit) int { return len(u.jobs) }, commit: a.commitSubmits}
}

// commitSubmits runs one transaction for a batch of one identity's submits: each unit is rate-limited
// and charged in order, and those accepted are stored and queued together. A unit refused for its own
// reason (rate limit, credits) does not affect the others; a database failure fails them all.
func (a *App) commitSubmits(ctx context.Context, batch []*submitUnit) {
	var accepted []*submitUnit
	runner := a.holding()
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		accepted, err = a.commitSubmitsTx(tx, batch, runner)
		return err
	})
	if err != nil {
		err = asCoreError("job: create", err)
		for _, u := range batch {
			u.err = err
		}
		return
	}
	a.announceSubmits(ctx, accepted)
	if runner != "" && len(accepted) > 0 {
		all, _, _ := submittedJobs(accepted)
		held := make([]*Job, len(all))
		for i, j := range all {
			c := *j // the caller encodes its own
			held[i] = &c
		}
		a.deps.Holder.Hold(runner, held)
	}
}

// commitSubmitsTx is the transaction of commitSubmits: it admits the units within the rate limit,
// charges them, takes back the count of the jobs not accepted, and stores and queues the accepted jobs.
// It returns the accepted units; each refused unit carries its own error. With a runner name (App.holding)
// the jobs are stored held by this process instead of queued.
func (a *App) commitSubmitsTx(tx *gorm.DB, batch []*submitUnit, runner string) ([]*submitUnit, error) {
	id := batch[0].id
	for _, u := range batch {
		u.err = nil
	}
	counted := countJobs(batch)
	admitted, err := a.admitSubmitsTx(tx, id, batch)
	if err != nil {
		return nil, err
	}
	accepted, err := a.chargeSubmitsTx(tx, id, admitted)
	if err != nil {
		return nil, err
	}
	if err := a.uncountSubmitsTx(tx, id, counted, countJobs(accepted)); err != nil || len(accepted) == 0 {
		return accepted, err
	}
	return accepted, a.storeSubmitsTx(tx, id, accepted, runner)
}

// admitSubmitsTx counts every job of the batch at once (one statement) and returns the units within the
// hourly generate limit, in order; a unit over it is refused with the rate-limit error. What is refused
// is taken back by uncountSubmitsTx.
func (a *App) admitSubmitsTx(tx *gorm.DB, id *Identity, batch []*submitUnit) ([]*submitUnit, error) {
	used, err := a.rateCountTx(tx, id, "generate", countJobs(batch))
	if err != nil {
		return nil, err
	}
	limit := a.Config.GenerateRate
	var admitted []*submitUnit
	for _, u := range batch {
		if used+len(u.jobs) > limit {
			u.err = a.rateLimited("generate", limit, a.Now().Truncate(time.Hour).Add(time.Hour).Sub(a.Now()))
			continue
		}
		used += len(u.jobs)
		admitted = append(admitted, u)
	}
	return admitted, nil
}

// chargeSubmitsTx charges the admitted units and returns those charged: one charge for the whole batch
// when the balance allows it; otherwise unit by unit in order (chargeEachTx). A single unit the balance
// does not cover is refused with the insufficient-credits error; any other failure is returned.
func (a *App) chargeSubmitsTx(tx *gorm.DB, id *Identity, admitted []*submitUnit) ([]*submitUnit, error) {
	if len(admitted) == 0 {
		return nil, nil
	}
	var total int64
	for _, u := range admitted {
		total += u.credits()
	}
	c, err := a.Credits().ChargeTx(tx, id, total, "batch:"+admitted[0].jobs[0].ID, fmt.Sprintf("%d image job(s)", countJobs(admitted)))
	switch {
	case err == nil:
		for _, u := range admitted {
			setCharge(u, c.ChargedTo)
		}
		return admitted, nil
	case KindOf(err) != KindInsufficientCredits:
		return nil, err
	case len(admitted) == 1:
		admitted[0].err = err
		return nil, nil
	}
	return a.chargeEachTx(tx, id, admitted)
}

// chargeEachTx charges the units one by one, in order, and returns those charged; a unit the balance
// does not cover is refused with the insufficient-credits error and the next ones are still tried.
func (a *App) chargeEachTx(tx *gorm.DB, id *Identity, units []*submitUnit) ([]*submitUnit, error) {
	var accepted []*submitUnit
	for _, u := range units {
		uc, err := a.Credits().ChargeTx(tx, id, u.credits(), u.jobs[0].ID, fmt.Sprintf("%d image job(s)", len(u.jobs)))
		if err != nil {
			if KindOf(err) != KindInsufficientCredits {
				return nil, err
			}
			u.err = err
			continue
		}
		setCharge(u, uc.ChargedTo)
		accepted = append(accepted, u)
	}
	return accepted, nil
}

// uncountSubmitsTx takes back from the generate counter the jobs that were counted but not accepted.
func (a *App) uncountSubmitsTx(tx *gorm.DB, id *Identity, counted, accepted int) error {
	if accepted == counted {
		return nil
	}
	return a.rateAddTx(tx, id, "generate", accepted-counted)
}

// storeSubmitsTx stores the jobs of the accepted units, records the tenant's usage of each service and
// queues the jobs, or, with a runner name, stores them held by that process (Holder), which runs them
// once the transaction commits.
func (a *App) storeSubmitsTx(tx *gorm.DB, id *Identity, accepted []*submitUnit, runner string) error {
	all, work, counts := submittedJobs(accepted)
	for _, j := range all {
		j.Runner = nil
		if runner != "" {
			j.Runner = &runner
		}
	}
	if runner != "" {
		work = nil
	}
	if err := tx.CreateInBatches(all, 200).Error; err != nil {
		return Internal("job: create", err)
	}
	if id.TenantID != "" {
		for service, c := range counts {
			if err := upsertUsage(tx, a.usageKeyNow(id.TenantID, service, id.Agent), c); err != nil {
				return Internal("usage: record", err)
			}
		}
	}
	if err := a.enqueue(tx, work...); err != nil {
		return Internal("job: enqueue", err)
	}
	return nil
}

// submittedJobs lists the jobs of the units, their work items, and how many jobs each service has.
func submittedJobs(units []*submitUnit) (all []*Job, work []Work, counts map[string]int64) {
	counts = map[string]int64{}
	for _, u := range units {
		for _, j := range u.jobs {
			all = append(all, j)
			work = append(work, Work{Kind: WorkImage, ID: j.ID})
			service := ServiceImage
			if j.Kind == JobKindImageToTemplate {
				service = ServiceImageToTemplate
			}
			counts[service]++
		}
	}
	return all, work, counts
}

// announceSubmits counts the accepted jobs in the metrics and notifies the workers of each.
func (a *App) announceSubmits(ctx context.Context, accepted []*submitUnit) {
	metrics.JobsSubmitted.WithLabelValues("image").Add(float64(countJobs(accepted)))
	for _, u := range accepted {
		for _, j := range u.jobs {
			a.notify(ctx, TopicJob, j.ID)
		}
	}
}

func countJobs(units []*submitUnit) int {
	n := 0
	for _, u := range units {
		n += len(u.jobs)
	}
	return n
}

func setCharge(u *submitUnit, to string) {
	for _, j := range u.jobs {
		j.ChargedTo = to
	}
}

func setJobOwner(id *Identity, tenantID, accountID, userID **string) {
	if id.TenantID != "" {
		v := id.TenantID
		*tenantID = &v
	}
	if id.AccountID != "" {
		v := id.AccountID
		*accountID = &v
	}
	if id.UserID != "" {
		v := id.UserID
		*userID = &v
	}
}

// Step is one phase of a multi-step job.
type Step struct {
	Name   string     `json:"name"`
	Status StepStatus `json:"status"`
}

func stepsAt(names []string, current int) []Step {
	steps := make([]Step, len(names))
	for i, n := range names {
		switch {
		case i < current:
			steps[i] = Step{n, StepDone}
		case i == current:
			steps[i] = Step{n, StepRunning}
		default:
			steps[i] = Step{n, "waiting"}
		}
	}
	return steps
}

var imageToTemplateStepNames = []string{"read_image", "choose_placeholders", "create_template"}
var specStepNames = []string{"expand_prompt", "generate_image"}

func imageToTemplateSteps(current int) []Step { return stepsAt(imageToTemplateStepNames, current) }
func specSteps(current int) []Step            { return stepsAt(specStepNames, current) }

// JobParams decodes the private parameters of a job.
func (j *Job) JobParams() (ImageParams, error) {
	var p ImageParams
	err := json.Unmarshal(j.Params, &p)
	return p, err
}

// Job returns a job by id, with no visibility check (workers).
func (js *JobService) Job(ctx context.Context, jobID string) (*Job, error) {
	a := js.a
	var j Job
	err := a.DB.WithContext(ctx).First(&j, "id = ?", jobID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound("job")
	}
	if err != nil {
		return nil, Internal("job: read", err)
	}
	return &j, nil
}

// jobScope limits a query to the jobs the identity may see: a tenant key its tenant's, a member or a
// personal login its own.
//
// Its queries are planned for their parameters each time (planEachTime): a tenant's rows grow from a few
// to many between two ANALYZEs, and a plan cached while they were few would stay.
func jobScope(tx *gorm.DB, id *Identity) *gorm.DB {
	ctx := tx.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	tx = tx.WithContext(planEachTime(ctx))
	switch id.Kind {
	case IdentityTenant:
		return tx.Where("tenant_id = ?", id.TenantID)
	case IdentityAccount:
		return tx.Where("account_id = ?", id.AccountID)
	case IdentityUser:
		return tx.Where("user_id = ?", id.UserID)
	}
	return tx.Where("1 = 0")
}

// VisibleTo is jobScope's rule applied to one row in memory: the event broker matches a change against
// every open `jobs` subscription with it, without a query per subscription.
func (j *Job) VisibleTo(id *Identity) bool {
	switch id.Kind {
	case IdentityTenant:
		return j.TenantID != nil && *j.TenantID == id.TenantID
	case IdentityAccount:
		return j.AccountID != nil && *j.AccountID == id.AccountID
	case IdentityUser:
		return j.UserID != nil && *j.UserID == id.UserID
	}
	return false
}

// JobFor returns a job the identity may see; any other is not found.
func (js *JobService) JobFor(ctx context.Context, id *Identity, jobID string) (*Job, error) {
	a := js.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	return ReadJobFor(ctx, a.DB, id, jobID)
}

// ReadJobFor is App.JobFor over the database alone, for the parts built before the App (the event broker).
func ReadJobFor(ctx context.Context, db *DB, id *Identity, jobID string) (*Job, error) {
	return readScoped[Job](ctx, db, id, jobID, "job")
}

// readScoped reads one row of T (a job or a video task) that the identity may see (jobScope); any other
// is KindNotFound naming what.
func readScoped[T any](ctx context.Context, db *DB, id *Identity, rowID, what string) (*T, error) {
	var row T
	err := jobScope(db.WithContext(ctx), id).First(&row, "id = ?", rowID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound(what)
	}
	if err != nil {
		return nil, Internal(what+": read", err)
	}
	return &row, nil
}

// JobView is the public shape of a job (D6); it never carries the prompt or an upstream name.
type JobView struct {
	JobID      string    `json:"jobId"`
	Status     JobStatus `json:"status"`
	Progress   string    `json:"progress"`
	CDNURL     string    `json:"cdn_url,omitempty"`
	Error      *string   `json:"error"`
	TemplateID string    `json:"template_id,omitempty"`
	Steps      []Step    `json:"steps,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// View returns the public shape of the job.
func (j *Job) View() JobView {
	v := JobView{JobID: j.ID, Status: j.Status, Progress: j.Progress, CDNURL: j.CDNURL, Error: j.Error,
		CreatedAt: j.CreatedAt.UTC(), UpdatedAt: j.UpdatedAt.UTC()}
	if len(j.Steps) > 0 {
		_ = json.Unmarshal(j.Steps, &v.Steps)
	}
	if j.Kind == JobKindImageToTemplate && j.Status == JobDone {
		v.TemplateID = j.ResultRef
	}
	return v
}

// JobPage is one page of a job listing.
type JobPage struct {
	Jobs       []JobView
	NextCursor string
}

// Jobs lists the identity's jobs, newest first, with an opaque cursor.
func (js *JobService) Jobs(ctx context.Context, id *Identity, status, cursor string, limit int) (*JobPage, error) {
	a := js.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = JobsPageDefault
	}
	limit = min(limit, JobsPageMax)
	q := jobScope(a.DB.WithContext(ctx), id)
	switch JobStatus(status) {
	case "":
	case JobPending, JobDone, JobFailed:
		q = q.Where("status = ?", status)
	default:
		return nil, Invalid("status must be pending, done or failed")
	}
	if cursor != "" {
		at, jid, err := decodeCursor(cursor)
		if err != nil {
			return nil, Invalid("invalid cursor")
		}
		q = q.Where("(created_at < ?) OR (created_at = ? AND id < ?)", at, at, jid)
	}
	var rows []Job
	if err := q.Order("created_at DESC, id DESC").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, Internal("job: list", err)
	}
	page := &JobPage{Jobs: make([]JobView, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		page.NextCursor = encodeCursor(last.CreatedAt, last.ID)
	}
	for i := range rows {
		page.Jobs = append(page.Jobs, rows[i].View())
	}
	return page, nil
}

func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + "|" + id))
}

func decodeCursor(c string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", err
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return time.Time{}, "", errors.New("cursor")
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	return at, id, err
}

// SubmitImages validates, plans and charges image requests, then queues them: all accepted or none.
func (js *JobService) SubmitImages(ctx context.Context, id *Identity, reqs []GenerateRequest) ([]*Job, error) {
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, Invalid("items must hold at least one request")
	}
	if len(reqs) > MaxBatch {
		return nil, Invalid("a batch holds at most %d items, got %d", MaxBatch, len(reqs))
	}
	r, err := js.a.router()
	if err != nil {
		return nil, err
	}
	prepared := make([]*PreparedImage, len(reqs))
	for i, req := range reqs {
		p, err := js.PrepareImage(ctx, id, req)
		if err != nil {
			if len(reqs) > 1 {
				return nil, prefixError(fmt.Sprintf("items[%d]: ", i), err)
			}
			return nil, err
		}
		if err := r.PlanImage(&p.Params); err != nil {
			return nil, err
		}
		prepared[i] = p
	}
	return js.CreateImageJobs(ctx, id, prepared)
}

// prefixError adds a prefix to the message of an invalid-input error.
func prefixError(prefix string, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind == KindInvalid {
		c := *e
		c.Message = prefix + e.Message
		return &c
	}
	return err
}

// SubmitImageToTemplate charges and queues an image-to-template job (read the image, choose
// placeholders, create the template).
func (js *JobService) SubmitImageToTemplate(ctx context.Context, id *Identity, req ImageToTemplateRequest) (*Job, error) {
	p, err := js.PrepareImageToTemplate(ctx, id, req)
	if err != nil {
		return nil, err
	}
	r, err := js.a.router()
	if err != nil {
		return nil, err
	}
	if err := r.PlanChat(true); err != nil {
		return nil, err
	}
	jobs, err := js.CreateImageJobs(ctx, id, []*PreparedImage{p})
	if err != nil {
		return nil, err
	}
	return jobs[0], nil
}

// MayFollow answers whether the identity has jobs and video tasks to follow (403 when not), before a
// WebSocket connection is accepted; each Follow operation checks again.
func (js *JobService) MayFollow(id *Identity) error { return id.Require(CapGenerate) }

// Live reports whether changes can be followed on this replica (the console's live lists).
func (js *JobService) Live() bool { return js.a.deps.Follower != nil }

// FollowJob streams one image job's changes.
func (js *JobService) FollowJob(ctx context.Context, id *Identity, jobID string) (<-chan *JobView, error) {
	f, err := js.a.follower()
	if err != nil {
		return nil, err
	}
	return f.FollowJob(ctx, id, jobID)
}

// FollowJobs streams the changes of every job the identity may see.
func (js *JobService) FollowJobs(ctx context.Context, id *Identity) (<-chan *JobView, error) {
	f, err := js.a.follower()
	if err != nil {
		return nil, err
	}
	return f.FollowJobs(ctx, id)
}

// JobService holds the image jobs: submitting, reading and the steps the workers record.
type JobService struct{ a *App }

// Jobs returns the image jobs.
func (a *App) Jobs() *JobService { return a.svc.jobs }
